"""Reflections: one-line lessons from failures (scope global, 30-day TTL, deduplicated)."""

from __future__ import annotations

import hashlib
from typing import Any

from olav.memory.schema import MemoryRecord, expiry_for
from olav.memory.scopes import scoped_id

DEDUP_DISTANCE = 0.20  # squared L2 for e5; see olav.memory.calibration


def add_reflection(
    store: Any,
    lesson: str,
    *,
    source: str = "trace_learner",
    dedup_distance: float = DEDUP_DISTANCE,
    scope: str = "global",
) -> tuple[bool, str]:
    """Store a lesson in ``scope`` unless a near-identical live one exists there. Returns
    (added, id)."""
    text = " ".join(lesson.split())
    if not text:
        raise ValueError("a lesson needs text")
    hits = store.search(text, mode="vector", scopes=[scope], categories=["reflection"], k=1)
    if hits and hits[0].distance is not None and hits[0].distance <= dedup_distance:
        return False, hits[0].record.id
    rid = scoped_id("refl_" + hashlib.sha256(text.lower().encode()).hexdigest()[:16], scope)
    store.upsert([lesson_record(rid, text, source, scope)])
    return True, rid


def lesson_record(rid: str, text: str, source: str, scope: str = "global") -> MemoryRecord:
    """A lesson row as the learning loop stores it (agent-made, with a TTL)."""
    return MemoryRecord(
        id=rid,
        text=text,
        category="reflection",
        scope=scope,
        origin="agent",
        confidence=0.6,
        metadata={"source": source},
        expires_at=expiry_for("reflection"),
    )
