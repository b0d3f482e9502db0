"""``olav serve``: the HTTP server (olav.serve.app) and the operators' tokens (olav.access.tokens).

The server and its libraries (Starlette, uvicorn) are imported only once every check has
passed, so ``olav serve --help`` and ``olav serve token ...`` stay fast."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from olav.cli.common import console, err_console, open_workspace, print_json

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 2280
DEFAULT_MAX_BODY = 1024 * 1024

app = typer.Typer(
    no_args_is_help=False,
    epilog="With no command, serve: the LangGraph Agent Protocol (agent-chat-ui, LangGraph "
    "Studio) and an OpenAI-compatible /v1/chat/completions (Open WebUI, scripts). Every "
    "request but /ok needs a token: `olav serve token create NAME`.",
)
token_app = typer.Typer(no_args_is_help=True)
app.add_typer(
    token_app, name="token", help="The operators' tokens: create (shown once), list, revoke."
)


def open_tokens(ws: Any) -> Any:
    from olav.access.tokens import TokenStore

    return TokenStore.for_workspace(ws, touch_interval=None)


@app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    host: str = typer.Option(
        DEFAULT_HOST, "--host", help="Address to bind; anything but loopback needs a token."
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=0, max=65535, help="TCP port."),
    auto_approve: bool = typer.Option(
        False,
        "--auto-approve",
        help="Run dangerous tools without asking (never memory commits: those wait for you).",
    ),
    cors: list[str] = typer.Option(
        [],
        "--cors",
        metavar="ORIGIN",
        help="Allow this browser origin (repeatable; none by default).",
    ),
    max_body: int = typer.Option(
        DEFAULT_MAX_BODY, "--max-body", min=1, help="Largest request body accepted, in bytes."
    ),
) -> None:
    """Serve the workspace's agents over HTTP: the LangGraph Agent Protocol (agent-chat-ui,
    LangGraph Studio) and an OpenAI-compatible /v1/chat/completions (Open WebUI, scripts).
    Every request but /ok needs a token: `olav serve token create NAME`."""
    if ctx.invoked_subcommand is not None:
        return
    from olav.access.tokens import check_bind

    ws = open_workspace()
    check_bind(host, open_tokens(ws))  # before the server's code is even imported
    from olav.serve.app import run_server

    run_server(
        ws, host=host, port=port, auto_approve=auto_approve, cors=list(cors), max_body=max_body
    )


@token_app.command("create")
def token_create(
    name: str = typer.Argument(..., help="The operator the token belongs to (e.g. alice)."),
    note: str = typer.Option("", "--note", help="What the token is for (e.g. 'open-webui')."),
    admin: bool = typer.Option(
        False,
        "--admin",
        help="An admin token: it may also write shared memory (guides, global, agent and "
        "team scopes) and confirm drafts there.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the token and its info as JSON."),
) -> None:
    """Create a token for an operator and print it once: only its hash is kept. Requests
    with it act as that operator (their private memories, drafts and audit rows). An
    operator's token writes only their own private memory; --admin makes one that may write
    what every operator is shown."""
    role = "admin" if admin else "operator"
    info, token = open_tokens(open_workspace()).create(name, note=note, role=role)
    if as_json:
        print_json({**info.to_json(), "token": token})
        err_console.print("this token will not be shown again: store it now", soft_wrap=True)
        return
    console.print(
        f"[green]✓[/] {'admin ' if info.role == 'admin' else ''}token {info.id} for operator "
        f"[bold]{escape(info.operator)}[/]" + (f" ({escape(info.note)})" if info.note else ""),
        soft_wrap=True,
    )
    typer.echo(token)  # plain and unwrapped, to copy whole
    console.print(
        "[yellow]This token will not be shown again:[/] store it now (a password manager, "
        "the client's settings). Send it with every request as the header",
        soft_wrap=True,
    )
    typer.echo(f"  Authorization: Bearer {token}")
    console.print(
        f"Revoke it with `olav serve token revoke {info.id}`.", soft_wrap=True, markup=False
    )


def _status(info: Any) -> str:
    return "live" if info.live else f"revoked {info.revoked_at}"


@token_app.command("list")
def token_list(
    as_json: bool = typer.Option(False, "--json", help="Print the tokens as JSON."),
) -> None:
    """The tokens, oldest first, revoked ones included (never their secrets or hashes)."""
    tokens = open_tokens(open_workspace()).list()
    if as_json:
        print_json([info.to_json() for info in tokens])
        return
    if not tokens:
        console.print("no tokens yet: `olav serve token create NAME` makes one", markup=False)
        return
    table = Table(box=None, header_style="bold")
    for col in ("id", "operator", "role", "created", "last used", "status", "note"):
        table.add_column(col, no_wrap=col != "note", overflow="fold")
    for info in tokens:
        table.add_row(
            info.id,
            escape(info.operator),
            info.role,
            info.created_at,
            info.last_used_at or "never",
            _status(info),
            escape(info.note),
            style=None if info.live else "dim",
        )
    console.print(table)


@token_app.command("revoke")
def token_revoke(
    token_id: str = typer.Argument(..., metavar="ID", help="The token's id, or its start."),
) -> None:
    """Revoke a token: the server refuses it from its next request on (401), no restart."""
    store = open_tokens(open_workspace())
    found = store.find(token_id)
    if not found.live:
        console.print(
            f"token {found.id} (operator {found.operator}) was already revoked at "
            f"{found.revoked_at}",
            markup=False,
            soft_wrap=True,
        )
        return
    info = store.revoke(found.id)
    console.print(
        f"[green]✓[/] revoked token {info.id} (operator {escape(info.operator)}): requests "
        "with it now get 401",
        soft_wrap=True,
    )
