"""Writing facts and preferences without contradictions or duplicates.

A new row of a category the policy compares (``memory.policy.conflicts``: fact, preference
and decision by default) is compared with the live rows of the same category and scope:
- the same normalised text: merged into the existing row (confidence kept at the higher);
- the same subject key (``metadata.subject``), or a near-duplicate within
  ``dedup.supersede``: a conflict. ``supersede`` (the default): the old row gets
  ``invalidated_at`` and ``superseded_by`` and stays for history, never recalled again;
  ``keep_both``: both stay live; ``review``: both stay and the new row names the old ones in
  ``metadata.review`` for a person. Every outcome is logged (olav.memory.decisions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.lifecycle.archive import enforce_capacity
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE, Reader
from olav.memory.store.sql import sql_str
from olav.memory.store.table import MemoryStore


@dataclass
class RememberResult:
    action: str  # added | merged | superseded | kept_both | review
    memory_id: str
    replaced: list[str]


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def remember(
    store: MemoryStore,
    rec: MemoryRecord,
    *,
    near_distance: float | None = None,
    policy: MemoryPolicy = DEFAULTS,
    audit: Any = None,
    actor: str = "user",
    log: DecisionLog | None = None,
    run_id: str | None = None,
) -> RememberResult:
    """Write ``rec`` as its category's conflict mode says (``policy.conflict_mode``): the
    same text is merged; a live row of the same subject, or nearer than ``near_distance``
    (default ``policy.supersede_distance``), is superseded, kept beside it, or kept and
    sent for review. Each decision, with its reason, goes to ``log``."""
    mode = policy.conflict_mode(rec.category)
    if mode == "off":
        store.upsert([rec])
        return RememberResult("added", rec.id, [])
    near = policy.supersede_distance if near_distance is None else near_distance
    hits = store.search(
        rec.text,
        mode="vector",
        k=5,
        filter=SearchFilter(
            scopes=[rec.scope], categories=[rec.category], reader=Reader.owning([rec.scope])
        ),
    )
    hits = [h for h in hits if h.record.id != rec.id]
    same = [h for h in hits if _norm(h.record.text) == _norm(rec.text)]
    if same:
        old = same[0].record
        store.update(old.id, confidence=max(old.confidence, rec.confidence))
        same_text = "the same text as a live row (its confidence kept at the higher)"
        record(log, run_id, [_conflict("merged", rec, old.id, same_text)])
        return RememberResult("merged", old.id, [])
    subject = rec.metadata.get("subject")
    why: dict[str, str] = {}
    if subject:
        needle = sql_str("%" + '"subject": ' + _json_str(subject) + "%")
        where = (
            f"category = {sql_str(rec.category)} AND scope = {sql_str(rec.scope)} AND "
            f"invalidated_at IS NULL AND metadata LIKE {needle}"
        )
        for r in store.list_rows(where):
            if r.id != rec.id:
                why[r.id] = f"the same subject {subject!r}"
    for h in hits:
        if h.distance is not None and h.distance <= near and h.record.id not in why:
            why[h.record.id] = f"distance {h.distance:.3f} <= {near:g}"
    replaced = list(why)
    if replaced and mode == "review":
        rec.metadata = dict(rec.metadata, review=replaced)
    store.upsert([rec])
    enforce_capacity(store, policy, categories=[rec.category], log=log, run_id=run_id)
    if not replaced:
        reason = f"no live {rec.category} of its subject or within {near:g}"
        record(log, run_id, [Decision("write", "captured", rec.id, reason, rec.category)])
        return RememberResult("added", rec.id, [])
    action = {"supersede": "superseded", "keep_both": "kept_both", "review": "review"}[mode]
    record(log, run_id, [_conflict(action, rec, old, why[old]) for old in replaced])
    if mode != "supersede":
        return RememberResult(action, rec.id, [])
    now = datetime.now(UTC)
    for old_id in replaced:
        store.update(old_id, invalidated_at=now, superseded_by=rec.id)
        if audit is not None:
            audit.memory_event(old_id, "supersede", actor, {"by": rec.id})
    return RememberResult("superseded", rec.id, replaced)


def _conflict(action: str, rec: MemoryRecord, other: str, why: str) -> Decision:
    return Decision("conflict", action, rec.id, why, rec.category, other)


def _json_str(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def history(store: MemoryStore, memory_id: str) -> list[MemoryRecord]:
    """The supersede chain through ``memory_id``, oldest first."""
    chain: list[MemoryRecord] = []
    seen: set[str] = set()
    current = store.read(memory_id, EVERYONE)
    # walk back to the oldest ancestor
    while current is not None and current.id not in seen:
        seen.add(current.id)
        older = store.list_rows(f"superseded_by = {sql_str(current.id)}")
        if not older:
            break
        current = older[0]
    seen.clear()
    while current is not None and current.id not in seen:
        seen.add(current.id)
        chain.append(current)
        current = store.read(current.superseded_by, EVERYONE) if current.superseded_by else None
    return chain
