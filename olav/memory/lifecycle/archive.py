"""Cold storage: the live rows over a category's capacity move to an archive table.

``memory.policy.capacity.<category>`` bounds the live rows (not invalidated, not expired) of
a category in each scope (``global``, an agent, ``team:…``, ``user:…``). When a write leaves
more, the rows of the lowest value move to the table ``memory_archive`` beside ``memory``;
value is ``confidence × decay × (1 + ln(1 + access count))``
(olav.memory.lifecycle.decay.decay_weight), so a row that is old, unused and unsure goes
first. Guides and pinned rows are never archived. Archived rows are kept whole (text,
vectors, counts) and never recalled, since recall reads only ``memory``; ``olav memory
archive list|restore`` shows and brings them back.

A move copies the rows into the archive first and deletes them from ``memory`` after, so a
process killed in between leaves a row in both tables, never in neither. A restore marks the
archive copies first (``metadata.archive_restoring``), writes them back into ``memory``, then
deletes them from the archive. So a row found in both tables says which way it was going:
marked, a restore, which the next pass finishes by dropping the archive copy; unmarked, a
move, finished by dropping the live one. Each pass over a category, and each restore, holds
the table's write lock (the file lock, or the write lease of a table on object storage)
throughout, so two processes never archive the same surplus twice and a restore is never
undone half-way. Each move is a ``lifecycle`` decision ``archived`` (``restored`` for the way
back) with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.lifecycle.decay import decay_weight
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import Reader
from olav.memory.store.sql import filter_where, live_filter, sql_in, sql_str
from olav.memory.store.table import MemoryStore

ARCHIVE_TABLE = "memory_archive"
RESTORING = "archive_restoring"  # on an archive copy being restored (see the module docstring)
# run between the copy and the delete of a move, and between a restore's write back and its
# delete from the archive (the tests kill the process there)
between_copy_and_delete: Callable[[], None] | None = None
between_restore_and_delete: Callable[[], None] | None = None


def _without_mark(rec: MemoryRecord) -> MemoryRecord:
    if RESTORING not in rec.metadata:
        return rec
    meta = {k: v for k, v in rec.metadata.items() if k != RESTORING}
    return replace(rec, metadata=meta)


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

    def rows(self, where: str | None = None, *, marked: bool = True) -> list[MemoryRecord]:
        """The archived rows (``where``: a predicate). ``marked=False`` leaves the restore
        mark out of their metadata, as ``olav memory archive list`` shows them."""
        table = self._open(create=False)
        if table is None or table.count_rows() == 0:
            return []
        q = table.search().limit(table.count_rows())
        if where:
            q = q.where(where)
        found = [MemoryRecord.from_row(r) for r in q.to_list()]
        return found if marked else [_without_mark(r) for r in found]

    def readable(self, reader: Reader, *, category: str | None = None) -> list[MemoryRecord]:
        """The archived rows ``reader`` may read (of ``category``, or all), as ``olav memory
        archive list`` shows them: without the restore mark."""
        chosen = SearchFilter(
            reader=reader, categories=[category] if category else None, include_invalid=True
        )
        return self.rows(filter_where(chosen), marked=False)

    @staticmethod
    def _ids_and_marks(table: Any, where: str) -> dict[str, bool]:
        """id -> whether a restore marked it, for the archived rows ``where`` selects (no
        vectors read)."""
        total = table.count_rows()
        if not total:
            return {}
        got = table.search().where(where).select(["id", "metadata"]).limit(total).to_list()
        return {str(r["id"]): RESTORING in (r.get("metadata") or "") for r in got}

    def _write(self, table: Any, records: Sequence[MemoryRecord]) -> None:
        data = pa.Table.from_pylist([r.to_row() for r in records], schema=self.store.schema)
        (
            table.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(data, on_bad_vectors="null")
        )

    def ids(self) -> set[str]:
        return {r.id for r in self.rows()}

    def move(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Copy ``records`` (with their vectors) into the archive, then delete them from the
        live table. Idempotent: a move interrupted after the copy is finished by the next."""
        if not records:
            return []
        ids = [r.id for r in records]
        with self.store.write_lock():
            self._write(self._open(create=True), [_without_mark(r) for r in records])
            if between_copy_and_delete is not None:
                between_copy_and_delete()
            self.store.delete(ids=ids)
        return ids

    def restore(self, ids: Sequence[str]) -> list[str]:
        """Put archived rows back into the live table as they were, then drop them from the
        archive. Returns the ids restored."""
        if not ids:
            return []
        with self.store.write_lock():
            table = self._open(create=False)
            found = self.rows(sql_in("id", list(ids))) if table is not None else []
            if not found:
                return []
            back = [r.id for r in found]
            # the mark first: a kill from here on finishes the restore, never undoes it
            self._write(
                table, [replace(r, metadata={**r.metadata, RESTORING: True}) for r in found]
            )
            self.store.upsert([_without_mark(r) for r in found], restore=True)
            if between_restore_and_delete is not None:
                between_restore_and_delete()
            table.delete(sql_in("id", back))
        return back

    def finish_interrupted(self, category: str) -> list[str]:
        """Finish what a killed move or restore of ``category`` left: a row in both tables
        loses its archive copy when a restore marked it, else its live copy; a marked row
        that never got back into ``memory`` is written back. Returns the ids settled. The
        caller holds the write lock."""
        table = self._open(create=False)
        found = (
            {} if table is None else self._ids_and_marks(table, f"category = {sql_str(category)}")
        )
        if not found:
            return []
        live = {r.id for r in self.store.list_rows(sql_in("id", list(found)))}
        marked = {i for i, m in found.items() if m}
        unfinished = sorted(marked - live)
        if unfinished:
            self.store.upsert(self.rows(sql_in("id", unfinished), marked=False), restore=True)
        restored = sorted(marked)
        if restored:
            table.delete(sql_in("id", restored))
        moved = sorted(live - marked)
        if moved:
            self.store.delete(ids=moved)
        return sorted(restored + moved)


def _lowest(
    rows: Sequence[MemoryRecord], over: int, policy: MemoryPolicy, now: datetime
) -> list[MemoryRecord]:
    """The ``over`` rows of least value (oldest first among equals), pinned rows never."""
    if over <= 0:
        return []
    movable = [r for r in rows if not r.metadata.get("pinned")]
    movable.sort(key=lambda r: (value_of(r, policy, now), r.created_at or now, r.id))
    return movable[:over]


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
    given) to the archive until each scope's rows of it are within its capacity: one
    operator's private rows, a team's and the shared ones are bounded apart, so one busy
    writer never pushes out another's memories. Returns the ids archived."""
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
        # one pass per category under the write lock: the count, the choice and the move
        # see no other writer's rows come or go in between
        with store.write_lock():
            archive.finish_interrupted(category)  # nothing to read before the first move
            live = store.list_rows(live_filter(categories=[category], at=now), with_vector=True)
            if len(live) <= cap:
                continue
            by_scope: dict[str, list[MemoryRecord]] = {}
            for r in live:
                by_scope.setdefault(r.scope, []).append(r)
            for scope, rows in sorted(by_scope.items()):
                victims = _lowest(rows, len(rows) - cap, policy, now)
                moved += archive.move(victims)
                for rec in victims:
                    why = (
                        f"{category} in {scope} holds {len(rows)} live rows, capacity {cap}: "
                        f"value {value_of(rec, policy, now):.3f} (confidence "
                        f"{rec.confidence:g}, decay {decay_weight(rec, policy=policy, now=now):.2f}"
                        f", recalled {rec.access_count}x) among the lowest"
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
