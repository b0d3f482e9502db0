"""Cold storage: the live rows over a category's capacity move to an archive table.

``memory.policy.capacity.<category>`` bounds the live rows (not invalidated, not expired) of
a category. When a write leaves more, the rows of the lowest value move to the table
``memory_archive`` beside ``memory``; value is ``confidence × decay × (1 + ln(1 + access
count))`` (olav.memory.lifecycle.decay.decay_weight), so a row that is old, unused and unsure goes
first. Guides and pinned rows are never archived. Archived rows are kept whole (text,
vectors, counts) and never recalled, since recall reads only ``memory``; ``olav memory
archive list|restore`` shows and brings them back.

A move copies the rows into the archive first and deletes them from ``memory`` after, so a
process killed in between leaves a row in both tables, never in neither; the next move (or
restore) finds the copy already there and finishes. Each move is a ``lifecycle`` decision
``archived`` (``restored`` for the way back) with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.lifecycle.decay import decay_weight
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.sql import live_filter, sql_in, sql_str
from olav.memory.store.table import MemoryStore

ARCHIVE_TABLE = "memory_archive"
# run between the copy and the delete of a move (a test kills the process there)
between_copy_and_delete: Callable[[], None] | None = None


def value_of(rec: MemoryRecord, policy: MemoryPolicy, now: datetime | None = None) -> float:
    """What keeping a row is worth: its confidence, its decay weight and how often it was
    recalled."""
    weight = decay_weight(rec, policy=policy, now=now)
    return rec.confidence * weight * (1.0 + math.log1p(max(0, rec.access_count)))


class Archive:
    """The archive table of one store (created on the first move)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def _open(self, create: bool) -> Any:
        db = self.store._db  # the store's connection: same database, same location
        if ARCHIVE_TABLE in self.store._tables():
            return db.open_table(ARCHIVE_TABLE)
        if not create:
            return None
        return db.create_table(ARCHIVE_TABLE, schema=self.store.schema)

    def rows(self, where: str | None = None) -> list[MemoryRecord]:
        table = self._open(create=False)
        if table is None or table.count_rows() == 0:
            return []
        q = table.search().limit(table.count_rows())
        if where:
            q = q.where(where)
        return [MemoryRecord.from_row(r) for r in q.to_list()]

    def ids(self) -> set[str]:
        return {r.id for r in self.rows()}

    def move(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Copy ``records`` (with their vectors) into the archive, then delete them from the
        live table. Idempotent: a move interrupted after the copy is finished by the next."""
        if not records:
            return []
        ids = [r.id for r in records]
        with self.store.write_lock():
            table = self._open(create=True)
            data = pa.Table.from_pylist([r.to_row() for r in records], schema=self.store.schema)
            (
                table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(data, on_bad_vectors="null")
            )
            if between_copy_and_delete is not None:
                between_copy_and_delete()
        self.store.delete(ids=ids)
        return ids

    def restore(self, ids: Sequence[str]) -> list[str]:
        """Put archived rows back into the live table as they were, then drop them from the
        archive. Returns the ids restored."""
        found = self.rows(sql_in("id", list(ids))) if ids else []
        if not found:
            return []
        self.store.upsert(found, restore=True)
        with self.store.write_lock():
            table = self._open(create=False)
            if table is not None:
                table.delete(sql_in("id", [r.id for r in found]))
        return [r.id for r in found]


def _finish_interrupted(store: MemoryStore, archive: Archive, category: str) -> list[str]:
    """Rows of ``category`` a killed move left in both tables: delete the live copy."""
    both = [r.id for r in archive.rows(f"category = {sql_str(category)}")]
    live = {r.id for r in store.list_rows(sql_in("id", both))} if both else set()
    if live:
        store.delete(ids=sorted(live))
    return sorted(live)


def enforce_capacity(
    store: MemoryStore,
    policy: MemoryPolicy = DEFAULTS,
    *,
    categories: Sequence[str] | None = None,
    log: DecisionLog | None = None,
    run_id: str | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Move the lowest-value live rows of each bounded category (of ``categories``, when
    given) to the archive until it is within its capacity. Returns the ids archived."""
    if not policy.bounded():
        return []
    now = now or datetime.now(UTC)
    archive = Archive(store)
    moved: list[str] = []
    decisions: list[Decision] = []
    for category, cap in policy.capacity.items():
        if cap is None or category in policy.never_archived:
            continue
        if categories is not None and category not in categories:
            continue
        if ARCHIVE_TABLE in store._tables():
            _finish_interrupted(store, archive, category)
        live = store.list_rows(live_filter(categories=[category], at=now), with_vector=True)
        over = len(live) - cap
        if over <= 0:
            continue
        movable = [r for r in live if not r.metadata.get("pinned")]
        ranked = sorted(
            movable, key=lambda r: (value_of(r, policy, now), r.created_at or now, r.id)
        )
        victims = ranked[:over]
        moved += archive.move(victims)
        for rec in victims:
            why = (
                f"{category} holds {len(live)} live rows, capacity {cap}: value "
                f"{value_of(rec, policy, now):.3f} (confidence {rec.confidence:g}, decay "
                f"{decay_weight(rec, policy=policy, now=now):.2f}, recalled {rec.access_count}x) "
                "among the lowest"
            )
            decisions.append(Decision("lifecycle", "archived", rec.id, why, category))
    record(log, run_id, decisions)
    return moved


def restore(store: MemoryStore, ids: Sequence[str], *, log: DecisionLog | None = None) -> list[str]:
    """Bring archived rows back (``olav memory archive restore``)."""
    archive = Archive(store)
    rows = {r.id: r for r in archive.rows(sql_in("id", list(ids)))} if ids else {}
    back = archive.restore(list(ids))
    why = "restored from the archive by a person"
    items = [Decision("lifecycle", "restored", rid, why, rows[rid].category) for rid in back]
    record(log, None, items)
    return back
