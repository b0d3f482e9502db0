"""`olav serve` in this process, for tests that make many requests or reach into the server:
the real Server and its ASGI app (token check, audit, console) behind a real uvicorn on
127.0.0.1, in a thread of the test. The socket listens before uvicorn starts, so a first
request simply waits for it.

- :func:`local_server`: a scripted model that answers ``answer to <request>`` (no model
  stub; a run takes a few milliseconds once its session is built). Two of them on one
  workspace are two servers sharing its threads file, as two `olav serve` processes would.
- :func:`serving_here`: a workspace on the Ollama stub (tests.serve._support), with the
  server's own options (CORS origins, the body limit)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.serve._support import Model, make_workspace
from tests.stubs.ollama_stub import StubState, ollama_stub

TURNS = 20_000  # the scripted model's answers, shared by every session of a server
STOP_S = 30.0


@contextlib.contextmanager
def _uvicorn(app: Any, **options: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free port of 127.0.0.1 until the block ends: its URL."""
    import uvicorn

    from olav.core.net import listen

    sock = listen("127.0.0.1", 0)
    config = uvicorn.Config(app, access_log=False, lifespan="off", **options)
    userver = uvicorn.Server(config)
    worker = threading.Thread(
        target=userver.run, kwargs={"sockets": [sock]}, name="olav-serve-test", daemon=True
    )
    worker.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        userver.should_exit = True
        worker.join(STOP_S)
        sock.close()
        assert not worker.is_alive(), "the in-process server did not stop"


@dataclass
class Local:
    url: str
    server: Any  # olav.serve.server.Server
    ws: Path
    alice: str  # the workspace's own operator
    tokens: dict[str, str]  # operator -> token

    def http(self, operator: str = "") -> httpx.Client:
        """An httpx client with ``operator``'s token (alice's by default)."""
        token = self.tokens[operator or self.alice]
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    @contextlib.contextmanager
    def console(self, operator: str = "") -> Iterator[httpx.Client]:
        """An httpx client logged in to the console as ``operator`` (alice by default)."""
        with httpx.Client(base_url=self.url, timeout=60) as client:
            got = client.post(
                "/login",
                data={"token": self.tokens[operator or self.alice]},
                headers={"Origin": self.url},
            )
            assert got.status_code == 303, got.text
            yield client


def tokens_for(root: Path, *operators: str) -> tuple[str, dict[str, str]]:
    """Tokens of the workspace's own operator and of ``operators``: (its name, tokens)."""
    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace
    from olav.memory.store.scopes import user_name

    ws = Workspace.open(root)
    alice = user_name(ws.config)
    store = TokenStore.for_workspace(ws, touch_interval=None)
    tokens = {}
    for operator in (alice, *operators):
        info, token = store.create(operator, note="in-process")
        tokens[info.operator] = token
    return alice, tokens


def echo_model() -> Any:
    from olav.llm.models import ScriptedChatModel

    return ScriptedChatModel(turns=[{"content": "answer to ", "echo": True}] * TURNS)


@contextlib.contextmanager
def local_server(root: Path, tokens: dict[str, str], alice: str) -> Iterator[Local]:
    """A Server on the workspace at ``root`` (its own thread store and session pool),
    listening on a free port until the block ends."""
    from olav.access.tokens import TokenStore
    from olav.core.config import Workspace
    from olav.serve.app import Server, create_app
    from olav.serve.gate import guarded

    ws = Workspace.open(root)
    server = Server(
        ws, model=echo_model(), tokens=TokenStore.for_workspace(ws, touch_interval=None)
    )
    try:
        with _uvicorn(guarded(create_app(server), server), log_level="warning") as url:
            yield Local(url, server, root, alice, tokens)
    finally:
        server.close()
        server.threads.close()


def human(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def sse(text: str) -> list[tuple[int, str, Any]]:
    """(id, event, data) of a whole server-sent event stream."""
    import json

    out: list[tuple[int, str, Any]] = []
    for block in text.split("\n\n"):
        number, event, data = 0, "", []
        for line in block.splitlines():
            if line.startswith("id:"):
                number = int(line[3:].strip())
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if event:
            out.append((number, event, json.loads("\n".join(data)) if data else None))
    return out


@dataclass
class Here:
    url: str
    ws: Path
    server: Any  # olav.serve.server.Server
    api: Any  # its Starlette app (the routes), inside the guard
    state: StubState
    alice: str
    tokens: dict[str, str]  # operator -> token

    def http_events(self) -> list[dict[str, Any]]:
        """The details of the audit's ``http_request`` events, read over a read-write
        connection: DuckDB refuses a read-only one to a file this process also writes."""
        import json

        from olav.audit.db import connect

        with connect(Path(self.server.ws.audit_path)) as con:
            rows = con.execute("SELECT detail FROM events WHERE kind = 'http_request'").fetchall()
        return [json.loads(r[0]) for r in rows]

    def http(self, operator: str | None = "", **kw: Any) -> httpx.Client:
        """An httpx client on the server with ``operator``'s token (None: no token)."""
        headers = dict(kw.pop("headers", {}))
        if operator is not None:
            headers["Authorization"] = f"Bearer {self.tokens[operator or self.alice]}"
        kw.setdefault("timeout", 60)
        return httpx.Client(base_url=self.url, headers=headers, **kw)


@contextlib.contextmanager
def serving_here(
    root: Path, *, cors: Sequence[str] = (), max_body: int = 20000, model: Model | None = None
) -> Iterator[Here]:
    from olav.core.config import Workspace
    from olav.serve.app import Server, create_app
    from olav.serve.gate import guarded

    model = model or Model()
    state = StubState(chat_reply=model.reply)
    with ollama_stub(state) as (url, _):
        ws, alice, tokens, _ids = make_workspace(root, url)
        server = Server(Workspace.open(ws), max_body=max_body)
        api = create_app(server, cors=cors)
        try:
            # log_config None: uvicorn's records go to the root logger, where caplog sees them
            with _uvicorn(guarded(api, server), log_config=None) as base:
                try:
                    yield Here(base, ws, server, api, state, alice, tokens)
                finally:
                    for gate in list(model.gates.values()):
                        gate.release.set()
        finally:
            server.close()
