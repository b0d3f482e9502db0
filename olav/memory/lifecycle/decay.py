"""Memory lifecycle: time decay and garbage collection (a person's pin, edit, quarantine and
delete are olav.memory.lifecycle.ops).

Decay: a memory's weight halves every half-life of its category (``memory.half_life_days``,
``memory.policy.half_life_days.<category>``) since it was last updated. Memories of the
origins the policy exempts (users, documents), and pinned ones, do not decay; frequently
recalled ones decay more slowly (the half-life grows with log(1 + access_count)). The weight
only scales ranking between 0.5 and 1.0: an old but exact match still wins over a fresh
irrelevant one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store import maintenance
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.sql import sql_str, sql_ts
from olav.memory.store.table import MemoryStore


def decay_weight(
    rec: MemoryRecord, *, policy: MemoryPolicy = DEFAULTS, now: datetime | None = None
) -> float:
    """The row's weight in ranking, 1.0 down towards 0: it halves every half-life of its
    category (``policy.half_life``) since the row was last updated, more slowly the more
    it is recalled; origins in ``policy.no_decay_origins`` and pinned rows keep 1.0."""
    half_life_days = policy.half_life(rec.category)
    if rec.origin in policy.no_decay_origins or rec.metadata.get("pinned") or half_life_days <= 0:
        return 1.0
    stamp = rec.updated_at or rec.created_at
    if stamp is None:
        return 1.0
    age_days = max(0.0, ((now or datetime.now(UTC)) - stamp).total_seconds() / 86400)
    half_life = half_life_days * (1.0 + math.log1p(max(0, rec.access_count)))
    return float(0.5 ** (age_days / half_life))


def rank_factor(rec: MemoryRecord, weight: float) -> float:
    """Multiplier applied to the fused score: confidence and decay. Confidence moves it by
    at most 20 %, about the RRF gap between rank 1 and rank 3, so it orders near-equals
    without overriding what both searches agree is more relevant."""
    return (0.9 + 0.2 * rec.confidence) * (0.5 + 0.5 * weight)


@dataclass
class GcReport:
    expired_purged: int
    rows_before: int
    rows_after: int
    versions_cleaned: bool
    decayed: int = 0
    archived: int = 0  # rows moved to the archive (olav.memory.lifecycle.archive) after the pass


def gc(
    store: MemoryStore,
    *,
    retention: timedelta = maintenance.RETENTION,
    policy: MemoryPolicy = DEFAULTS,
    log: DecisionLog | None = None,
    since: datetime | None = None,
) -> GcReport:
    """Purge expired rows, compact and optimise, and drop table versions older than
    ``retention`` (olav never reads an old version; maintain() drops them as well). Each
    expired row, each row whose decay weight fell below ``policy.decayed_below`` since the
    last pass (``since``), and the pass itself go to ``log``."""
    now = datetime.now(UTC)
    with store.maintenance_lock():  # on a team table: LeaseHeldError if another machine is
        before = store.size()
        where = f"expires_at IS NOT NULL AND expires_at <= {sql_ts(now)}"
        expired = store.list_rows(where) if log is not None else []
        purged = store.delete(where=where)
        store.maintain(force_optimize=True, full=True)  # compacts; rebuilds a stuck ANN index
        store.table.optimize(cleanup_older_than=retention)
        decayed = _newly_decayed(store, policy, now, since) if log is not None else []
        after = store.size()
    decisions = [_expired(r) for r in expired] + decayed
    why = f"gc purged {purged} expired rows; {before} rows before, {after} after; compacted"
    detail = {"purged": purged, "rows_before": before, "rows_after": after}
    decisions.append(Decision("lifecycle", "collected", None, why, None, None, detail))
    record(log, None, decisions)
    return GcReport(purged, before, after, True, len(decayed))


def _expired(rec: MemoryRecord) -> Decision:
    at = rec.expires_at
    when = f"{at:%Y-%m-%d %H:%M} UTC" if at is not None else "?"
    why = f"its expiry ({when}) passed; purged by gc"
    return Decision("lifecycle", "expired", rec.id, why, rec.category)


def _newly_decayed(
    store: MemoryStore, policy: MemoryPolicy, now: datetime, since: datetime | None
) -> list[Decision]:
    """The live rows whose weight fell below ``policy.decayed_below`` after ``since`` (the
    last gc; all such rows on the first pass)."""
    exempt = sorted(policy.no_decay_origins)
    where = "invalidated_at IS NULL" + (
        " AND origin NOT IN (" + ", ".join(sql_str(o) for o in exempt) + ")" if exempt else ""
    )
    out = []
    floor = policy.decayed_below
    for rec in store.list_rows(where):
        weight = decay_weight(rec, policy=policy, now=now)
        if weight >= floor:
            continue
        if since is not None and decay_weight(rec, policy=policy, now=since) < floor:
            continue  # logged by an earlier pass
        stamp = rec.updated_at or rec.created_at
        age = (now - stamp).total_seconds() / 86400 if stamp else 0.0
        why = (
            f"weight {weight:.2f} < {floor:g} after {age:.0f} days unchanged "
            f"(half-life {policy.half_life(rec.category):g} d, recalled {rec.access_count}x)"
        )
        out.append(Decision("lifecycle", "decayed", rec.id, why, rec.category, None))
    return out
