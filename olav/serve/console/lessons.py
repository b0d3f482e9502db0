"""The Lessons and gaps page, ``/lessons``: the live lessons the operator may read, and the
requests of the recall log that got no directive though a guide came close.

The lessons are the live ``reflection`` rows (not retired, not expired) of the operator's
readable scopes, newest first, with when each expires (the ``ttl`` of
:mod:`olav.memory.policy`).
The gaps are what `olav memory gaps` shows (:func:`olav.learning.gaps.near_misses`) over the
newest recalls of the runs the operator may see (another operator's requests are theirs), less
any guide of a scope they may not read. Nothing here edits a guide: a gap's **Propose
keyword** button writes a guide draft (:func:`olav.learning.curator.amend.propose_keywords`)
that adds the words to the guide's ``keywords:`` only once a person confirms it on /drafts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from olav.memory.store.schema import GUIDE_CATEGORIES
from olav.serve.console.context import BadRequest, Ctx, Page, Redirect
from olav.serve.console.html import Markup, h, join, link, memory_href, pager, stamp, table
from olav.serve.console.memory import newest, row_json
from olav.serve.console.memory_row import readable_row

LESSON_COLUMNS = ("id", "lesson", "scope", "origin", "reads", "created", "expires")
GAP_COLUMNS = (
    "request (no directive reached the model)",
    "times",
    "came nearest",
    "propose a keyword",
)
RECALLS = 500  # as `olav memory gaps --limit`


def lessons_page(ctx: Ctx) -> Page:
    from olav.learning.gaps import WITHIN

    offset, limit = ctx.window()
    rows, total = newest(ctx, "reflection", "", None, False, offset, limit)
    now = datetime.now(UTC)
    misses = gaps(ctx)
    body = join(
        [
            Markup(
                '<p class="lead">Lessons are what the reflector learned from failed tool '
                "calls; each lives until it expires or is retired.</p>"
            ),
            h("<h2>Live lessons ({})</h2>", total),
            table(
                LESSON_COLUMNS,
                [_lesson_cells(r, now) for r in rows],
                empty="No live lessons.",
            ),
            pager("/lessons", {}, offset, limit, len(rows), total),
            h("<h2>Gaps ({})</h2>", len(misses)),
            h(
                '<p class="lead">Requests of the last {} recalls that got no directive, '
                "though a guide or precedent came within {} of its floor (as "
                "<code>olav memory gaps</code>). Where a guide should have answered, propose "
                "the words the request uses as its keyword: that is a draft, and the guide "
                "changes only when a person confirms it on the drafts page.</p>",
                RECALLS,
                f"{WITHIN:g}",
            ),
            table(
                GAP_COLUMNS,
                [[*_gap_cells(m), _keyword_form(ctx, m)] for m in misses],
                empty="No near misses: every request without a directive was far from every floor.",
            ),
        ]
    )
    data = {
        "offset": offset,
        "limit": limit,
        "total": total,
        "lessons": [row_json(r) for r in rows],
        "gaps": [m.to_json() for m in misses],
    }
    return Page("Lessons and gaps", body, data, active="/lessons")


def gaps(ctx: Ctx) -> list[Any]:
    """`olav memory gaps`'s near misses over the requests of the runs this operator may see
    (another operator's requests are theirs), keeping only the guides they may read."""
    from olav.learning.gaps import near_misses
    from olav.memory.store.scopes import read_by_id

    mine = [(q, cands, injected) for _run, q, cands, injected in ctx.audit.recalls(limit=RECALLS)]
    store = ctx.store()
    readable: dict[str, bool] = {}
    kept = []
    for miss in near_misses(mine):
        for n in miss.near:
            if n.memory_id not in readable:
                readable[n.memory_id] = read_by_id(store, ctx.config, n.memory_id) is not None
        miss.near = [n for n in miss.near if readable[n.memory_id]]
        if miss.near:
            kept.append(miss)
    return kept


def _expires(rec: Any, now: datetime) -> Markup:
    at = rec.expires_at
    if at is None:
        return Markup("never")
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    days = (at - now).total_seconds() / 86400
    left = f"in {days:.0f} days" if days >= 1 else f"in {days * 24:.0f} hours"
    return h('{} <span class="ttl">({})</span>', stamp(at), left)


def _lesson_cells(rec: Any, now: datetime) -> list[Any]:
    return [
        link(memory_href(rec.id), rec.id),
        rec.text,
        rec.scope,
        rec.origin,
        h('<span class="num">{}</span>', rec.access_count),
        stamp(rec.created_at),
        _expires(rec, now),
    ]


def _gap_cells(miss: Any) -> list[Any]:
    near = join(
        (
            h(
                '{} <span class="num">{} &lt; {}</span>',
                link(memory_href(n.memory_id), n.memory_id),
                f"{n.margin:.3f}",
                f"{n.floor:g}",
            )
            for n in miss.near
        ),
        "<br>",
    )
    return [miss.request, h('<span class="num">{}</span>', miss.times), near]


def _keyword_form(ctx: Ctx, miss: Any) -> Markup:
    """Propose a keyword for one of the guides that came nearest (a draft, never an edit)."""
    guides = [n.memory_id for n in miss.near if n.category in GUIDE_CATEGORIES]
    if not guides:
        return h('<span class="hint">{}</span>', "no guide came close: nothing to propose")
    options = join(h('<option value="{}">{}</option>', g, g) for g in guides)
    return h(
        '<form method="post" action="/drafts/keyword" class="keyword">'
        '<input type="hidden" name="csrf" value="{}">'
        '<input type="hidden" name="request" value="{}">'
        '<label>guide <select name="guide">{}</select></label>'
        '<label>keyword <input type="text" name="keyword" value="{}" maxlength="80" required>'
        "</label>"
        '<button type="submit">Propose keyword</button></form>',
        ctx.csrf,
        miss.request,
        options,
        miss.request,
    )


def keyword_action(ctx: Ctx) -> Redirect:
    """A gap's keyword for a guide, as a guide draft that waits on /drafts for a person's
    Confirm (the workspace's operator's: it changes a workspace file)."""
    from olav.core.errors import OlavError
    from olav.learning.curator.amend import clean_keyword, propose_keywords

    rec = readable_row(ctx, ctx.text("guide", 300))
    try:
        word = clean_keyword(str(ctx.params.get("keyword", "")))
        draft = propose_keywords(
            ctx.ws.root,
            rec,
            [word],
            request=ctx.text("request", 500),
            proposed_by=ctx.operator,
        )
    except OlavError as exc:
        raise BadRequest(exc.message, hint=exc.hint) from None
    who = "confirm it below" if ctx.operator == ctx.owner else f"{ctx.owner} decides on it"
    return Redirect(
        "/drafts",
        flash=f"Proposed keyword {word!r} for {rec.id} as draft {draft}; the guide changes "
        f"only when a person confirms it: {who}.",
    )
