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
from pathlib import Path
from typing import Any

from olav.memory.store.filters import Order
from olav.serve.console.context import BadRequest, Ctx, Missing, Page, Redirect, Refused
from olav.serve.console.html import (
    Markup,
    esc,
    facts,
    h,
    join,
    link,
    memory_href,
    pager,
    post_button,
    pre,
    select,
    snippet,
    stamp,
    table,
    when,
)

MAX_HITS = 500  # the deepest a search pages
SOURCE_CHARS = 20_000  # a guide's file is shown up to here
LIST_COLUMNS = ("id", "category", "scope", "origin", "reads", "updated")
GUIDES = ("usage_guide", "format_guide")  # edited through their YAML file, never here
EDIT_CHARS = 20_000  # the longest text the edit form takes
DECISIONS = 100  # the newest control-plane decisions a page shows
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
        rows, total = _newest(
            ctx, category, origin, scopes, retired, offset, limit, created=created
        )
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
    cells = [_row_cells(r, scores.get(r.id)) for r in rows]
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
        "rows": [_row_json(r) | ({"score": scores[r.id]} if r.id in scores else {}) for r in rows],
    }
    return Page("Memory", body, data, active="/memory")


def _row_cells(rec: Any, score: float | None) -> list[Any]:
    cells: list[Any] = [
        link(memory_href(rec.id), _breakable(rec.id)),
        rec.category,
        rec.scope,
        rec.origin,
        h('<span class="num">{}</span>', rec.access_count),
        stamp(rec.updated_at or rec.created_at),
    ]
    if score is not None:
        cells.append(h('<span class="num">{}</span>', f"{score:.4f}"))
    cells.append(snippet(str(rec.metadata.get("body") or rec.text), 100))
    return cells


def _breakable(memory_id: str) -> Markup:
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


def _row_json(rec: Any) -> dict[str, Any]:
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


def _newest(
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


# -- one row -----------------------------------------------------------------------------------


def memory_row_page(ctx: Ctx) -> Page:
    from olav.audit.queries import memory_decisions, memory_events
    from olav.memory.lifecycle.conflicts import history

    memory_id = ctx.path_params["memory_id"]
    store = ctx.store()
    rec = _readable(ctx, memory_id)
    chain = [r for r in history(store, memory_id) if reader(ctx).allows(r.scope)]
    events = memory_events(ctx.audit_path, [r.id for r in chain] or [rec.id], detail=True)
    meta = {k: v for k, v in rec.metadata.items() if k != "body"}
    decided = visible_decisions(
        ctx, memory_decisions(ctx.audit_path, memory_id=rec.id, limit=DECISIONS)
    )
    body = join(
        [
            h('<p class="lead">{} · {} · {}</p>', rec.category, rec.scope, _state(rec)),
            _buttons(ctx, rec),
            Markup("<h2>Text</h2>"),
            pre(rec.text),
            _source_file(ctx, rec) or _guide_body(rec),  # the file holds the body too
            _context(rec),
            Markup("<h2>Details</h2>"),
            facts(
                [
                    ("id", h("<code>{}</code>", rec.id)),
                    ("category", rec.category),
                    ("scope", rec.scope),
                    ("origin", rec.origin),
                    ("source file", _code(rec.metadata.get("source"))),
                    ("confidence", f"{rec.confidence:.2f}"),
                    ("read by recall", f"{rec.access_count} times"),
                    ("pinned", "yes: it never decays" if rec.metadata.get("pinned") else ""),
                    ("tags", ", ".join(rec.tags)),
                    ("created", when(rec.created_at)),
                    ("updated", when(rec.updated_at)),
                    ("happened", when(rec.event_at)),
                    ("expires", _expiry(rec)),
                    ("retired", when(rec.invalidated_at)),
                    ("quarantined", rec.superseded_by if quarantined(rec) else ""),
                    ("superseded by", _superseder(rec)),
                ]
            ),
            Markup("<h2>Metadata</h2>") + pre(meta) if meta else Markup(""),
            Markup("<h2>History</h2>"),
            _chain(chain, rec.id),
            table(
                ["when", "memory", "action", "by", "detail"],
                [
                    (stamp(at), mid, action, actor, _detail(detail))
                    for mid, action, actor, at, detail in events
                ],
                empty="No recorded changes (memory_events has none for this row).",
            ),
            h(
                '<h2>Decisions about this memory</h2><p class="hint">{}</p>',
                "What memory's control plane decided about this row, or about another row "
                "against it (newest first).",
            ),
            decisions_table(decided),
        ]
    )
    data = {
        "memory": _row_json(rec),
        "chain": [r.id for r in chain],
        "events": [
            {
                "memory_id": m,
                "action": a,
                "actor": b,
                "at": t.isoformat() if t else None,
                "detail": d,
            }
            for m, a, b, t, d in events
        ],
        "decisions": [decision_json(d) for d in decided],
    }
    return Page(rec.id, body, data, active="/memory")


def _readable(ctx: Ctx, memory_id: str) -> Any:
    """The row if this operator may read it; else "not found", as for a missing row."""
    rec = ctx.store().read(memory_id, reader(ctx))
    if rec is None:
        raise Missing(f"no memory with id {memory_id!r}", hint="Search for it on /memory")
    return rec


def changeable(ctx: Ctx, rec: Any) -> bool:
    """Who may pin or retire a row: the workspace's own operator any row she may read (as
    with `olav memory pin` and `delete` in her terminal), any other operator only the rows of
    their own private scope (as the store API's delete)."""
    from olav.memory.store.scopes import user_scope

    return ctx.operator == ctx.owner or rec.scope == user_scope(ctx.config)


def _buttons(ctx: Ctx, rec: Any) -> Markup:
    if not changeable(ctx, rec):
        return Markup("")
    if quarantined(rec):
        release = post_button(
            memory_href(rec.id, "release"), ctx.csrf, "Release from quarantine", cls="primary"
        )
        return h('<div class="actions">{}</div>', release)
    if rec.invalidated_at is not None:
        return Markup("")
    pin = Markup("")
    if not rec.metadata.get("pinned"):
        pin = post_button(memory_href(rec.id, "pin"), ctx.csrf, "Pin (never decays)")
    hold = post_button(
        memory_href(rec.id, "quarantine"), ctx.csrf, "Quarantine (never recalled)", cls="danger"
    )
    retire = post_button(
        memory_href(rec.id, "delete"), ctx.csrf, "Delete (kept for history)", cls="danger"
    )
    return h('<div class="actions">{} {} {}</div>', pin, hold, retire) + _edit_form(ctx, rec)


def _edit_form(ctx: Ctx, rec: Any) -> Markup:
    """The text as `olav memory edit` opens it (a curator row's body, else its text); a guide
    says where it is edited instead."""
    if rec.category in GUIDES:
        return h('<p class="hint">{}</p>', _guide_note(rec))
    return h(
        '<details class="edit"><summary>Edit the text</summary>'
        '<form method="post" action="{}"><input type="hidden" name="csrf" value="{}">'
        '<label for="edit-text">New text (re-embedded; the old text stays in the history)'
        '</label><textarea id="edit-text" name="text" rows="6" maxlength="{}" required>{}'
        '</textarea><button type="submit" class="primary">Save the text</button></form>'
        "</details>",
        memory_href(rec.id, "edit"),
        ctx.csrf,
        EDIT_CHARS,
        _editable_text(rec),
    )


def _editable_text(rec: Any) -> str:
    return str(rec.metadata.get("body") or rec.text)


def _guide_note(rec: Any) -> str:
    source = rec.metadata.get("source")
    where = f"its file {source}" if source else "the file or draft it came from"
    return (
        f"{rec.id} is a guide: it is edited in {where}, not here. Change the YAML, then run "
        "`olav kb import-guides`"
    )


def quarantined(rec: Any) -> bool:
    """Held back from recall as `olav memory quarantine` lists it (retired, with a
    ``quarantine:`` reason)."""
    return bool(rec.quarantined)


def _changing(ctx: Ctx) -> Any:
    rec = _readable(ctx, ctx.path_params["memory_id"])
    if not changeable(ctx, rec):
        raise Refused(
            f"memory {rec.id} is in scope {rec.scope}: only your own private memories can be "
            "changed here",
            hint=f"Ask the workspace's operator ({ctx.owner}) to change it",
        )
    return rec


def _actor(ctx: Ctx) -> Any:
    """The logged-in operator as the memory operations' actor (audited with who, by console)."""
    from olav.audit.recorder import AuditRecorder
    from olav.memory.lifecycle.ops import Actor

    return Actor(ctx.operator, "console", reader(ctx), AuditRecorder(ctx.audit_path))


def _apply(op: Any, ctx: Ctx, rec: Any, *args: Any) -> Any:
    """Run a memory operation on ``rec``; one that does not apply to the row as it is is
    refused (403) with the operation's own reason."""
    from olav.memory.lifecycle.ops import NotApplicable

    try:
        return op(ctx.store(), rec.id, *args, _actor(ctx))
    except NotApplicable as exc:
        raise Refused(exc.message) from None


def pin_action(ctx: Ctx) -> Redirect:
    """`olav memory pin`: it never decays and its confidence is 1.0 (audited, with who)."""
    from olav.memory.lifecycle.ops import pin

    rec = _changing(ctx)
    _apply(pin, ctx, rec)
    return Redirect(memory_href(rec.id), flash=f"Pinned {rec.id}: it never decays.")


def edit_action(ctx: Ctx) -> Redirect:
    """`olav memory edit --text`: the new text, re-embedded, the old one in the audit (with
    who). A guide is refused: it is edited through its YAML file."""
    from olav.memory.lifecycle.ops import edit

    rec = _changing(ctx)
    if rec.category in GUIDES:
        raise Refused(_guide_note(rec))
    if rec.invalidated_at is not None:
        raise Refused(f"memory {rec.id} is retired: it can no longer be edited")
    text = str(ctx.params.get("text", "")).replace("\r\n", "\n").strip()
    if not text:
        raise BadRequest("the new text is empty", hint="Delete the memory instead")
    if len(text) > EDIT_CHARS:
        raise BadRequest(f"the new text has {len(text)} characters; at most {EDIT_CHARS}")
    if text == _editable_text(rec).strip():
        return Redirect(memory_href(rec.id), flash=f"{rec.id} is unchanged.")
    _apply(edit, ctx, rec, text)
    return Redirect(memory_href(rec.id), flash=f"Updated and re-embedded {rec.id}.")


def quarantine_action(ctx: Ctx) -> Redirect:
    """Hold a row back from recall without deleting it, as the injection scanner does
    (retired, ``superseded_by = "quarantine:console"``): `olav memory quarantine` lists it
    and ``--release`` (or Release here) returns it. Audited with who."""
    from olav.memory.lifecycle.ops import quarantine

    rec = _changing(ctx)
    _apply(quarantine, ctx, rec)
    return Redirect(
        memory_href(rec.id), flash=f"Quarantined {rec.id}: recall never reads it until released."
    )


def release_action(ctx: Ctx) -> Redirect:
    """`olav memory quarantine --release ID`: back into recall (audited, with who)."""
    from olav.memory.lifecycle.ops import release

    rec = _changing(ctx)
    _apply(release, ctx, rec)
    return Redirect(memory_href(rec.id), flash=f"Released {rec.id}: recall reads it again.")


def delete_action(ctx: Ctx) -> Redirect:
    """`olav memory delete` (not --purge): retired, kept for history, never recalled again."""
    from olav.memory.lifecycle.ops import forget

    rec = _changing(ctx)
    _apply(forget, ctx, rec)
    return Redirect(memory_href(rec.id), flash=f"Deleted {rec.id}; it is kept for history.")


def _state(rec: Any) -> str:
    if quarantined(rec):
        return "quarantined"
    if rec.invalidated_at is not None:
        return "retired"
    if rec.expires_at is not None and rec.expires_at <= datetime.now(UTC):
        return "expired"
    return "live"


def _expiry(rec: Any) -> str:
    if rec.expires_at is None:
        return "never (until retired or superseded)"
    left = rec.expires_at - datetime.now(UTC)
    if left.total_seconds() <= 0:
        return f"{when(rec.expires_at)} (expired)"
    return f"{when(rec.expires_at)} (in {left.days} days)"


def _superseder(rec: Any) -> Markup | str:
    if quarantined(rec):
        return ""  # a reason, not a row: "quarantined" below says it
    return link(memory_href(rec.superseded_by), rec.superseded_by) if rec.superseded_by else ""


def _guide_body(rec: Any) -> Markup:
    body = rec.metadata.get("body")
    if not body or body == rec.text:
        return Markup("")
    what = "Guide body" if rec.category in GUIDES else "Body"
    return h("<h2>{} (what recall injects)</h2>", what) + pre(body)


def _code(value: Any) -> Markup | str:
    return h("<code>{}</code>", value) if value else ""


def _source_file(ctx: Ctx, rec: Any) -> Markup:
    """A guide's YAML file, as it is in the workspace (only a file inside the workspace)."""
    source = rec.metadata.get("source")
    if not source or not str(source).endswith((".yaml", ".yml")):
        return Markup("")
    root = Path(ctx.ws.root).resolve()
    path = (root / str(source)).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return Markup("")
    text = path.read_text(encoding="utf-8", errors="replace")[:SOURCE_CHARS]
    return h("<h2>Its file: <code>{}</code></h2>", source) + pre(text)


def _context(rec: Any) -> Markup:
    if not rec.context:
        return Markup("")
    return Markup("<h2>Context (recalled with it)</h2>") + pre(rec.context)


def _chain(chain: list[Any], current: str) -> Markup:
    if len(chain) < 2:
        return Markup("")
    items = [
        h("<li><strong>{}</strong></li>", r.id)
        if r.id == current
        else h("<li>{}</li>", link(memory_href(r.id), r.id))
        for r in chain
    ]
    return h('<p>Supersede chain, oldest first:</p><ol class="chain">{}</ol>', join(items))


def _detail(detail: dict[str, Any]) -> Markup:
    if not detail:
        return Markup("")
    return h("<details><summary>{}</summary>{}</details>", _gist(detail), pre(detail))


def _gist(detail: dict[str, Any]) -> str:
    for key in ("confirmed_by", "reason", "by", "category"):
        if detail.get(key):
            return f"{key}: {detail[key]}"
    return ", ".join(sorted(detail)[:4])


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
            return link(memory_href(memory_id), _breakable(memory_id))
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
            h("{}{}", d["reason"] or "", _detail(d["detail"]) if d["detail"] else ""),
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
                link(memory_href(r.id), _breakable(r.id)),
                r.category,
                r.scope,
                _state(r),
                stamp(r.created_at),
                snippet(str(r.metadata.get("body") or r.text), 100),
            )
            for r in rows
        ],
        empty="No memory names this run in its metadata.",
    )
