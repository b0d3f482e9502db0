"""``olav memory``: search, list, show, delete, stats; `olav.cli.memory_render` prints them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from olav.cli.calibrate import calibrate_cmd
from olav.cli.common import console, memory_actor, open_store, open_workspace, print_json
from olav.cli.memory_gaps import gaps_cmd
from olav.cli.memory_policy import policy_cmd
from olav.cli.memory_render import print_hits, print_stats, print_why, snippet
from olav.cli.memory_render import render_why as render_why  # `/why` in chat uses it
from olav.core.errors import NotFoundError, OlavError

app = typer.Typer(no_args_is_help=True)


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
    from olav.memory.store.filters import SearchFilter
    from olav.memory.store.scopes import Reader, personal_scopes
    from olav.memory.store.table import MemoryStore

    ws = open_workspace()
    # read-only: answered from the snapshot on disk when it is current (olav.memory.store.snapfile)
    store = MemoryStore.for_workspace(ws, cold=True)
    scopes = [agent, "global", *personal_scopes(ws.config)] if agent else None
    hits = store.search(
        query,
        mode=mode,
        k=k,
        filter=SearchFilter(
            scopes=scopes,
            categories=category or None,
            reader=Reader.of(ws.config),  # never another operator's private rows
        ),
    )
    print_hits(hits, as_json)
    store.persist_snapshot()  # for the next cold command, after the answer is out


@app.command("promote")
def promote_cmd(memory_id: str = typer.Argument(..., help="The private memory to share.")) -> None:
    """Propose one of your private memories to the team (memory.team): a draft that
    `olav kb drafts confirm` stores in the team scope."""
    from olav.learning.promote import promote

    ws = open_workspace()
    draft, _preview = promote(ws, open_store(ws), memory_id)
    console.print(f"[green]✓[/] draft [bold]{draft}[/] written; nothing is shared yet.")
    console.print(f"  review it: olav kb drafts show {draft}")
    console.print(f"  share it:  olav kb drafts confirm {draft}")


@app.command("list")
def list_cmd(
    category: str | None = typer.Option(None, "--category", "-c"),
    scope: str | None = typer.Option(None, "--scope", "-s"),
    limit: int = typer.Option(50, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List memory rows, newest first."""
    from olav.memory.store.filters import NEWEST, SearchFilter

    ws = open_workspace()
    store = open_store(ws)
    chosen = SearchFilter(
        reader=_reader(ws),
        scopes=[scope] if scope else None,
        categories=[category] if category else None,
        include_invalid=True,  # retired rows too: `olav memory history` explains them
    )
    rows = store.rows(chosen, order=NEWEST, limit=limit)
    if as_json:
        print_json([r.to_json() for r in rows])
        return
    table = Table(box=None, pad_edge=False)
    for col in ("id", "category", "scope", "origin", "hits", "text"):
        table.add_column(col, overflow="fold" if col == "text" else "ellipsis")
    for r in rows:
        cells = (r.id, r.category, r.scope, r.origin, str(r.access_count), snippet(r.text, 50))
        table.add_row(*(Text(c) for c in cells))
    console.print(table)
    console.print(f"{len(rows)} of {store.count(chosen)} rows")


@app.command("show")
def show(
    memory_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one memory row in full (never another operator's private one)."""
    ws = open_workspace()
    rec = _readable(ws, open_store(ws), memory_id)
    data = rec.to_json()
    data.pop("vector", None)
    data.pop("context_vector", None)
    if as_json:
        print_json(data)
        return
    for key, val in data.items():
        if key not in ("text", "context"):
            console.print(Text(f"{key}: ", style="bold") + Text(str(val)), soft_wrap=True)
    if rec.context:
        console.print("[bold]context[/] (the memory with its neighbours; recalled with it):")
        console.print(rec.context, markup=False, soft_wrap=True)
    console.print("[bold]text[/]:")
    console.print(rec.text, markup=False, soft_wrap=True)


def _reader(ws: Any) -> Any:
    """Whose rows this operator may read (olav.memory.store.scopes.Reader)."""
    from olav.memory.store.scopes import Reader

    return Reader.of(ws.config)


def _readable(ws: Any, store: Any, memory_id: str) -> Any:
    """The row ``memory_id`` if this operator may read it; else the same one-line error as
    for a missing row, so an id never reveals another operator's private row."""
    from olav.memory.lifecycle.ops import Actor, readable_row

    return readable_row(store, memory_id, Actor(reader=_reader(ws)))


@app.command("delete")
def delete(
    memory_id: str = typer.Argument(..., metavar="ID"),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    purge: bool = typer.Option(False, "--purge", help="Remove the row instead of retiring it."),
) -> None:
    """Delete one memory (asks first). It is kept for history and never recalled again;
    --purge removes the row for good."""
    from olav.memory.lifecycle.ops import forget

    ws = open_workspace()
    store = open_store(ws)
    rec = _readable(ws, store, memory_id)
    if not yes:
        typer.confirm(f"Delete {rec.category} {memory_id}: {snippet(rec.text, 60)}?", abort=True)
    forget(store, memory_id, memory_actor(ws), purge=purge)
    if purge:
        console.print(f"[green]✓[/] purged {memory_id}")
    else:
        console.print(f"[green]✓[/] deleted {memory_id} (kept for history; --purge removes it)")


@app.command("stats")
def stats(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Rows per category and scope, the embedder, its dimension and the index state."""
    ws = open_workspace()
    store = open_store(ws)
    data = store.stats(_reader(ws))  # other operators' private scopes are not named
    if as_json:
        print_json(data)
        return
    print_stats(data, store.ann_threshold)


def _audit(ws: Any) -> Any:
    from olav.audit.recorder import AuditRecorder

    return AuditRecorder(ws.audit_path)


@app.command("pin")
def pin_cmd(memory_id: str = typer.Argument(..., metavar="ID")) -> None:
    """Pin a memory: it never decays and its confidence is 1.0."""
    from olav.memory.lifecycle.ops import pin

    ws = open_workspace()
    pin(open_store(ws), memory_id, memory_actor(ws))
    console.print(f"[green]✓[/] pinned {memory_id}")


@app.command("edit")
def edit_cmd(
    memory_id: str = typer.Argument(..., metavar="ID"),
    text: str | None = typer.Option(None, "--text", help="The new text (else $EDITOR opens)."),
) -> None:
    """Change a memory's text; it is re-embedded and the old text kept in the audit log."""
    from olav.memory.lifecycle.ops import NotApplicable, edit, edit_refusal

    ws = open_workspace()
    store = open_store(ws)
    rec = _readable(ws, store, memory_id)
    refused = edit_refusal(rec)
    if refused is not None:  # before the editor opens: nothing typed is lost
        raise NotApplicable(refused)
    if text is None:
        current = str(rec.metadata.get("body") or rec.text)
        import click

        edited = click.edit(current)
        if edited is None or edited.strip() == current.strip():
            console.print("unchanged")
            return
        text = edited.strip()
    edit(store, memory_id, text, memory_actor(ws))
    console.print(f"[green]✓[/] updated and re-embedded {memory_id}")


@app.command("history")
def history_cmd(
    memory_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The supersede chain of a memory and its recorded changes."""
    from olav.memory.lifecycle.conflicts import history

    ws = open_workspace()
    store = open_store(ws)
    _readable(ws, store, memory_id)
    reader = _reader(ws)
    chain = [r for r in history(store, memory_id) if reader.allows(r.scope)]
    if not chain:
        raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
    from olav.audit.queries import memory_events

    events = memory_events(ws.audit_path, [r.id for r in chain])
    if as_json:
        print_json(
            {
                "chain": [r.to_json() | {"vector": None} for r in chain],
                "events": [list(e) for e in events],
            }
        )
        return
    for r in chain:
        state = "live" if r.invalidated_at is None else f"retired {r.invalidated_at:%Y-%m-%d %H:%M}"
        console.print(f"[cyan]{escape(r.id)}[/] [dim]({state})[/]")
        console.print(f"  {snippet(r.text, 110)}", markup=False)
    for mid, action, actor, at in events:
        console.print(f"[dim]{at:%Y-%m-%d %H:%M:%S}[/] {action} {mid} by {actor}")


@app.command("gc")
def gc_cmd() -> None:
    """Purge expired rows, compact the table and drop old versions."""
    from olav.cron.builtin import gc_workspace

    ws = open_workspace()
    report = gc_workspace(ws, open_store(ws))
    console.print(
        f"[green]✓[/] purged {report.expired_purged} expired rows; "
        f"{report.rows_after} rows remain; table compacted"
    )


app.command("calibrate")(calibrate_cmd)
app.command("gaps")(gaps_cmd)
app.command("policy")(policy_cmd)


@app.command("why")
def why_cmd(
    query: str = typer.Argument(..., help="The request to explain."),
    agent: str = typer.Option("core", "--agent", "-a", help="Agent whose recall to explain."),
    tier: str = typer.Option("", "--tier", help="small, medium or large (default: the model's)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """What AutoRecall would inject for QUERY, and why each candidate was kept or dropped."""
    from olav.llm.tiers import model_tier
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.table import MemoryStore

    ws = open_workspace()
    cfg = ws.config
    if not _reader(ws).allows(agent):  # an agent name is a scope: never another operator's
        raise OlavError(
            f"--agent {agent!r} names another operator's scope",
            hint="Pass one of your agents (see `olav agent list`)",
        )
    store = MemoryStore.for_workspace(ws, cold=True)  # read-only, as `olav memory search`
    from olav.llm.models import verdict_model

    rec = Recaller.for_config(
        store,
        cfg,
        agent=agent,
        tier=tier or model_tier(cfg["llm.model"], cfg["llm.tier"]),
        judge_model=verdict_model(cfg, root=ws.root),
    )
    result = rec.recall(query, dry_run=True)
    print_why(rec, result, as_json)
    store.persist_snapshot()


LOG_KINDS = ("all", "recall", "write", "conflict", "lifecycle")


@app.command("log")
def log_cmd(
    run: str | None = typer.Option(None, "--run", help="A run id (default: the latest runs)."),
    kind: str = typer.Option(
        "all", "--kind", "-k", help="recall, write, conflict, lifecycle or all."
    ),
    memory_id: str | None = typer.Option(None, "--id", help="Only decisions about this row."),
    limit: int = typer.Option(10, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Memory's decisions with their reasons: what recall injected into past runs, what
    was written or skipped, conflicts, and lifecycle (expiry, decay, gc)."""
    if kind not in LOG_KINDS:
        raise OlavError(
            f"--kind {kind!r} is not a decision kind", hint="Use one of: " + ", ".join(LOG_KINDS)
        )
    ws = open_workspace()
    out = _decision_log(ws, kind, run, memory_id, limit)
    if as_json:
        print_json(out)
        return
    if not out:
        what = "recalls" if kind == "recall" else "memory decisions"
        console.print(f"no {what} recorded" + (f" for run {run}" if run else ""))
    for r in out:
        if r["kind"] == "recall":
            console.print(
                f"[dim]{r['at'][:19]}[/] recall · run {r['run_id'] or '-'} · {r['agent']} · "
                f"{r['query'][:60]!r}",
                soft_wrap=True,
            )
            for mid in r["injected"]:
                console.print(f"    → {mid}")
            continue
        against = f" (against {r['other_id']})" if r["other_id"] else ""
        console.print(
            f"[dim]{r['at'][:19]}[/] {r['kind']} · [bold]{r['action']}[/] "
            f"{escape(r['memory_id'] or '-')}{escape(against)} [dim]{r['category'] or ''}[/]",
            soft_wrap=True,
        )
        console.print(f"    {escape(r['reason'])}", soft_wrap=True)


def _decision_log(
    ws: Any, kind: str, run: str | None, memory_id: str | None, limit: int
) -> list[dict[str, Any]]:
    """The newest recalls and control-plane decisions, newest first, at most ``limit``."""
    import json as _json

    from olav.audit.queries import memory_decisions, recent_recalls

    out: list[dict[str, Any]] = []
    if kind in ("all", "recall") and memory_id is None:
        for r in recent_recalls(ws.audit_path, run_id=run, limit=limit):
            out.append(
                {
                    "kind": "recall",
                    "run_id": r[0],
                    "agent": r[1],
                    "query": r[2],
                    "injected": _json.loads(r[3] or "[]"),
                    "latency_ms": r[4],
                    "at": str(r[5]),
                }
            )
    if kind != "recall":
        kinds = None if kind == "all" else (kind,)
        rows = memory_decisions(
            ws.audit_path, kinds=kinds, run_id=run, memory_id=memory_id, limit=limit
        )
        out += [r | {"at": str(r["at"])} for r in rows]
    out.sort(key=lambda r: r["at"], reverse=True)
    return out[:limit]


@app.command("quarantine")
def quarantine_cmd(
    release: str | None = typer.Option(None, "--release", help="Release this id into recall."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Memories held back because they look like prompt injection."""
    from olav.memory.lifecycle.ops import release as release_row
    from olav.memory.store.filters import SearchFilter

    ws = open_workspace()
    store = open_store(ws)
    if release:
        release_row(store, release, memory_actor(ws))
        console.print(f"[green]✓[/] released {release}")
        return
    held = SearchFilter(reader=_reader(ws), quarantined=True, include_invalid=True)
    rows = store.rows(held)
    if as_json:
        print_json([r.to_json() | {"vector": None} for r in rows])
        return
    if not rows:
        console.print("nothing in quarantine")
    for r in rows:
        console.print(
            f"[yellow]{escape(r.id)}[/] ({r.superseded_by}) {escape(snippet(r.text, 80))}",
            soft_wrap=True,
        )


@app.command("episodes")
def episodes_cmd(
    agent: str | None = typer.Option(None, "--agent", "-a", help="Only this agent's sessions."),
    limit: int = typer.Option(10, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Summaries of earlier chat sessions (episodic memory), newest first."""
    from olav.memory.store.filters import NEWEST_CREATED, SearchFilter

    ws = open_workspace()
    store = open_store(ws)
    episodes = SearchFilter(
        reader=_reader(ws),
        categories=["episode"],
        scopes=[agent] if agent else None,
        include_invalid=True,
    )
    rows = store.rows(episodes, order=NEWEST_CREATED, limit=limit)
    if as_json:
        print_json([r.to_json() | {"vector": None} for r in rows])
        return
    if not rows:
        console.print("no episodes yet: they are written when a chat session ends")
    for r in rows:
        console.print(f"[cyan]{escape(r.id)}[/] [dim]({r.scope})[/]")
        console.print(r.text, markup=False)


archive_app = typer.Typer(no_args_is_help=True)
app.add_typer(
    archive_app, name="archive", help="Rows moved to cold storage over a category's capacity."
)


@archive_app.command("list")
def archive_list(
    category: str | None = typer.Option(None, "--category", "-c", help="Only this category."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Archived rows (never recalled), newest change first."""
    from olav.memory.lifecycle.archive import Archive

    ws = open_workspace()
    epoch = datetime.min.replace(tzinfo=UTC)
    rows = Archive(open_store(ws)).readable(_reader(ws), category=category)
    rows.sort(key=lambda r: r.updated_at or r.created_at or epoch, reverse=True)
    if as_json:
        print_json([r.to_json() | {"vector": None, "context_vector": None} for r in rows])
        return
    if not rows:
        console.print("nothing archived")
    for r in rows:
        console.print(
            f"[cyan]{escape(r.id)}[/] [dim]{r.category} · {escape(r.scope)} · "
            f"recalled {r.access_count}x[/] {escape(snippet(r.text, 70))}",
            soft_wrap=True,
        )


@archive_app.command("restore")
def archive_restore(ids: list[str] = typer.Argument(..., metavar="ID...")) -> None:
    """Bring archived rows back into memory, as they were."""
    from olav.memory.lifecycle.archive import Archive, restore

    ws = open_workspace()
    store = open_store(ws)
    mine = {r.id for r in Archive(store).readable(_reader(ws))}
    missing = [i for i in ids if i not in mine]
    if missing:
        raise NotFoundError(
            f"{missing[0]!r} is not in the archive", hint="See `olav memory archive list`"
        )
    back = restore(store, ids, log=_audit(ws))
    console.print(f"[green]✓[/] restored {', '.join(back)}")
