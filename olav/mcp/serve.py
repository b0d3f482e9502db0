"""Run the MCP server: stdio by default, or streamable HTTP on 127.0.0.1 only."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from olav.core import net
from olav.core.config import Workspace
from olav.mcp.server import build_server
from olav.mcp.service import MemoryService

HOST = "127.0.0.1"  # never another interface: the memory is the workspace owner's
PATH = "/mcp"


def serve(
    ws: Workspace,
    *,
    agent: str = "core",
    read_only: bool = False,
    port: int | None = None,
    tier: str = "",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``ws``'s memory as ``agent`` sees it until the client (or a signal) ends it:
    over HTTP on ``port`` (0 picks a free one), or on stdio when ``port`` is None.
    ``on_ready`` gets a one-line description once the server accepts connections."""
    svc = MemoryService.open(ws, agent=agent, tier=tier)
    server = build_server(svc, read_only=read_only, transport="stdio" if port is None else "http")
    mode = "read-only" if read_only else "read-write"
    if port is None:
        if on_ready:
            on_ready(f"olav mcp: serving agent {agent} ({mode}) on stdio")
        server.run("stdio")
        return
    sock = listen(port)
    url = f"http://{HOST}:{sock.getsockname()[1]}{PATH}"
    if on_ready:
        on_ready(f"olav mcp: serving agent {agent} ({mode}) at {url}")
    import anyio

    anyio.run(_serve_http, server, sock)


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0 picks a free port)."""
    return net.listen(HOST, port, backlog=64)


async def _serve_http(server: Any, sock: socket.socket) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=PATH, host=HOST)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
