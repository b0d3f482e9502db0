"""What the `olav serve` end-to-end tests share: a workspace on the Ollama stub, tokens for three
operators (the workspace's own, whose terminal threads are hers, bob and carol), served by
what `olav serve` runs (:class:`olav.serve.app.Listening`: the Server, its app and uvicorn) in a
thread of this process; a test of the process itself (a kill, a signal, a restart) asks for
``serving(..., process=True)``: the real CLI in a subprocess.

The stub answers ``answer to <request>``. A test holds a run mid-flight with
``served.model.hold(tag)``: the model call of a request that contains ``tag`` waits, in the
stub's thread of this process, until the test releases it (an event, never a sleep)."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import clean_env, ollama_workspace
from tests.stubs.ollama_stub import StubState, ollama_stub

HOLD_S = 60.0  # the longest a held model call waits for its release
START_S = 60.0
# the stub answers every request, tool-worthy or not: the rescue layer's nudge stays out of it
NO_NUDGE = "runtime:\n  nudge: false\n"


def human(text: str) -> dict[str, Any]:
    """An Agent Protocol input: the person's message."""
    return {"messages": [{"role": "user", "content": text}]}


def last_user(body: dict[str, Any]) -> str:
    """The person's last message, without the recall block AutoRecall puts in front of it."""
    text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    return str(text).rsplit("</relevant-memories>", 1)[-1].strip()


def chat_bodies(state: StubState) -> list[dict[str, Any]]:
    return [body for path, body in list(state.requests) if path == "/api/chat"]


def request_for(state: StubState, text: str) -> dict[str, Any]:
    """The (last) chat request whose person's message is ``text``."""
    found = [b for b in chat_bodies(state) if last_user(b) == text]
    assert found, f"the model never got {text!r}"
    return found[-1]


def sent_text(body: dict[str, Any]) -> str:
    """Everything a chat request showed the model, as one string."""
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


@dataclass
class Gate:
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def wait_held(self) -> None:
        assert self.held.wait(HOLD_S), "the run never reached its model call"


class Model:
    """The stub's replies: ``answer to <request>``; a request containing a held tag waits."""

    def __init__(self) -> None:
        self.gates: dict[str, Gate] = {}

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        text = last_user(body)
        for tag, gate in list(self.gates.items()):
            if tag in text:
                gate.held.set()
                gate.release.wait(HOLD_S)
        return {"content": f"answer to {text}"}

    @contextlib.contextmanager
    def hold(self, tag: str) -> Iterator[Gate]:
        gate = self.gates[tag] = Gate()
        try:
            yield gate
        finally:
            gate.release.set()
            self.gates.pop(tag, None)


@dataclass
class Served:
    url: str
    ws: Path
    state: StubState
    model: Model
    proc: subprocess.Popen[str] | None  # the `olav serve` process (None: served in this one)
    alice: str  # the workspace's operator: the terminal's threads are hers
    tokens: dict[str, str]  # operator -> token
    token_ids: dict[str, str]  # operator -> token id
    clients: dict[str, Any] = field(default_factory=dict)

    def sdk(self, operator: str = "") -> Any:
        """langgraph-sdk's client with ``operator``'s token (alice's by default): one per
        operator, closed with the server."""
        from langgraph_sdk import get_sync_client

        operator = operator or self.alice
        if operator not in self.clients:
            self.clients[operator] = get_sync_client(url=self.url, api_key=self.tokens[operator])
        return self.clients[operator]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()

    def http(self, operator: str | None = "", **kw: Any) -> httpx.Client:
        """An httpx client on the server, with ``operator``'s token (None: no token)."""
        headers = {}
        if operator is not None:
            headers["Authorization"] = f"Bearer {self.tokens[operator or self.alice]}"
        kw.setdefault("timeout", 60)
        return httpx.Client(base_url=self.url, headers=headers, **kw)


def start_server(ws: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`olav serve --port 0 ARGS` in ``ws``; returns the process and its URL once it listens.
    Its stderr goes to a file (a pipe nobody reads could fill up and stall the server)."""
    cli = [sys.executable, "-c", "from olav.cli.app import main; main()"]
    err = _stderr_file(ws)
    with err.open("w") as sink:
        proc = subprocess.Popen(
            [*cli, "serve", "--port", "0", *args],
            cwd=ws,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    _stderr[proc.pid] = err
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(START_S)
    line = ready[0] if ready else ""
    if "listening on http://" not in line:
        pytest.fail(f"olav serve did not start: {line!r} {stop_server(proc)[-3000:]}")
    return proc, line.strip().rsplit(" ", 1)[-1]


_stderr: dict[int, Path] = {}


def _stderr_file(ws: Path) -> Path:
    n = 0
    while (ws.parent / f"serve-{n}.stderr").exists():
        n += 1
    return ws.parent / f"serve-{n}.stderr"


def stop_server(proc: subprocess.Popen[str]) -> str:
    """Stop the server (SIGTERM, then SIGKILL); what it wrote on stderr ("" when it was
    stopped before)."""
    if proc.stdout is None or proc.stdout.closed:
        return ""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=30)
    err = _stderr.pop(proc.pid, None)
    return err.read_text() if err is not None else ""


def make_workspace(root: Path, url: str) -> tuple[Path, str, dict[str, str], dict[str, str]]:
    """A workspace on the stub at ``url``, with tokens for its operator (an admin), bob and carol
    (operators)."""
    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace
    from olav.memory.store.scopes import user_name

    ws = ollama_workspace(root, url, NO_NUDGE)
    alice = user_name(Workspace.open(ws).config)
    assert alice != "bob"
    store = TokenStore.for_workspace(Workspace.open(ws), touch_interval=None)
    tokens, ids = {}, {}
    for operator in (alice, "bob", "carol"):
        info, token = store.create(
            operator, note="e2e", role="admin" if operator == alice else "operator"
        )
        tokens[info.operator], ids[info.operator] = token, info.id
    return ws, alice, tokens, ids


@contextlib.contextmanager
def serving(
    root: Path,
    *args: str,
    prepare: Callable[[Path], None] | None = None,
    model: Model | None = None,
    process: bool = False,
) -> Iterator[Served]:
    """A workspace on a fresh stub, served as `olav serve ARGS` serves it; ``prepare(ws)`` runs
    before the server starts (the stub is up: the embedder works); ``model`` replaces the
    stub's replies. With ``process``, the real CLI in a subprocess (its stderr must hold no
    traceback); without, the same server in a thread of this process (no error may be
    logged with a traceback)."""
    model = model or Model()
    state = StubState(chat_reply=model.reply)
    with ollama_stub(state) as (url, _):
        ws, alice, tokens, ids = make_workspace(root, url)
        if prepare is not None:
            prepare(ws)
        with contextlib.nullcontext("") if process else _in_thread(ws, args) as base:
            proc = None
            if process:
                proc, base = start_server(ws, *args)
            served = Served(base, ws, state, model, proc, alice, tokens, ids)
            try:
                yield served
            finally:
                served.close()
                for gate in list(model.gates.values()):
                    gate.release.set()
                if served.proc is not None:  # the process a test may have restarted
                    err = stop_server(served.proc)
                    assert "Traceback" not in err, err[-4000:]


class _Tracebacks(logging.Handler):
    """Records logged with an exception: what a served process would print as a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.seen.append(f"{record.name}: {record.getMessage()}\n{self.format(record)}")


@contextlib.contextmanager
def _in_thread(ws: Path, args: Sequence[str]) -> Iterator[str]:
    """`olav serve ARGS` (``--cors ORIGIN``, ``--max-body N``) in a thread of this process, on a
    free port of 127.0.0.1: its URL until the block ends, then stopped as SIGTERM stops it."""
    from olav.core.config import Workspace
    from olav.serve.app import Listening

    options: dict[str, Any] = {"cors": []}
    rest = list(args)
    while rest:
        flag, value = rest.pop(0), rest.pop(0)
        if flag == "--cors":
            options["cors"].append(value)
        elif flag == "--max-body":
            options["max_body"] = int(value)
        else:
            raise AssertionError(f"serving() in this process does not take {flag}")
    listening = Listening(Workspace.open(ws), port=0, log_config=None, **options)
    worker = threading.Thread(target=listening.run, name="olav-serve-test", daemon=True)
    errors = _Tracebacks()
    logging.getLogger().addHandler(errors)
    worker.start()
    try:
        yield listening.url
    finally:
        listening.stop()
        worker.join(START_S)
        logging.getLogger().removeHandler(errors)
        assert not worker.is_alive(), "the server did not stop"
        assert not errors.seen, "\n".join(errors.seen)[-4000:]


def sse_events(response: httpx.Response) -> Iterator[tuple[int, str, Any]]:
    """(id, event, data) of a server-sent event stream, as they arrive."""
    number, event, data = 0, "", []
    for line in response.iter_lines():
        if not line:
            if event:
                yield number, event, json.loads("\n".join(data)) if data else None
            number, event, data = 0, "", []
        elif line.startswith("id:"):
            number = int(line[3:].strip())
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())


def http_events(ws: Path) -> list[dict[str, Any]]:
    """The details of the audit's ``http_request`` events. The connection is read-write:
    DuckDB refuses a read-only one to a file this process also has open (a server served
    here), and olav's connect waits out another process's lock."""
    from olav.audit.db import connect

    with connect(ws / ".olav" / "databases" / "audit.duckdb") as con:
        rows = con.execute("SELECT detail FROM events WHERE kind = 'http_request'").fetchall()
    return [json.loads(r[0]) for r in rows]


# -- the console in a browser: Debian's chromium driven by playwright --------------------------

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Debian's chromium under playwright, headless, with a fresh temporary profile; a
    missing chromium fails the test with how to install it (never a skip)."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"the console's browser tests need Debian's chromium at {CHROMIUM}: "
            "`apt-get install chromium` (as root: `make browser`)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def logged_in_page(served: Served, operator: str = "") -> Iterator[Any]:
    """A browser tab logged in to the console as ``operator`` (alice by default)."""
    with chromium() as launched:
        tab = launched.new_context(viewport={"width": 1280, "height": 800}).new_page()
        tab.set_default_timeout(20_000)
        log_in(tab, served, operator)
        yield tab


def log_in(page: Any, served: Served, operator: str = "") -> None:
    page.goto(served.url + "/login")
    page.get_by_label("Token").fill(served.tokens[operator or served.alice])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(served.url + "/")


@contextlib.contextmanager
def session(served: Served, operator: str = "") -> Iterator[httpx.Client]:
    """An httpx client logged in to the console as ``operator`` (no API token)."""
    with httpx.Client(base_url=served.url, timeout=60) as client:
        got = client.post(
            "/login",
            data={"token": served.tokens[operator or served.alice]},
            headers={"Origin": served.url},
        )
        assert got.status_code == 303 and got.headers["location"] == "/", got.text
        yield client


def log_near_miss(ws: Path, request: str, guide_id: str, margin: float, floor: float) -> None:
    """A recall of ``request`` in the audit's recall log that injected nothing, although
    ``guide_id`` came within ``floor - margin`` of its floor (a gap of `olav memory gaps`)."""
    import uuid
    from datetime import UTC, datetime

    from olav.audit.db import connect
    from olav.core.config import Workspace

    cands = [{"id": guide_id, "category": "usage_guide", "decision": "irrelevant"}]
    cands[0] |= {"margin": margin, "floor": floor}
    with connect(Path(Workspace.open(ws).audit_path)) as con:
        con.execute(
            "INSERT INTO recalls (id, run_id, agent, query, candidates, injected, latency_ms, "
            "created_at) VALUES (?, NULL, 'core', ?, ?, '[]', 1.0, ?)",
            [uuid.uuid4().hex, request, json.dumps(cands), datetime.now(UTC)],
        )
