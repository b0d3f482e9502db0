"""Reflections: one-line lessons from failures (scope global, 30-day TTL, deduplicated)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.lifecycle.archive import enforce_capacity
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import Reader, scoped_id
from olav.memory.store.sql import live_filter, sql_str


def add_reflection(
    store: Any,
    lesson: str,
    *,
    source: str = "trace_learner",
    dedup_distance: float | None = None,
    scope: str = "global",
    policy: MemoryPolicy = DEFAULTS,
    log: DecisionLog | None = None,
    run_id: str | None = None,
    runs: Sequence[str] = (),
) -> tuple[bool, str]:
    """Store a lesson in ``scope`` unless a near-identical live one exists there. Returns
    (added, id). ``dedup_distance`` defaults to the policy's for the store's embedder; the
    decision (captured, or deduplicated against which row) goes to ``log``. ``runs``: the
    runs the lesson was learned from, kept in its metadata (``run_ids``)."""
    text = " ".join(lesson.split())
    if not text:
        raise ValueError("a lesson needs text")
    if dedup_distance is None:
        dedup_distance = policy.dedup_for(store.embedder.name)
    hits = store.search(
        text,
        mode="vector",
        k=1,
        filter=SearchFilter(
            scopes=[scope], categories=["reflection"], reader=Reader.owning([scope])
        ),
    )
    if hits and hits[0].distance is not None and hits[0].distance <= dedup_distance:
        near = hits[0]
        why = f"distance {near.distance:.3f} <= {dedup_distance:g} to a live lesson"
        detail = {"distance": near.distance, "source": source}
        record(log, run_id, [_lesson_decision("deduplicated", None, why, near.record.id, detail)])
        return False, near.record.id
    rid = scoped_id("refl_" + hashlib.sha256(text.lower().encode()).hexdigest()[:16], scope)
    store.upsert([lesson_record(rid, text, source, scope, policy=policy, runs=runs)])
    enforce_capacity(store, policy, categories=["reflection"], log=log, run_id=run_id)
    nearest = f"; nearest {hits[0].distance:.3f}" if hits and hits[0].distance is not None else ""
    why = f"a new lesson from {source} (dedup distance {dedup_distance:g}{nearest})"
    record(log, run_id, [_lesson_decision("captured", rid, why, None, {"source": source})])
    return True, rid


def _lesson_decision(
    action: str, rid: str | None, why: str, other: str | None, detail: dict[str, Any]
) -> Decision:
    return Decision("write", action, rid, why, "reflection", other, detail)


def lesson_record(
    rid: str,
    text: str,
    source: str,
    scope: str = "global",
    *,
    policy: MemoryPolicy = DEFAULTS,
    runs: Sequence[str] = (),
) -> MemoryRecord:
    """A lesson row as the learning loop stores it (agent-made, with the policy's TTL)."""
    return MemoryRecord(
        id=rid,
        text=text,
        category="reflection",
        scope=scope,
        origin="agent",
        confidence=policy.confidence_of("reflection"),
        metadata={"source": source, **({"run_ids": list(runs)} if runs else {})},
        expires_at=policy.expiry_for("reflection"),
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def lessons_naming(
    store: Any, tool: str, scopes: Sequence[str], *, limit: int = DEFAULTS.tool_lessons
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
