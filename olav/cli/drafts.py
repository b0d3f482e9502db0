"""``olav kb drafts``: memory drafts, guide drafts and fix proposals waiting for a person."""

from __future__ import annotations

import typer
from rich.table import Table
from rich.text import Text

from olav.cli.common import console, open_workspace, print_json

app = typer.Typer(invoke_without_command=True)

ID_ARG = typer.Argument(..., metavar="ID", help="The id `olav kb drafts` lists.")


@app.callback()
def list_cmd(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List what waits for your decision: memory drafts, guide drafts, fix proposals."""
    if ctx.invoked_subcommand is not None:
        return
    from olav.learning.drafts import pending

    items = pending(open_workspace())
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

    item, text = show(open_workspace(), item_id)
    console.print(Text(f"{item.kind} {item.id}", style="bold"))
    console.print(text, markup=False, soft_wrap=True)
    verb = "mark it accepted (no code is changed)" if item.kind == "fix" else "store it"
    console.print(f"`olav kb drafts confirm {item.id}` to {verb}; `reject {item.id}` to drop it.")


@app.command("confirm")
def confirm_cmd(item_id: str = ID_ARG) -> None:
    """Store a memory/guide draft, or mark a fix proposal accepted (never applied)."""
    from olav.learning.drafts import confirm

    console.print(confirm(open_workspace(), item_id), markup=False, soft_wrap=True)


@app.command("reject")
def reject_cmd(item_id: str = ID_ARG) -> None:
    """Drop a draft or fix proposal: it is archived, nothing is stored."""
    from olav.learning.drafts import reject

    console.print(reject(open_workspace(), item_id), markup=False, soft_wrap=True)
