"""Memories earn their place (issue 53): being injected is no evidence of being useful.

What olav wrote by itself (origin ``agent``: captured precedents, query patterns, lessons,
patterns, episodes) answers for the runs it was injected into:

- a run that went wrong (it failed, or ended in a tool error) multiplies the memory's
  confidence by ``policy.bad_run_weight`` (recall ranks by it) and counts it in its metadata
  (``bad_runs``); at ``policy.suppress_after_bad_runs`` such runs it is **suppressed**;
- the person correcting the answer it was injected into suppresses it at once.

A suppressed row is retired with ``superseded_by`` = ``suppressed:<why>``: recall never reads
it, ``olav memory log`` and the console's decisions show the ``lifecycle`` decision
(``weakened``, ``suppressed``) with its reason, and ``olav memory show`` its state. Guides and
what a person wrote or confirmed are theirs to judge, never weakened by a run's outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.schema import GUIDE_CATEGORIES, MemoryRecord
from olav.memory.store.sql import sql_in
from olav.memory.store.table import MemoryStore

SUPPRESSED = "suppressed:"
EARNED_ORIGINS = ("agent",)  # written by olav itself: it has to earn its place
BAD_OUTCOMES = ("failed", "tool_error")


def _earned(store: MemoryStore, ids: Sequence[str]) -> list[MemoryRecord]:
    if not ids:
        return []
    rows = store.list_rows(sql_in("id", sorted(set(ids))) + " AND invalidated_at IS NULL")
    return [r for r in rows if r.origin in EARNED_ORIGINS and r.category not in GUIDE_CATEGORIES]


def bad_run(
    store: MemoryStore,
    injected: Sequence[str],
    *,
    run_id: str | None,
    outcome: str,
    policy: MemoryPolicy = DEFAULTS,
    log: DecisionLog | None = None,
) -> list[str]:
    """Weaken the memories injected into run ``run_id``, which ended ``outcome`` (one of
    BAD_OUTCOMES), and suppress those that reached the policy's count. Returns the
    suppressed ids."""
    decisions, suppressed = [], []
    for rec in _earned(store, injected):
        n = int(rec.metadata.get("bad_runs") or 0) + 1
        meta = dict(rec.metadata, bad_runs=n, last_bad_run=run_id)
        why = f"injected into {n} run(s) that went wrong (the last: {outcome})"
        if n >= policy.suppress_after_bad_runs:
            store.update(
                rec.id,
                invalidated_at=datetime.now(UTC),
                superseded_by=SUPPRESSED + "outcomes",
                metadata=meta,
            )
            decisions.append(Decision("lifecycle", "suppressed", rec.id, why, rec.category))
            suppressed.append(rec.id)
        else:
            weaker = rec.confidence * policy.bad_run_weight
            store.update(rec.id, confidence=weaker, metadata=meta)
            detail = {"confidence": round(weaker, 4), "of": policy.suppress_after_bad_runs}
            decisions.append(
                Decision("lifecycle", "weakened", rec.id, why, rec.category, None, detail)
            )
    record(log, run_id, decisions)
    return suppressed


def corrected(
    store: MemoryStore,
    injected: Sequence[str],
    *,
    run_id: str | None,
    log: DecisionLog | None = None,
) -> list[str]:
    """Suppress the memories injected into the answer the person just corrected (run
    ``run_id``). Returns their ids."""
    decisions, done = [], []
    why = "injected into an answer the person corrected"
    for rec in _earned(store, injected):
        meta = dict(rec.metadata, corrected_run=run_id)
        store.update(
            rec.id,
            invalidated_at=datetime.now(UTC),
            superseded_by=SUPPRESSED + "correction",
            metadata=meta,
        )
        decisions.append(Decision("lifecycle", "suppressed", rec.id, why, rec.category))
        done.append(rec.id)
    record(log, run_id, decisions)
    return done
