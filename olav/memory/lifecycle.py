"""Memory lifecycle: time decay, pinning, soft deletion, garbage collection.

Decay: a memory's weight halves every ``memory.half_life_days`` since it was last updated.
Memories that came from users or documents, and pinned ones, do not decay; frequently
recalled ones decay more slowly (the half-life grows with log(1 + access_count)). The weight
only scales ranking between 0.5 and 1.0: an old but exact match still wins over a fresh
irrelevant one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from olav.memory import maintenance
from olav.memory.schema import MemoryRecord
from olav.memory.sql import sql_ts
from olav.memory.store import MemoryStore

NO_DECAY_ORIGINS = frozenset({"user", "document"})
ORIGIN_RANK = {"user": 0, "directive": 1, "document": 2, "config": 3, "agent": 4, "audit": 5}
DEFAULT_HALF_LIFE_DAYS = 30.0


def decay_weight(
    rec: MemoryRecord,
    *,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    now: datetime | None = None,
) -> float:
    if rec.origin in NO_DECAY_ORIGINS or rec.metadata.get("pinned") or half_life_days <= 0:
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


def pin(store: MemoryStore, memory_id: str) -> MemoryRecord:
    rec = _require(store, memory_id)
    meta = dict(rec.metadata, pinned=True)
    return store.update(memory_id, metadata=meta, confidence=1.0, expires_at=None)


def soft_delete(
    store: MemoryStore, memory_id: str, *, actor: str = "user", audit: Any = None
) -> MemoryRecord:
    rec = _require(store, memory_id)
    meta = dict(rec.metadata, deleted_by=actor)
    out = store.update(memory_id, invalidated_at=datetime.now(UTC), metadata=meta)
    if audit is not None:
        audit.memory_event(memory_id, "delete", actor, {"text": rec.text[:2000]})
    return out


def edit_text(
    store: MemoryStore, memory_id: str, text: str, *, actor: str = "user", audit: Any = None
) -> MemoryRecord:
    rec = _require(store, memory_id)
    meta = dict(rec.metadata)
    if "body" in meta:
        meta["body"] = text
    out = store.update(memory_id, text=text, metadata=meta)
    if audit is not None:
        audit.memory_event(memory_id, "edit", actor, {"old_text": rec.text[:2000]})
    return out


def _require(store: MemoryStore, memory_id: str) -> MemoryRecord:
    from olav.core.errors import NotFoundError

    rec = store.get(memory_id)
    if rec is None:
        raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
    return rec


@dataclass
class GcReport:
    expired_purged: int
    rows_before: int
    rows_after: int
    versions_cleaned: bool


def gc(store: MemoryStore, *, retention: timedelta = maintenance.RETENTION) -> GcReport:
    """Purge expired rows, compact and optimise, and drop table versions older than
    ``retention`` (olav never reads an old version; maintain() drops them as well)."""
    with store.maintenance_lock():  # on a team table: LeaseHeldError if another machine is
        before = store.count()
        purged = store.delete(
            where=f"expires_at IS NOT NULL AND expires_at <= {sql_ts(datetime.now(UTC))}"
        )
        store.maintain(force_optimize=True, full=True)  # compacts; rebuilds a stuck ANN index
        store.table.optimize(cleanup_older_than=retention)
    return GcReport(purged, before, store.count(), True)


def run_gc(ws: Any) -> str:
    """The `gc` cron job."""
    report = gc(MemoryStore.for_workspace(ws))
    return (
        f"purged {report.expired_purged} expired rows; {report.rows_after} rows remain; "
        "old versions cleaned"
    )
