"""What the tests share: workspaces, the CLI in a subprocess, stores, rows, and the types of
the fixtures in conftest.py. Test modules import from here, never from each other."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from olav.memory.store.embedders import EmbedderProxy, HashEmbedder
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore

if TYPE_CHECKING:
    from click.testing import Result

    from olav.core.config import Workspace
    from olav.llm.models import ScriptedChatModel
    from olav.runtime.runner import Session

EVERY_ROW = SearchFilter(reader=EVERYONE)
"""Every live row of every scope: a test's search of its own table."""

HASH_CONFIG = """\
embedder:
  provider: hash
  model: hash-64
llm:
  base_url: http://127.0.0.1:9
# scripted runs that narrate stay narrated: the nudge would replay the script's next turn.
# The rescue layer's own tests (tests/runtime/test_rescue_*.py) turn it on.
runtime:
  nudge: false
"""


class OlavCli(Protocol):
    """The ``olav`` fixture: the CLI in-process, returning click's Result."""

    def __call__(self, *args: str, input: str | None = None) -> Result: ...


class OlavMain(Protocol):
    """The ``olav_main`` fixture: the entry point in-process, as run_olav's result."""

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]: ...


# the ``session_for`` fixture: session_for(turns, **Session kwargs) -> (Session, model)
SessionFor = Callable[..., "tuple[Session, ScriptedChatModel]"]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without any OLAV_* variable, plus ``extra``: what a
    subprocess under test starts with, so the developer's configuration never leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
    env.update(extra or {})
    return env


def write_config(root: Path, text: str = HASH_CONFIG) -> None:
    (root / ".olav").mkdir(parents=True, exist_ok=True)
    (root / ".olav" / "olav.yaml").write_text(text)


OPENAI_MODEL = "qwen3-8b-instruct"


def spawn_olav(cwd: Path, *args: str) -> Any:
    """``olav ARGS`` under a pty (pexpect), 120 columns by 40 lines, a dumb terminal: what a
    person at a terminal would see."""
    import pexpect

    env = clean_env()
    env.update({"TERM": "dumb", "COLUMNS": "120", "LINES": "40"})
    return pexpect.spawn(
        sys.executable,
        ["-c", "from olav.cli.app import main; main()", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=120,
        dimensions=(40, 120),
    )


def ollama_config(url: str, extra: str = "") -> str:
    """olav.yaml of a workspace on the Ollama stub at ``url`` (see :func:`ollama_workspace`)."""
    return (
        f"llm:\n  base_url: {url}\n  model: qwen3:8b\n"
        "embedder:\n  provider: ollama\n  model: bge-m3\n" + extra
    )


def openai_config(url: str, embedder: str = "openai") -> str:
    """olav.yaml of a workspace on the OpenAI-compatible stub at ``url``, its embedder the
    stub's or (``embedder="hash"``) the hash one (see :func:`openai_workspace`)."""
    llm = f"llm:\n  provider: openai\n  base_url: {url}\n  model: {OPENAI_MODEL}\n"
    if embedder == "openai":
        return llm + "embedder:\n  provider: openai\n  model: bge-m3\n"
    return HASH_CONFIG.split("llm:")[0] + llm


# What `olav init` writes depends on the embedder alone (its name, its dimension and the
# vectors of the template guides), never on the rest of olav.yaml nor on the stub's address:
# the stubs embed with a deterministic hash (tests.stubs.ollama_stub.stub_vector), so a table
# primed through one stub is the table any other primes. One template per embedder is made
# once per test process; a workspace is a copy of it with its own olav.yaml written over.
TEMPLATE_EMBEDDERS = ("hash", "ollama", "openai")
_templates: dict[str, Path] = {}


def _init_template(root: Path, embedder: str) -> None:
    from olav.admin.setup import init_workspace

    if embedder == "hash":
        write_config(root)
        init_workspace(root)
        return
    from tests.stubs.ollama_stub import ollama_stub
    from tests.stubs.openai_stub import openai_stub

    # the stubs' default models: bge-m3 of 32 dimensions, as every test's stub serves it
    with (ollama_stub if embedder == "ollama" else openai_stub)() as (url, _):
        config = ollama_config(url) if embedder == "ollama" else openai_config(url)
        write_config(root, config)
        init_workspace(root)


def workspace_template(embedder: str) -> Path:
    """The workspace `olav init` makes with ``embedder`` ("hash": hash-64; "ollama" and
    "openai": bge-m3 of 32 dimensions on that stub), made once per process in a temporary
    folder removed at exit. Never changed: tests get copies (:func:`workspace_from_template`)."""
    if embedder not in TEMPLATE_EMBEDDERS:
        raise ValueError(f"no workspace template for the embedder {embedder!r}")
    if embedder not in _templates:
        base = Path(tempfile.mkdtemp(prefix=f"olav-{embedder}-template-"))
        atexit.register(shutil.rmtree, base, ignore_errors=True)
        _init_template(base / "ws", embedder)
        _templates[embedder] = base / "ws"
    return _templates[embedder]


def workspace_from_template(root: Path, embedder: str, config: str) -> Path:
    """What ``write_config(root, config)`` then ``olav init`` make at ``root``, where
    ``config`` configures ``embedder`` as :func:`workspace_template` made it: a copy of that
    template (milliseconds, not an init) with ``config`` as its olav.yaml. A ``root`` that
    already holds something is initialised for real, as init would refresh it."""
    if root.exists() and any(root.iterdir()):
        from olav.admin.setup import init_workspace

        write_config(root, config)
        init_workspace(root)
        return root
    shutil.copytree(workspace_template(embedder), root, dirs_exist_ok=True)
    write_config(root, config)
    return root


def ollama_workspace(root: Path, url: str, extra: str = "") -> Path:
    """A workspace at ``root`` whose chat model and embedder are the Ollama server at ``url``
    (tests.stubs.ollama_stub, serving bge-m3 of its default 32 dimensions); ``extra`` is
    appended to its olav.yaml. A copy of the template: init sent the stub nothing."""
    return workspace_from_template(root, "ollama", ollama_config(url, extra))


def openai_workspace(root: Path, url: str, *, embedder: str = "openai") -> Path:
    """A workspace whose chat model (and, by default, embedder) is the OpenAI-compatible
    server at ``url`` (tests.stubs.openai_stub, bge-m3 of its default 32 dimensions). A copy
    of the template: init sent the stub nothing."""
    kind = "openai" if embedder == "openai" else "hash"
    return workspace_from_template(root, kind, openai_config(url, embedder))


def scripted_ws(root: Path, turns: list[dict[str, Any]]) -> Workspace:
    """Point the workspace at ``root`` to a scripted model that plays ``turns``."""
    from olav.core.config import Workspace

    (root / "script.yaml").write_text(yaml.safe_dump(turns, allow_unicode=True))
    cfg = root / ".olav" / "olav.yaml"
    data = yaml.safe_load(cfg.read_text()) or {}
    data.setdefault("llm", {}).update({"provider": "scripted", "script": "script.yaml"})
    cfg.write_text(yaml.safe_dump(data))
    return Workspace.open(root)


def audit_rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query on the workspace's audit database, through olav's own connect: it
    waits out another process's lock, and shares the file with a server in this process
    (DuckDB refuses a read-only connection beside a read-write one of the same process)."""
    from olav.audit.db import connect

    with connect(root / ".olav/databases/audit.duckdb") as con:
        return list(con.execute(sql).fetchall())


def audit_events(root: Path, kind: str) -> list[dict[str, Any]]:
    """The details of the workspace's audit events of ``kind``, oldest first."""
    import json

    sql = f"SELECT detail FROM events WHERE kind = '{kind}' ORDER BY created_at"
    return [json.loads(r[0]) for r in audit_rows(root, sql)]


# `olav cron serve` with a seconds field (argv[1], e.g. "*/2"): "* * * * *" then fires every
# few seconds, so a test of the daemon does not wait for minute boundaries. The command itself
# is this plus opening the workspace in the cwd (its CLI path is tested in-process).
CRON_SERVE = (
    "import sys; from olav.core.config import Workspace; from olav.cron.scheduler import serve; "
    "serve(Workspace.open(), seconds=sys.argv[1])"
)


def wait_until(
    condition: Callable[[], Any], timeout: float, what: str, *, every: float = 0.2
) -> Any:
    """Poll ``condition`` every ``every`` seconds until it returns something true (returned),
    or fail the test after ``timeout`` seconds naming ``what``: for state another process
    writes, which sends no signal to wait on."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def run_olav(
    *args: str, cwd: Path, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `olav` entry point in a subprocess (as a user would)."""
    full_env = clean_env(env)
    return subprocess.run(
        [sys.executable, "-c", "from olav.cli.app import main; main()", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=300,
    )


def olav_entry(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``olav ARGS`` through its entry point (``olav.cli.app.main``) in this process, in
    ``root``: its exit status and what it prints on stdout and stderr, an error as the one
    red line a user sees. For the many refusals whose contract is that line; a test of the
    process itself (start-up, a signal, the pty) runs ``olav`` as a process."""
    from click.testing import CliRunner

    from olav.cli.app import main

    previous, argv = Path.cwd(), sys.argv
    os.chdir(root)
    sys.argv = ["olav", *args]
    try:
        with CliRunner().isolation() as (out, err, _):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            sys.stdout.flush()  # the isolation's text wrappers buffer what print_json wrote
            sys.stderr.flush()
            stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    finally:
        os.chdir(previous)
        sys.argv = argv
    return subprocess.CompletedProcess(["olav", *args], code, stdout, stderr)


def olav_here(root: Path, *args: str, input: str | None = None) -> Any:
    """The same ``olav`` command in this process, with ``root`` as the working directory:
    for the many successful steps of a scenario, which a fresh interpreter would make cost
    2-3 s each (lancedb's import). A step that fails raises its error, so a test that checks
    what a user sees on failure (the one-line error on stderr) runs ``olav`` as a process."""
    from typer.testing import CliRunner

    from olav.cli.app import app

    previous = Path.cwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(app, list(args), input=input, catch_exceptions=True)
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


_FRESH_ROW = """
import sys
from pathlib import Path
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.table import MemoryStore
store = MemoryStore(Path(sys.argv[1]), HashEmbedder("hash-64"))
store.upsert([MemoryRecord(id="fresh", text=sys.argv[2], category="fact", scope="global",
                           origin="user")])
"""


def write_from_another_process(db_path: Path, text: str) -> None:
    """Another process upserts the row ``fresh`` with ``text`` into the table at ``db_path``
    (hash embedder), as a second olav on the same workspace would."""
    subprocess.run([sys.executable, "-c", _FRESH_ROW, str(db_path), text], check=True)


class DelegatingEmbedder(EmbedderProxy):
    """The product's pass-through embedder over the test hash embedder unless ``inner`` is
    given: a test subclasses it to change one method (count, gate or break it)."""

    def __init__(self, inner: Any = None) -> None:
        super().__init__(inner if inner is not None else HashEmbedder("hash-64"))


def hash_store(path: Path, dim: int = 64, **kw: object) -> MemoryStore:
    return MemoryStore(path, HashEmbedder(f"hash-{dim}"), **kw)  # type: ignore[arg-type]


def rec(id: str, text: str, **kw: object) -> MemoryRecord:
    kw.setdefault("category", "fact")
    return MemoryRecord(id=id, text=text, **kw)  # type: ignore[arg-type]


def tool_context(root: Path, agent: str = "core") -> Any:
    """A ToolContext over the workspace at ``root``, as the agent builder makes one."""
    from olav.core.config import Workspace
    from olav.runtime.tools import ToolContext

    ws = Workspace.open(root)
    return ToolContext(
        root=ws.root,
        exports=ws.exports,
        domain_db=ws.domain_path,
        audit_db=ws.audit_path,
        agent=agent,
        store_factory=lambda: MemoryStore.for_workspace(ws),
    )
