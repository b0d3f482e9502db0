"""``olav kb drafts``: memory drafts, guide drafts and fix proposals waiting for a person."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from olav.cli.common import console, open_store, open_workspace, print_json

app = typer.Typer(invoke_without_command=True)

ID_ARG = typer.Argument(..., metavar="ID", help="The id `olav kb drafts` lists.")


def _here() -> tuple[Any, dict[str, Any]]:
    """The workspace, and the store and reader that list its captures waiting for a person
    (the terminal's operator's own and the shared ones)."""
    from olav.memory.store.scopes import Reader

    ws = open_workspace()
    return ws, {"store": open_store(ws), "reader": Reader.of(ws.config)}


@app.callback()
def list_cmd(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List what waits for your decision: memory drafts, guide drafts, fix proposals, and
    captures of runs or external clients that recall will not use until confirmed."""
    if ctx.invoked_subcommand is not None:
        return
    from olav.learning.drafts import pending

    ws, held = _here()
    items = pending(ws, **held)
    if as_json:
        print_json([{**vars(i), "path": str(i.path)} for i in items])
        return
    if not items:
        console.print("No drafts are waiting.")
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=max(len(i.id) for i in items))  # copyable
    for col in ("kind", "created", ""):
        table.add_column(col, no_wrap=True)
    table.add_column("summary", overflow="fold")
    for i in items:
        cells = (i.id, i.kind, f"{i.created_at:%Y-%m-%d %H:%M}", "" if i.seen else "new", i.summary)
        table.add_row(*(Text(c) for c in cells))
    console.print(table)
    console.print(
        f"{len(items)} waiting. `olav kb drafts show ID`, then `confirm ID` or `reject ID`."
    )


@app.command("show")
def show_cmd(item_id: str = ID_ARG) -> None:
    """Show one draft in full (what confirming it would store) or a fix proposal."""
    from olav.learning.drafts import show

    ws, held = _here()
    item, text = show(ws, item_id, **held)
    console.print(Text(f"{item.kind} {item.id}", style="bold"))
    console.print(text, markup=False, soft_wrap=True)
    verb = "mark it accepted (no code is changed)" if item.kind == "fix" else "store it"
    console.print(f"`olav kb drafts confirm {item.id}` to {verb}; `reject {item.id}` to drop it.")


@app.command("confirm")
def confirm_cmd(item_id: str = ID_ARG) -> None:
    """Store a memory/guide draft, or mark a fix proposal accepted (never applied)."""
    from olav.learning.drafts import confirm

    ws, held = _here()
    console.print(confirm(ws, item_id, **held), markup=False, soft_wrap=True)


@app.command("reject")
def reject_cmd(item_id: str = ID_ARG) -> None:
    """Drop a draft or fix proposal: it is archived, nothing is stored."""
    from olav.learning.drafts import reject

    ws, held = _here()
    console.print(reject(ws, item_id, **held), markup=False, soft_wrap=True)
