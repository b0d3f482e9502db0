"""What the `olav mcp` tests share: the server as a subprocess (stdio parameters, or
`olav mcp --http --port 0` reached at the URL it announces), the SDK client that drives it, and
the workspace's store and audit as the tests read them back."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client

from olav.access.tokens import TokenStore
from olav.audit.recorder import AuditRecorder
from olav.core.config import Workspace
from olav.memory.store.scopes import user_name
from olav.memory.store.table import MemoryStore
from tests.helpers import clean_env

OLAV = [sys.executable, "-c", "from olav.cli.app import main; main()"]
CLIENT = types.Implementation(name="olav-test", version="1.0")
BACKUP = "back up the device configs"
DEADLINE = 120.0
Scenario = Callable[[Client], Awaitable[Any]]


def server_env() -> dict[str, str]:
    env = clean_env()
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def stdio(root: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=OLAV[0], args=[*OLAV[1:], "mcp", *args], cwd=root, env=server_env()
    )


@contextlib.asynccontextmanager
async def bearer(url: str, token: str) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP transport to ``url`` with ``token`` in every request."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def drive(server: Any, scenario: Scenario, **client: Any) -> Any:
    """Connect the SDK client to ``server`` (stdio parameters, an :class:`HttpServer` with its
    owner's token, or a transport) and run ``scenario``."""

    async def main() -> Any:
        target = bearer(server.url, server.token) if isinstance(server, HttpServer) else server
        with anyio.fail_after(DEADLINE):
            async with Client(target, **{"client_info": CLIENT, **client}) as c:
                return await scenario(c)

    return anyio.run(main)


def answering(action: str, content: dict[str, Any] | None, asked: list[str]) -> Any:
    """An elicitation callback standing for the person: records the question, answers."""

    async def callback(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return callback


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def store_of(root: Path) -> MemoryStore:
    return MemoryStore.for_workspace(Workspace.open(root))


def audit_of(root: Path) -> AuditRecorder:
    return AuditRecorder(root / ".olav/databases/audit.duckdb")


def events(root: Path, kind: str) -> list[dict[str, Any]]:
    rows = audit_of(root).query(
        "SELECT detail FROM events WHERE kind = ? ORDER BY created_at", [kind]
    )
    return [json.loads(r[0]) for r in rows]


class HttpServer:
    """`olav mcp --http --port 0` in a subprocess; ``url`` is what it announced, ``token`` a
    token of the workspace's own operator (``olav serve token create``'s store)."""

    def __init__(self, root: Path, *args: str) -> None:
        self.root = root
        self.operator = user_name(Workspace.open(root).config)
        self.token = self.token_for(self.operator)
        self.log = root / "mcp-server.log"
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                [*OLAV, "mcp", "--http", "--port", "0", *args],
                cwd=root,
                env=server_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        self.url = self._announced_url()

    def _announced_url(self) -> str:
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            found = re.search(r"http://127\.0\.0\.1:\d+/mcp", self.log.read_text())
            if found:
                return found.group(0)
            if self.proc.poll() is not None:
                raise AssertionError(f"olav mcp exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)
        raise AssertionError("olav mcp --http never announced its URL")

    def token_for(self, operator: str, role: str = "operator") -> str:
        store = TokenStore.for_workspace(Workspace.open(self.root))
        return store.create(operator, note="mcp tests", role=role)[1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def copy_workspace(template: Path, target: Path) -> Path:
    shutil.copytree(template, target)
    return target
