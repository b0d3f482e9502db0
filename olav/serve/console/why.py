"""The Why page, ``/why``: what AutoRecall would inject for a request, and why each candidate
was kept or dropped, for the logged-in operator.

It decides with the code `olav memory why` runs (:meth:`olav.memory.recall.recaller.Recaller.recall`
with ``dry_run=True``: nothing is bumped or logged), on the operator's config (their
``memory.user``, so their private scope and never another's); its JSON twin is
:meth:`~olav.memory.recall.recaller.RecallResult.to_json`, what `olav memory why --json` prints.
"""

from __future__ import annotations

from typing import Any

from olav.memory.recall import learned
from olav.serve.console.context import Ctx, Page, Refused
from olav.serve.console.html import Markup, esc, h, join, link, memory_href, table

TIERS = ("small", "medium", "large")
COLUMNS = ("decision", "category", "id", "distance", "fts", "rrf", "margin vs floor", "why")
DEFAULT_AGENT = "core"  # as `olav memory why --agent`


def model_tier(ctx: Ctx) -> str:
    """The tier of the workspace's model, as `olav memory why` computes it without --tier."""
    from olav.llm.tiers import model_tier as tier_of

    return tier_of(ctx.config["llm.model"], ctx.config["llm.tier"])


def explain(ctx: Ctx, query: str, agent: str, tier: str) -> tuple[Any, Any]:
    """(the Recaller, its dry-run RecallResult) for ``query``: `olav memory why`'s code."""
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.scopes import Reader

    if not Reader.of(ctx.config).allows(agent):  # an agent name is a scope: never another's
        raise Refused(f"agent {agent!r} names another operator's scope")
    from olav.llm.models import verdict_model

    judge = verdict_model(ctx.config, root=ctx.server.ws.root)
    rec = Recaller.for_config(ctx.store(), ctx.config, agent=agent, tier=tier, judge_model=judge)
    return rec, rec.recall(query, dry_run=True)


def why_page(ctx: Ctx) -> Page:
    agents = sorted(ctx.server.agents)
    query = ctx.text("q", 2000)
    default_agent = DEFAULT_AGENT if DEFAULT_AGENT in agents else (agents[0] if agents else "")
    agent = ctx.choice("agent", agents) or default_agent
    default_tier = model_tier(ctx)
    tier = ctx.choice("tier", TIERS) or default_tier
    form = _form(query, agents, agent, tier, default_tier)
    if not query:
        body = join(
            [
                form,
                Markup(
                    '<p class="lead">Type a request to see the <code>&lt;relevant-memories'
                    "&gt;</code> block recall would put before it, and every candidate with its "
                    "decision (as <code>olav memory why</code>). Nothing is run or recorded.</p>"
                ),
            ]
        )
        empty: dict[str, Any] = {"query": "", "agent": agent, "tier": tier}
        empty |= {"candidates": [], "injected": [], "block": ""}
        return Page("Why", body, empty, active="/why")
    rec, result = explain(ctx, query, agent, tier)
    block = (
        h('<pre class="block">{}</pre>', result.block)
        if result.block
        else Markup('<p class="empty nothing">nothing is injected</p>')
    )
    body = join(
        [
            form,
            h('<p class="lead">{}</p>', _relevance(rec)),
            h(
                "<h2>What the model would receive ({} of {} candidates injected)</h2>",
                len(result.injected),
                len(result.candidates),
            ),
            block,
            Markup("<h2>Candidates</h2>"),
            _candidates(result.candidates, relevance_on=rec.relevance_on),
        ]
    )
    return Page("Why", body, result.to_json(), active="/why")


def _form(query: str, agents: list[str], agent: str, tier: str, default_tier: str) -> Markup:
    def options(values: Any, chosen: str, note: dict[str, str]) -> Markup:
        return join(
            h(
                '<option value="{}"{}>{}</option>',
                v,
                Markup(" selected" if v == chosen else ""),
                v + note.get(v, ""),
            )
            for v in values
        )

    return h(
        '<form class="filters why" method="get" action="/why">'
        '<label>request <input type="search" name="q" value="{}" '
        'placeholder="a request, as the operator would type it" autofocus></label>'
        '<label>agent <select name="agent">{}</select></label>'
        '<label>recall tier <select name="tier">{}</select></label>'
        '<button type="submit" class="primary">Explain</button></form>',
        query,
        options(agents, agent, {}),
        options(TIERS, tier, {default_tier: " (the model's)"}),
    )


def _relevance(rec: Any) -> str:
    """What decides relevance here (as the title of `olav memory why`'s table)."""
    floors = rec.floors
    where = f"agent {rec.agent} · tier {rec.tier} · "
    if floors is None:
        return where + "relevance off: the nearest memories are sent"
    return (
        where
        + ("words only (no background) · " if rec.background is None else "")
        + learned.described(getattr(rec, "model", None))
        + f"floors {floors.directive:g} ({floors.directive_words:g} in words, "
        f"{floors.specific:g} in specific words), "
        f"lessons {floors.lesson:g} ({floors.lesson_words:g}), spread {floors.spread:g}"
    )


def _candidates(cands: list[Any], *, relevance_on: bool = True) -> Markup:
    rows = [c.to_json() for c in cands]
    # one scale for every bar of the page: margin and floor side by side, comparable
    span = max([abs(v) for r in rows for v in (r["margin"], r["floor"]) if v is not None] or [0.0])
    cells = []
    for c, r in zip(cands, rows, strict=True):
        decision = r["decision"] + (" ↑kw" if r["boosted"] else "")
        cells.append(
            [
                h('<span class="decision decision-{}">{}</span>', r["decision"], decision),
                r["category"],
                link(memory_href(r["id"]), r["id"]),
                _num(r["distance"], "{:.3f}"),
                _num(r["fts_score"], "{:.1f}"),
                _num(r["score"], "{:.4f}"),
                _bars(
                    r["margin"],
                    r["floor"],
                    span,
                    relevance_on=relevance_on,
                    injected=r["decision"] == "injected",
                ),
                r["reason"] or ("relevant" if c.signals.relevant else ""),
            ]
        )
    return table(
        COLUMNS, cells, empty="No candidates: the search found nothing readable.", cls="why"
    )


def _num(value: float | None, fmt: str) -> Markup:
    return h('<span class="num">{}</span>', "-" if value is None else fmt.format(value))


def _pct(value: float, span: float) -> int:
    return 0 if span <= 0 else max(0, min(100, round(abs(value) / span * 100)))


def _bars(
    margin: float | None,
    floor: float | None,
    span: float,
    *,
    relevance_on: bool = True,
    injected: bool = True,
) -> Markup:
    """Two bars on the page's scale: the margin over the floor. The margin is green only for a
    memory that was injected; red when below the floor or negative; amber when above the floor
    but left out (weaker, over a quota or the budget). CSS classes set the widths (the
    console's CSP allows no inline style)."""
    if margin is None and floor is None:
        note = "decided by words alone" if relevance_on else "relevance off"
        return h('<span class="hint no-bars">{}</span>', note)
    below = margin is not None and (margin < 0 or (floor is not None and margin < floor))
    parts = []
    for name, value, cls in (
        ("margin", margin, "bar-margin" + (" below" if below else "" if injected else " left")),
        ("floor", floor, "bar-floor"),
    ):
        text = "-" if value is None else f"{value:+.3f}"
        width = 0 if value is None else _pct(value, span)
        parts.append(
            h(
                '<span class="bar-row" title="{} {}"><span class="bar-label">{}</span>'
                '<span class="bar-track"><span class="bar {} w{}"></span></span>'
                '<span class="num">{}</span></span>',
                name,
                text,
                name,
                Markup(esc(cls)),
                width,
                text,
            )
        )
    return h('<span class="bars">{}</span>', join(parts))
