"""The runs pages: ``/runs`` (the audit's runs, newest first, by outcome, agent and rescue mark)
and ``/runs/{id}`` (its messages, tool calls with arguments and results, the memory block each
recall injected, its events, the control plane's memory decisions made during it and the rows
whose metadata names it). Read through :mod:`olav.audit.export`, as ``olav log`` does,
and redacted again on the way out.

**Whose runs.** A run is the operator's its audit row names (``runs.operator``: the session's
``memory.user``, a token's operator for olav serve), never its thread's owner now: a thread id
deleted and taken again by another operator shows them none of the earlier owner's runs. A run
that names no operator (olav's own jobs, a run recorded before runs named theirs) is shown only
to the workspace's own operator (``memory.user``, else the login name), who can read the whole
audit with ``olav log`` anyway. Another operator's run is "not found".

**Their threads.** The audit names a run's thread by its key, which is not always its id
(thread ids are per operator); a page shows the id the operator knows it by, and none once the
thread is not theirs (deleted), so nothing on it tells whether another operator has an id.

Listing the runs first settles the ones a killed process left ``running``
(:func:`olav.audit.recorder.settle_orphans`): they show as errors that say why.
"""

from __future__ import annotations

import re
from typing import Any

from olav.serve.console.context import VISIBILITY_NOTE, Ctx, Missing, Page
from olav.serve.console.html import (
    Markup,
    badge,
    facts,
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

RESCUE = ("salvaged", "nudged")
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


def count_visible(ctx: Ctx) -> int:
    return int(ctx.audit.count())


def recent(ctx: Ctx, limit: int) -> list[Any]:
    from olav.audit.export import RunFilter

    return list(ctx.audit.runs(RunFilter(limit=limit)))


def runs_page(ctx: Ctx) -> Page:
    from olav.audit.export import RUN_OUTCOMES, RunFilter
    from olav.audit.recorder import settle_orphans

    outcome = ctx.choice("outcome", RUN_OUTCOMES)
    agent = ctx.choice("agent", sorted(ctx.server.agents))
    rescue = ctx.choice("rescue", RESCUE)
    offset, limit = ctx.window()
    flt = RunFilter(
        outcomes=(outcome,) if outcome else (),
        agent=agent or None,
        salvaged=True if rescue == "salvaged" else None,
        nudged=True if rescue == "nudged" else None,
        limit=limit,
        offset=offset,
    )
    runs = ctx.audit.runs(flt)  # the operator's, whatever the filter says
    if any(r.status == "running" for r in runs) and settle_orphans(ctx.audit_path):
        runs = ctx.audit.runs(flt)  # a killed process's: errors now
    total = ctx.audit.count(flt)
    params = {"outcome": outcome, "agent": agent, "rescue": rescue}
    form = h(
        '<form class="filters" method="get" action="/runs">{}{}{}'
        '<button type="submit">Filter</button> <a href="/runs">clear</a></form>',
        select("outcome", "outcome", RUN_OUTCOMES, outcome),
        select("agent", "agent", sorted(ctx.server.agents), agent),
        select("rescue", "rescue", RESCUE, rescue),
    )
    body = join(
        [
            form,
            whose_runs(ctx),
            h('<p class="lead">{}</p>', VISIBILITY_NOTE),
            runs_table(runs),
            pager("/runs", params, offset, limit, len(runs), total),
        ]
    )
    known = _thread_ids(ctx, runs)
    data = {
        "filters": params,
        "offset": offset,
        "limit": limit,
        "total": total,
        "operator": ctx.operator,
        "terminal_operator": ctx.owner,
        "runs": [_summary_json(r, known) for r in runs],
    }
    return Page("Runs", body, data, active="/runs")


def whose_runs(ctx: Ctx) -> Markup:
    """Whose runs the page lists, and whose the terminal's are: a token named as in the docs
    (``alice``) sees none of the runs ``olav chat`` made, which are the login name's."""
    me, owner = ctx.operator, ctx.owner
    if me == owner:
        return h(
            '<p class="lead whose">The runs of operator <strong>{}</strong>: you are this '
            "workspace's own operator, so the terminal's runs (<code>olav chat</code>, "
            "<code>olav ask</code>) and olav's own jobs are yours too.</p>",
            me,
        )
    return h(
        '<p class="lead whose">The runs of operator <strong>{}</strong>. The terminal\'s runs '
        "(<code>olav chat</code>, <code>olav ask</code>) and olav's own jobs belong to operator "
        "<strong>{}</strong> (<code>memory.user</code>, else the login name): to see them "
        "here, log in with a token for that name (<code>olav serve token create {}</code>)."
        "</p>",
        me,
        owner,
        owner,
    )


def runs_table(runs: list[Any]) -> Markup:
    return table(
        ["started", "agent", "outcome", "turns", "tool calls", "rescue", "request"],
        [
            (
                stamp(r.started_at),
                r.agent,
                badge(r.outcome),
                r.turns,
                r.n_tool_calls,
                _marks(r),
                link(f"/runs/{r.id}", snippet(_again(r.query), 90) or r.id[:12]),
            )
            for r in runs
        ],
        empty="No runs match.",
    )


def _marks(run: Any) -> Markup:
    marks = [
        badge(k) for k in ("salvaged", "nudged", "loop_guard", "context_full") if getattr(run, k)
    ]
    return join(marks, " ")


def _again(value: Any) -> Any:
    from olav.audit.export import redact_again

    return redact_again(value)


def _summary_json(run: Any, known: dict[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = _again(run.summary_json())
    data["thread_id"] = known.get(run.thread_id or "")
    return data


def _thread_ids(ctx: Ctx, runs: list[Any]) -> dict[str, str]:
    """The id the operator knows each run's thread by (by its key, as the audit names it),
    for the threads that are theirs now."""
    return ctx.server.threads.known_as(ctx.operator, [r.thread_id for r in runs if r.thread_id])


# -- one run ------------------------------------------------------------------------------------


def run_page(ctx: Ctx) -> Page:
    run_id = ctx.path_params["run_id"]
    run = ctx.audit.run(run_id) if RUN_ID.fullmatch(run_id) else None
    if run is None:
        raise Missing(f"no run {run_id!r}", hint="Pick one on /runs")
    from olav.audit.queries import memory_decisions
    from olav.serve.console import decisions

    decided = decisions.visible_decisions(
        ctx, memory_decisions(ctx.audit_path, run_id=run.id, limit=decisions.DECISIONS)
    )
    learned = decisions.rows_of_run(ctx, run.id)
    thread = _thread_ids(ctx, [run]).get(run.thread_id or "")
    took = (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
    tokens = {k: run.stats.get(k) for k in ("model_calls", "tokens_in", "tokens_out")}
    body = join(
        [
            h('<p class="lead">{} {}</p>', badge(run.outcome), _marks(run)),
            facts(
                [
                    ("request", _again(run.query)),
                    ("agent", run.agent),
                    ("model", run.model),
                    ("status", run.status),
                    ("error", _again(run.error or "")),
                    ("started", when(run.started_at)),
                    ("ended", when(run.ended_at)),
                    ("took", f"{took:.2f} s" if took is not None else ""),
                    ("thread", thread or ""),
                    ("session", run.session_id),
                    (
                        "model calls, tokens",
                        ", ".join(f"{k} {v}" for k, v in tokens.items() if v is not None),
                    ),
                    ("id", h("<code>{}</code>", run.id)),
                ]
            ),
            Markup("<h2>What the model saw: the recalled memory</h2>"),
            _recalls(run),
            h('<h2>Messages and tool calls</h2><p class="hint">{}</p>', _source_note(run)),
            join(_step(s) for s in run.steps) or Markup('<p class="empty">No messages.</p>'),
            Markup("<h2>Events</h2>"),
            table(
                ["when", "kind", "detail"],
                [(stamp(e["at"]), badge(e["kind"]), pre(_again(e["detail"]))) for e in run.events],
                empty="No events (approvals, salvaged calls, nudges… would be here).",
            ),
            h(
                '<h2>Memory decisions of this run</h2><p class="hint">{}</p>',
                "What memory's control plane decided during this run (writes, conflicts, "
                "lifecycle), newest first; only decisions about rows you may read.",
            ),
            decisions.decisions_table(decided, with_run=False),
            h(
                '<h2>Lessons learned from this run</h2><p class="hint">{}</p>',
                "The rows you may read whose metadata names this run: lessons, and what was "
                "captured from it.",
            ),
            decisions.rows_table(learned),
        ]
    )
    data = _again(run.to_json()) | {
        "thread_id": thread,
        "recalls": _again(run.recalls),
        "memory_decisions": [decisions.decision_json(d) for d in decided],
        "lessons": [
            {"id": r.id, "category": r.category, "scope": r.scope, "text": r.text} for r in learned
        ],
    }
    return Page(f"Run {run.id[:12]}", body, data, active="/runs")


def _source_note(run: Any) -> str:
    if run.source == "messages":
        return "Recorded before the audit kept every step: rebuilt from messages and tool calls."
    return "In order, as the graph kept them (arguments and results redacted)."


def _recalls(run: Any) -> Markup:
    if not run.recalls:
        return Markup('<p class="empty">No recall was recorded for this run.</p>')
    parts = []
    for r in run.recalls:
        ids = join((link(memory_href(i), i) for i in r["injected"]), ", ") or Markup("none")
        head = h(
            "<p><strong>{}</strong> · {} ms · injected: {}<br>"
            '<span class="hint">for: {}</span></p>',
            r["agent"],
            f"{r['latency_ms']:.0f}" if r["latency_ms"] is not None else "?",
            ids,
            snippet(_again(r["query"]), 160),
        )
        block = (
            pre(_again(r["block"]), "block")
            if r["block"]
            else Markup('<p class="empty">No block: nothing was relevant, so none was sent.</p>')
        )
        parts.append(head + block)
    return join(parts)


def _step(step: Any) -> Markup:
    parts = [h('<div class="role">{}</div>', _role(step))]
    if step.reasoning:
        parts.append(
            h("<details><summary>reasoning</summary>{}</details>", pre(_again(step.reasoning)))
        )
    if step.content:
        parts.append(pre(_again(step.content)))
    for call in step.tool_calls:
        parts.append(
            h(
                '<p>calls <code>{}</code> <span class="hint">{}</span></p>{}',
                call.get("name", "?"),
                call.get("id", ""),
                pre(_again(call.get("args") or {})),
            )
        )
    return h('<section class="step step-{}">{}</section>', step.role, join(parts))


def _role(step: Any) -> str:
    if step.role == "tool":
        return f"tool result · {step.name or '?'} · {step.status or 'success'}"
    return step.role
