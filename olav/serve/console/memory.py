"""The memory pages: ``/memory`` (hybrid search, or the newest rows, with filters and pages) and
``/memory/{id}`` (one row in full, with its history from the audit's ``memory_events`` and the
control plane's decisions about it from ``memory_decisions``).

Only rows the operator may read are ever read (every read names the operator's
:class:`~olav.memory.store.scopes.Reader`: a filter's, or ``store.read`` by id): another
operator's private row is "not found", as in ``olav memory show``. A page reads one page of
rows: a search asks for offset + limit hits; the newest-first listing is ``store.rows`` with
the page's offset and limit. Pin, edit, quarantine, release and delete are
olav.memory.lifecycle.ops, audited with the operator (via ``console``).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from olav.memory.store.filters import Order
from olav.serve.console.context import BadRequest, Ctx, Page
from olav.serve.console.html import (
    Markup,
    esc,
    h,
    join,
    link,
    memory_href,
    pager,
    pre,
    select,
    snippet,
    stamp,
    table,
    when,
)

MAX_HITS = 500  # the deepest a search pages
LIST_COLUMNS = ("id", "category", "scope", "shared", "made by", "origin", "reads", "updated")
# newest change first; rows changed at one instant by id (the listing's pages keep that order)
NEWEST_PAGE = Order((("changed", "desc"), ("id", "asc")))


def _scopes(ctx: Ctx, agent: str, scope: str) -> list[str] | None:
    """The scopes the filters allow (None: any the operator may read)."""
    from olav.memory.store.scopes import personal_scopes

    allowed = [agent, "global", *personal_scopes(ctx.config)] if agent else None
    if scope:
        return [scope] if allowed is None or scope in allowed else []
    return allowed


def memory_page(ctx: Ctx) -> Page:
    from olav.memory.store.schema import CATEGORIES, ORIGINS

    q = ctx.text("q")
    category = ctx.choice("category", CATEGORIES)
    origin = ctx.choice("origin", ORIGINS)
    agent = ctx.choice("agent", sorted(ctx.server.agents))
    scope = ctx.text("scope", 200)
    retired = ctx.params.get("retired") == "1"
    start, end = created_range(ctx)
    created = _created_period(start, end)
    offset, limit = ctx.window()
    scopes = _scopes(ctx, agent, scope)
    if q:
        rows, scores, total = _search(
            ctx, q, category, origin, scopes, retired, offset, limit, created=created
        )
    else:
        rows, total = newest(ctx, category, origin, scopes, retired, offset, limit, created=created)
        scores = {}
    params = {
        "q": q,
        "category": category,
        "origin": origin,
        "agent": agent,
        "scope": scope,
        "created_from": start.isoformat() if start else "",
        "created_to": end.isoformat() if end else "",
        "retired": "1" if retired else "",
    }
    form = h(
        '<form class="filters" method="get" action="/memory" role="search">'
        '<label>search <input type="search" name="q" value="{}" '
        'placeholder="what to look for, in any language" autofocus></label>'
        "{}{}{}"
        '<label>scope <input type="text" name="scope" value="{}" size="12"></label>'
        '<label>created from <input type="date" name="created_from" value="{}"></label>'
        '<label>created to <input type="date" name="created_to" value="{}"></label>'
        '<label class="check"><input type="checkbox" name="retired" value="1"{}> '
        "retired and expired too</label>"
        '<button type="submit">Search</button> <a href="/memory">clear</a></form>',
        q,
        select("category", "category", CATEGORIES, category),
        select("origin", "origin", ORIGINS, origin),
        select("agent", "agent", sorted(ctx.server.agents), agent),
        scope,
        params["created_from"],
        params["created_to"],
        Markup(" checked" if retired else ""),
    )
    # the text last: it takes the width the others leave, so no column is pushed off
    headers = [*LIST_COLUMNS, *(["score"] if q else []), "text"]
    makers = made_by(ctx, rows)
    cells = [_row_cells(r, scores.get(r.id), makers[r.id]) for r in rows]
    how = (
        h("Hybrid search (vector and full text, fused) for <q>{}</q>.", q)
        if q
        else Markup("The newest rows first. Type a request to search as recall does.")
    )
    body = join(
        [
            form,
            h('<p class="lead">{}</p>', how),
            table(headers, cells, empty="No memory matches.", cls="memory"),
            pager("/memory", params, offset, limit, len(rows), total),
        ]
    )
    data = {
        "query": q,
        "filters": {k: v for k, v in params.items() if k != "q"},
        "offset": offset,
        "limit": limit,
        "total": total,
        "rows": [
            row_json(r)
            | {"shared": shared_label(r.scope) == "shared", "made_by": makers[r.id]}
            | ({"score": scores[r.id]} if r.id in scores else {})
            for r in rows
        ],
    }
    return Page("Memory", body, data, active="/memory")


def made_by(ctx: Ctx, rows: list[Any]) -> dict[str, str]:
    """Who made each row, as the console shows it: a private row's operator; for a shared
    one, who proposed the draft it was committed from (the audit's commit), else the workspace's
    owner at the terminal for a commit that names nobody, else where it came from (a guide
    file, what the agent learned)."""
    from olav.audit.queries import memory_events
    from olav.memory.store.scopes import USER_PREFIX

    shared = [r.id for r in rows if not r.scope.startswith(USER_PREFIX)]
    committed: dict[str, str] = {}
    for memory_id, action, _actor, _at, detail in memory_events(
        ctx.audit_path, shared, detail=True
    ):
        if action == "commit":
            who = detail.get("proposed_by") or detail.get("operator")
            committed[memory_id] = str(who) if who else "the owner (terminal)"
    out = {}
    for rec in rows:
        if rec.scope.startswith(USER_PREFIX):
            out[rec.id] = rec.scope[len(USER_PREFIX) :]
        elif rec.id in committed:
            out[rec.id] = committed[rec.id]
        else:
            out[rec.id] = {"directive": "a guide file", "agent": "learned"}.get(
                rec.origin, rec.origin
            )
    return out


def shared_label(scope: str) -> str:
    """ "shared" for a row every operator of its scope reads, "private" for an operator's own."""
    from olav.memory.store.scopes import USER_PREFIX

    return "private" if scope.startswith(USER_PREFIX) else "shared"


def _row_cells(rec: Any, score: float | None, maker: str) -> list[Any]:
    cells: list[Any] = [
        link(memory_href(rec.id), breakable(rec.id)),
        rec.category,
        rec.scope,
        shared_label(rec.scope),
        maker,
        rec.origin,
        h('<span class="num">{}</span>', rec.access_count),
        stamp(rec.updated_at or rec.created_at),
    ]
    if score is not None:
        cells.append(h('<span class="num">{}</span>', f"{score:.4f}"))
    cells.append(snippet(str(rec.metadata.get("body") or rec.text), 100))
    return cells


def breakable(memory_id: str) -> Markup:
    """An id that a narrow column wraps after its underscores, never inside a word."""
    return join((esc(part) for part in memory_id.split("_")), "_<wbr>")


def created_range(ctx: Ctx) -> tuple[date | None, date | None]:
    """The ``created_from`` / ``created_to`` filters (days, UTC, both included); a value that
    is not a date, or a range that ends before it starts, is a 400 that says which."""
    found: dict[str, date | None] = {}
    for name in ("created_from", "created_to"):
        raw = ctx.text(name, 40)
        try:
            found[name] = date.fromisoformat(raw) if raw else None
        except ValueError:
            raise BadRequest(
                f"{name} must be a date written YYYY-MM-DD, got {raw!r}",
                hint="Pick it in the form's date field, or leave it empty",
            ) from None
    start, end = found["created_from"], found["created_to"]
    if start and end and start > end:
        raise BadRequest(f"created_from ({start}) is after created_to ({end})")
    return start, end


def _created_period(start: date | None, end: date | None) -> Any:
    """The days ``start`` to ``end`` (UTC, both included) as a period on the creation time;
    None when neither is given."""
    from olav.memory.store.timeq import Period

    def midnight(day: date) -> datetime:  # no row is older than 1970: a far earlier day is that
        day = max(day, date(1970, 1, 1))
        return datetime(day.year, day.month, day.day, tzinfo=UTC)

    after = midnight(start) if start is not None else None
    before = midnight(end + timedelta(days=1)) if end is not None and end < date.max else None
    return Period(after, before) if after is not None or before is not None else None


def row_json(rec: Any) -> dict[str, Any]:
    data = rec.to_json()
    data.pop("vector", None)
    data.pop("context_vector", None)
    return dict(data)


def reader(ctx: Ctx) -> Any:
    """The logged-in operator as a reader: never another operator's private rows."""
    from olav.memory.store.scopes import Reader

    return Reader.of(ctx.config)


def _filter(
    ctx: Ctx,
    category: str,
    origin: str,
    scopes: list[str] | None,
    retired: bool,
    created: Any = None,
) -> Any:
    """The page's filters as the store's (olav.memory.store.filters.SearchFilter)."""
    from olav.memory.store.filters import SearchFilter

    return SearchFilter(
        reader=reader(ctx),
        scopes=scopes,
        categories=[category] if category else None,
        origins=[origin] if origin else None,
        include_invalid=retired,
        created=created,
    )


def count_readable(ctx: Ctx) -> int:
    """How many live rows the operator may read."""
    return int(ctx.store().count(_filter(ctx, "", "", None, False)))


def newest(
    ctx: Ctx,
    category: str,
    origin: str,
    scopes: list[str] | None,
    retired: bool,
    offset: int,
    limit: int,
    *,
    created: Any = None,
) -> tuple[list[Any], int]:
    """One page of the matching rows, newest first, and how many match (``created``: a
    period of the creation time)."""
    store = ctx.store()
    chosen = _filter(ctx, category, origin, scopes, retired, created)
    total = store.count(chosen)
    if total == 0:
        return [], 0
    return store.rows(chosen, order=NEWEST_PAGE, offset=offset, limit=limit), total


def _search(
    ctx: Ctx,
    q: str,
    category: str,
    origin: str,
    scopes: list[str] | None,
    retired: bool,
    offset: int,
    limit: int,
    *,
    created: Any = None,
) -> tuple[list[Any], dict[str, float], int | None]:
    """One page of the hybrid search's hits (their fused scores by id); the total is unknown
    below the deepest page (None), else the number of hits."""
    want = min(offset + limit, MAX_HITS)
    if offset >= want:
        return [], {}, None
    chosen = _filter(ctx, category, origin, scopes, retired, created)
    hits = ctx.store().search(q, mode="hybrid", k=want, filter=chosen)
    page = hits[offset : offset + limit]
    total = len(hits) if len(hits) < want or want == MAX_HITS else None
    return [hit.record for hit in page], {hit.record.id: hit.score for hit in page}, total


def state_of(rec: Any) -> str:
    if quarantined(rec):
        return "quarantined"
    held = str(rec.superseded_by or "")
    if rec.pending:  # written without a person: waits on the Drafts page
        return "pending: " + ("an external report" if held.endswith("external") else "a run's")
    if held.startswith("suppressed:"):  # olav.memory.lifecycle.outcomes
        why = held.removeprefix("suppressed:")
        return "suppressed: " + ("corrected" if why == "correction" else "runs went wrong")
    if rec.invalidated_at is not None:
        return "retired"
    if rec.expires_at is not None and rec.expires_at <= datetime.now(UTC):
        return "expired"
    return "live"


def expiry_of(rec: Any) -> str:
    if rec.expires_at is None:
        return "never (until retired or superseded)"
    left = rec.expires_at - datetime.now(UTC)
    if left.total_seconds() <= 0:
        return f"{when(rec.expires_at)} (expired)"
    return f"{when(rec.expires_at)} (in {left.days} days)"


def detail_text(detail: dict[str, Any]) -> Markup:
    if not detail:
        return Markup("")
    return h("<details><summary>{}</summary>{}</details>", gist(detail), pre(detail))


def gist(detail: dict[str, Any]) -> str:
    for key in ("confirmed_by", "reason", "by", "category"):
        if detail.get(key):
            return f"{key}: {detail[key]}"
    return ", ".join(sorted(detail)[:4])


def quarantined(rec: Any) -> bool:
    """Held back from recall as `olav memory quarantine` lists it (retired, with a
    ``quarantine:`` reason)."""
    return bool(rec.quarantined)
