"""Writing facts and preferences without contradictions or duplicates.

A new fact/preference is compared with the live rows of the same category and scope:
- the same normalised text: merged into the existing row (confidence kept at the higher);
- the same subject key (``metadata.subject``), or a near-duplicate within the calibrated
  distance: it **supersedes** the old row, which gets ``invalidated_at`` and
  ``superseded_by`` and stays for history, never recalled again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from olav.memory.filters import SearchFilter
from olav.memory.schema import MemoryRecord
from olav.memory.sql import sql_str
from olav.memory.store import MemoryStore

SUPERSEDING = ("fact", "preference", "decision")


@dataclass
class RememberResult:
    action: str  # added | merged | superseded
    memory_id: str
    replaced: list[str]


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def remember(
    store: MemoryStore,
    rec: MemoryRecord,
    *,
    near_distance: float,
    audit: Any = None,
    actor: str = "user",
) -> RememberResult:
    if rec.category not in SUPERSEDING:
        store.upsert([rec])
        return RememberResult("added", rec.id, [])
    hits = store.search(
        rec.text,
        mode="vector",
        k=5,
        filter=SearchFilter(scopes=[rec.scope], categories=[rec.category]),
    )
    hits = [h for h in hits if h.record.id != rec.id]
    same = [h for h in hits if _norm(h.record.text) == _norm(rec.text)]
    if same:
        old = same[0].record
        store.update(old.id, confidence=max(old.confidence, rec.confidence))
        return RememberResult("merged", old.id, [])
    subject = rec.metadata.get("subject")
    replaced = []
    if subject:
        needle = sql_str("%" + '"subject": ' + _json_str(subject) + "%")
        where = (
            f"category = {sql_str(rec.category)} AND scope = {sql_str(rec.scope)} AND "
            f"invalidated_at IS NULL AND metadata LIKE {needle}"
        )
        replaced += [r.id for r in store.list_rows(where) if r.id != rec.id]
    replaced += [
        h.record.id
        for h in hits
        if h.distance is not None and h.distance <= near_distance and h.record.id not in replaced
    ]
    store.upsert([rec])
    now = datetime.now(UTC)
    for old_id in replaced:
        store.update(old_id, invalidated_at=now, superseded_by=rec.id)
        if audit is not None:
            audit.memory_event(old_id, "supersede", actor, {"by": rec.id})
    return RememberResult("superseded" if replaced else "added", rec.id, replaced)


def _json_str(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def history(store: MemoryStore, memory_id: str) -> list[MemoryRecord]:
    """The supersede chain through ``memory_id``, oldest first."""
    chain: list[MemoryRecord] = []
    seen: set[str] = set()
    current = store.get(memory_id)
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
        current = store.get(current.superseded_by) if current.superseded_by else None
    return chain
