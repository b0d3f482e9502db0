"""``olav mcp``: serve the workspace's memory to MCP clients."""

from __future__ import annotations

import typer

from olav.cli.common import err_console, open_workspace
from olav.core.errors import OlavError


def mcp(
    agent: str = typer.Option("core", "--agent", "-a", help="The agent whose memory to serve."),
    read_only: bool = typer.Option(
        False, "--read-only", help="Leave out remember, confirm and record_outcome."
    ),
    http: bool = typer.Option(
        False,
        "--http",
        help="Serve streamable HTTP on 127.0.0.1 instead of stdio; every request needs a "
        "token of `olav serve token create`.",
    ),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, help="HTTP port (default 8765; 0 picks a free one)."
    ),
    tier: str = typer.Option("", "--tier", help="small, medium or large (default: the model's)."),
) -> None:
    """Serve memory over MCP: recall, search, get, remember, confirm, record_outcome."""
    if port is not None and not http:
        raise OlavError("--port applies to --http only", hint="Add --http, or drop --port")
    if tier not in ("", "small", "medium", "large"):
        raise OlavError(f"unknown tier {tier!r}", hint="Use small, medium or large")
    from olav.mcp import serve

    serve(
        open_workspace(),
        agent=agent,
        read_only=read_only,
        port=(8765 if port is None else port) if http else None,
        tier=tier,
        on_ready=lambda line: err_console.print(line, markup=False, highlight=False),
    )
