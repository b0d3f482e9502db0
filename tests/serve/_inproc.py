"""`olav serve`'s app in the test's own process: the real Server, guard and routes behind a real
uvicorn on 127.0.0.1 (in a thread), over a workspace on the Ollama stub. For tests that send
many requests, or need to reach into the server (a fault that stands in for a bug of olav's),
where a subprocess per module would cost seconds of start-up and hide the server's state.

The socket listens before uvicorn starts, so the first request simply waits for it: nothing
needs to poll for "started"."""

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

STOP_S = 30.0


@dataclass
class Here:
    url: str
    ws: Path
    server: Any  # olav.serve.app.Server
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
    import uvicorn

    from olav.core.config import Workspace
    from olav.core.net import listen
    from olav.serve.app import Server, _Auth, create_app

    model = model or Model()
    state = StubState(chat_reply=model.reply)
    with ollama_stub(state) as (url, _):
        ws, alice, tokens, _ids = make_workspace(root, url)
        server = Server(Workspace.open(ws), max_body=max_body)
        api = create_app(server, cors=cors)
        app = _Auth(api, server)
        sock = listen("127.0.0.1", 0)
        # log_config None: uvicorn's records go to the root logger, where caplog sees them
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        userver = uvicorn.Server(config)
        thread = threading.Thread(
            target=userver.run, kwargs={"sockets": [sock]}, name="olav-serve-test", daemon=True
        )
        thread.start()
        try:
            base = f"http://127.0.0.1:{sock.getsockname()[1]}"
            yield Here(base, ws, server, api, state, alice, tokens)
        finally:
            for gate in list(model.gates.values()):
                gate.release.set()
            userver.should_exit = True
            thread.join(STOP_S)
            server.close()
            sock.close()
            assert not thread.is_alive(), "the in-process server did not stop"
