"""Reflections: one-line lessons from failures (scope global, 30-day TTL, deduplicated)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from olav.memory.filters import SearchFilter
from olav.memory.schema import MemoryRecord, expiry_for
from olav.memory.scopes import scoped_id
from olav.memory.sql import live_filter, sql_str

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
    hits = store.search(
        text, mode="vector", k=1, filter=SearchFilter(scopes=[scope], categories=["reflection"])
    )
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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def lessons_naming(
    store: Any, tool: str, scopes: Sequence[str], *, limit: int = 2
) -> list[MemoryRecord]:
    """Live lessons in ``scopes`` that name ``tool`` as a whole identifier, newest first (at
    most ``limit``). A lesson about using a tool ("When format_and_export rejects a format,
    ...") is often far from the request in the embedder's space, and it is needed when that
    tool fails rather than when the request arrives."""
    if not _IDENT.fullmatch(tool):
        return []
    like = f"text LIKE {sql_str('%' + tool + '%')}"  # a superset: _ matches any character
    where = live_filter(scopes=scopes, categories=["reflection"], extra=like)
    named = re.compile(rf"(?<!\w){re.escape(tool)}(?!\w)")
    rows = [r for r in store.list_rows(where) if named.search(r.text)]
    rows.sort(key=lambda r: r.updated_at or r.created_at or _EPOCH, reverse=True)
    return rows[:limit]
