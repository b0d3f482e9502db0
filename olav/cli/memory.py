"""``olav memory``: search, list, show, delete, stats."""

from __future__ import annotations

from datetime import UTC, datetime

import typer
from rich.table import Table

from olav.cli.common import console, open_store, print_json
from olav.errors import NotFoundError

app = typer.Typer(no_args_is_help=True)


def _snippet(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@app.command("search")
def search(
    query: str = typer.Argument(..., help="What to look for, in any language."),
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent + global."),
    category: list[str] | None = typer.Option(None, "--category", "-c", help="Repeatable."),
    k: int = typer.Option(5, "-k", min=1, max=100, help="How many results."),
    mode: str = typer.Option("hybrid", "--mode", help="hybrid, vector or fts."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Search memory the way recall does (hybrid by default), with every score shown."""
    store = open_store()
    scopes = [agent, "global"] if agent else None
    hits = store.search(query, mode=mode, scopes=scopes, categories=category or None, k=k)
    if as_json:
        print_json([h.to_json() for h in hits])
        return
    if not hits:
        console.print("no memories match")
        return
    for i, h in enumerate(hits, 1):
        dist = "-" if h.distance is None else f"{h.distance:.3f}"
        fts = "-" if h.fts_score is None else f"{h.fts_score:.2f}"
        console.print(
            f"[bold]{i}.[/] [cyan]{h.record.id}[/]  [dim]{h.record.category} · {h.record.scope}"
            f" · dist {dist} · fts {fts} · rrf {h.score:.4f}[/]",
            soft_wrap=True,
        )
        console.print(
            "   " + _snippet(h.record.metadata.get("body") or h.record.text, 110),
            markup=False,
            soft_wrap=True,
        )


@app.command("list")
def list_cmd(
    category: str | None = typer.Option(None, "--category", "-c"),
    scope: str | None = typer.Option(None, "--scope", "-s"),
    limit: int = typer.Option(50, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List memory rows, newest first."""
    from olav.memory.store import sql_str

    store = open_store()
    parts = []
    if category:
        parts.append(f"category = {sql_str(category)}")
    if scope:
        parts.append(f"scope = {sql_str(scope)}")
    rows = store.list_rows(" AND ".join(parts) or None)
    epoch = datetime.min.replace(tzinfo=UTC)
    rows.sort(key=lambda r: (r.updated_at or r.created_at or epoch, r.id), reverse=True)
    rows = rows[:limit]
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    table = Table(box=None, pad_edge=False)
    for col in ("id", "category", "scope", "origin", "hits", "text"):
        table.add_column(col, overflow="fold" if col == "text" else "ellipsis")
    for r in rows:
        table.add_row(
            r.id, r.category, r.scope, r.origin, str(r.access_count), _snippet(r.text, 50)
        )
    console.print(table)
    console.print(f"{len(rows)} of {store.count(' AND '.join(parts) or None)} rows")


@app.command("show")
def show(
    memory_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one memory row in full."""
    store = open_store()
    rec = store.get(memory_id)
    if rec is None:
        raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
    data = rec.to_json()
    data.pop("vector", None)
    if as_json:
        print_json(data)
        return
    for key, val in data.items():
        if key != "text":
            console.print(f"[bold]{key}[/]: {val}", soft_wrap=True)
    console.print("[bold]text[/]:")
    console.print(rec.text, markup=False, soft_wrap=True)


@app.command("delete")
def delete(
    memory_id: str = typer.Argument(..., metavar="ID"),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete one memory row (asks first)."""
    store = open_store()
    rec = store.get(memory_id)
    if rec is None:
        raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
    if not yes:
        typer.confirm(f"Delete {rec.category} {memory_id}: {_snippet(rec.text, 60)}?", abort=True)
    store.delete(ids=[memory_id])
    console.print(f"[green]✓[/] deleted {memory_id}")


@app.command("stats")
def stats(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Rows per category and scope, the embedder, its dimension and the index state."""
    store = open_store()
    data = store.stats()
    if as_json:
        print_json(data)
        return
    console.print(f"[bold]{data['rows']}[/] rows · embedder {data['embedder']} ({data['dim']}-d)")
    for title, key in (("category", "by_category"), ("scope", "by_scope")):
        table = Table(box=None, pad_edge=False)
        table.add_column(title)
        table.add_column("rows", justify="right")
        for name, n in data[key].items():
            table.add_row(name, str(n))
        console.print(table)
    fts, vec = data["indexes"]["fts"], data["indexes"]["vector"]
    console.print(
        "full-text index: "
        + (f"{fts['indexed']} indexed, {fts['unindexed']} pending" if fts else "[red]missing[/]")
    )
    console.print(
        "vector index: "
        + (f"{vec['type']}" if vec else f"none (exact search below {store.ann_threshold} rows)")
    )
