"""Memory's control-plane decisions (the audit's ``memory_decisions``) and the rows a run
wrote, as the operator may see them: for the run page and a memory row's page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from olav.serve.console.context import Ctx
from olav.serve.console.html import (
    Markup,
    h,
    link,
    memory_href,
    snippet,
    stamp,
    table,
)
from olav.serve.console.memory import breakable, detail_text, reader, state_of

DECISIONS = 100  # the newest control-plane decisions a page shows


# -- memory's control-plane decisions (the audit's memory_decisions), as the operator may see them


def visible_decisions(ctx: Ctx, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decisions of ``rows`` (:func:`olav.audit.queries.memory_decisions`) the operator may
    see: none that names (as the row decided on or the row decided against) a row she may not
    read. A row no longer in the store (purged) has no scope to judge by: only the workspace's
    own operator, who reads the whole log with `olav memory log`, sees decisions naming one.
    Each kept decision says which of its ids link to a row page (``linked``) and names its run
    only when the operator may see that run."""
    ids = sorted({i for d in rows for i in (d["memory_id"], d["other_id"]) if i})
    scopes = ctx.store().scopes_of(ids)  # purged rows are not there
    who = reader(ctx)
    may_read = {i: who.allows(scope) for i, scope in scopes.items()}
    runs = _visible_runs(ctx, {d["run_id"] for d in rows if d["run_id"]})
    out = []
    for d in rows:
        named = [i for i in (d["memory_id"], d["other_id"]) if i]
        if not all(may_read.get(i, ctx.operator == ctx.owner) for i in named):
            continue
        run = d["run_id"] if d["run_id"] in runs else None
        out.append(d | {"run_id": run, "linked": [i for i in named if may_read.get(i)]})
    return out


def _visible_runs(ctx: Ctx, run_ids: set[str]) -> set[str]:
    """Which of ``run_ids`` the operator may see (as the run page decides)."""
    from olav.serve.console.context import visible_runs

    return visible_runs(ctx, run_ids)


def decisions_table(decisions: list[dict[str, Any]], *, with_run: bool = True) -> Markup:
    """The decisions as a table: when, kind, action, the row, the row it was decided against,
    the reason (and the run, on a row's page)."""

    def row_link(memory_id: str | None, linked: list[str]) -> Markup | str:
        if not memory_id:
            return ""
        if memory_id in linked:
            return link(memory_href(memory_id), breakable(memory_id))
        return h("<code>{}</code>", memory_id)

    headers = ["when", "kind", "action", "memory", "against", "reason"]
    cells = []
    for d in decisions:
        row: list[Any] = [
            stamp(d["at"]),
            d["kind"],
            d["action"],
            row_link(d["memory_id"], d["linked"]),
            row_link(d["other_id"], d["linked"]),
            h("{}{}", d["reason"] or "", detail_text(d["detail"]) if d["detail"] else ""),
        ]
        if with_run:
            run = d["run_id"]
            row.append(link(f"/runs/{run}", run[:12]) if run else "")
        cells.append(row)
    return table(
        [*headers, *(["run"] if with_run else [])],
        cells,
        empty="No decisions recorded (memory_decisions has none here).",
    )


def decision_json(d: dict[str, Any]) -> dict[str, Any]:
    """One decision in a page's JSON twin (its time in ISO 8601)."""
    at = d.get("at")
    when_json = at.isoformat() if isinstance(at, datetime) else at
    return {k: v for k, v in d.items() if k not in ("at", "linked")} | {"at": when_json}


def rows_of_run(ctx: Ctx, run_id: str, limit: int = 100) -> list[Any]:
    """The rows the operator may read whose metadata names ``run_id`` (``run_id``, or in a
    ``run_ids`` / ``runs`` list): lessons and rows captured from that run, newest first."""
    from olav.memory.store.filters import NEWEST, SearchFilter

    # a superset (the run id anywhere in the metadata); names() keeps the rows that name it
    mentioning = SearchFilter(reader=reader(ctx), mentions=run_id, include_invalid=True)

    def names(rec: Any) -> bool:
        meta = rec.metadata
        listed = [*(meta.get("run_ids") or []), *(meta.get("runs") or [])]
        return meta.get("run_id") == run_id or run_id in listed

    found = [r for r in ctx.store().rows(mentioning, order=NEWEST) if names(r)]
    return found[:limit]


def rows_table(rows: list[Any]) -> Markup:
    return table(
        ["id", "category", "scope", "state", "created", "text"],
        [
            (
                link(memory_href(r.id), breakable(r.id)),
                r.category,
                r.scope,
                state_of(r),
                stamp(r.created_at),
                snippet(str(r.metadata.get("body") or r.text), 100),
            )
            for r in rows
        ],
        empty="No memory names this run in its metadata.",
    )
