"""`olav serve` in this process, for tests that make many requests: the real Server and its
ASGI app (token check, audit, console) behind uvicorn on 127.0.0.1, in a thread of the test,
on a scripted model that answers ``answer to <request>``. No subprocess and no model stub:
a run takes a few milliseconds once its session is built.

Two of them on one workspace are two servers sharing its threads file, as two `olav serve`
processes would (each has its own thread store, so its own connections)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import wait_until

TURNS = 20_000  # the scripted model's answers, shared by every session of a server
START_S = 30.0


@dataclass
class Local:
    url: str
    server: Any  # olav.serve.app.Server
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
    from olav.core.config import Workspace
    from olav.memory.store.scopes import user_name
    from olav.serve.tokens import TokenStore

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
    import uvicorn

    from olav.core.config import Workspace
    from olav.core.net import listen
    from olav.serve.app import Server, _Auth, create_app
    from olav.serve.tokens import TokenStore

    ws = Workspace.open(root)
    server = Server(
        ws, model=echo_model(), tokens=TokenStore.for_workspace(ws, touch_interval=None)
    )
    sock = listen("127.0.0.1", 0)
    config = uvicorn.Config(
        _Auth(create_app(server), server), log_level="warning", access_log=False, lifespan="off"
    )
    userver = uvicorn.Server(config)
    worker = threading.Thread(target=userver.run, kwargs={"sockets": [sock]}, daemon=True)
    worker.start()
    # uvicorn says it has started with a flag, not an event
    wait_until(lambda: userver.started or not worker.is_alive(), START_S, "uvicorn", every=0.01)
    assert userver.started, "the in-process server did not start"
    try:
        yield Local(f"http://127.0.0.1:{sock.getsockname()[1]}", server, root, alice, tokens)
    finally:
        userver.should_exit = True
        worker.join(30)
        server.close()
        server.threads.close()
        sock.close()


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
