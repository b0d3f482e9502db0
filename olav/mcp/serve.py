"""Run the MCP server: stdio by default, or streamable HTTP on 127.0.0.1 only, where every
request needs a bearer token (olav.mcp.auth)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, cast

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
    mode = "read-only" if read_only else "read-write"
    if port is None:
        svc = MemoryService.open(ws, agent=agent, tier=tier)
        server = build_server(svc, read_only=read_only, transport="stdio")
        if on_ready:
            on_ready(f"olav mcp: serving agent {agent} ({mode}) on stdio")
        server.run("stdio")
        return
    from olav.access.tokens import TokenStore
    from olav.mcp.auth import Operators, ServeTokens, auth_settings

    tokens = TokenStore.for_workspace(ws)
    operators = Operators(ws, agent=agent, tier=tier)
    sock = listen(port)
    url = f"http://{HOST}:{sock.getsockname()[1]}{PATH}"
    server = build_server(
        cast(MemoryService, operators),  # each session's calls go to its token's operator
        read_only=read_only,
        transport="http",
        auth=auth_settings(url),
        tokens=ServeTokens(tokens),
    )
    if on_ready:
        live = len(tokens.live())
        need = (
            f"every request needs a token of `olav serve token create NAME` ({live} live)"
            if live
            else "every request needs a token, and none exists yet: `olav serve token create NAME`"
        )
        on_ready(f"olav mcp: serving agent {agent} ({mode}) at {url}; {need}")
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
