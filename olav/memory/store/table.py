"""MemoryStore: the library API over the one LanceDB ``memory`` table.

Writers are serialised across processes with a file lock next to the database, because two
processes running ``merge_insert`` on the same ids leave duplicates; a table on object storage
(``memory.uri``) uses leases in the bucket instead (olav.memory.store.writes).
Readers open the table with a zero read-consistency interval, so they see other processes'
writes. Scope, category, expiry and invalidation are always LanceDB pre-filters, never post-filters.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from olav.core.errors import MemoryStoreError, NotFoundError
from olav.core.log import quiet_native_libraries
from olav.memory.store import maintenance
from olav.memory.store.connection import (
    BACKUP_PREFIX,
    connect,
    open_or_create,
    recover_swap,
    table_names,
)

# names callers import from here (the store's modules are split by concern; these stay
# importable from olav.memory.store.table)
from olav.memory.store.connection import REEMBED_TABLE as REEMBED_TABLE
from olav.memory.store.connection import VECTOR_COLUMNS as VECTOR_COLUMNS
from olav.memory.store.connection import drop_backup as drop_backup
from olav.memory.store.connection import lock_path as lock_path
from olav.memory.store.connection import reembed as reembed
from olav.memory.store.embedders import Embedder
from olav.memory.store.filters import NEWEST, Order, SearchFilter, order_columns, sorted_ids
from olav.memory.store.hits import Hit as Hit
from olav.memory.store.maintenance import MAX_FRAGMENTS as MAX_FRAGMENTS
from olav.memory.store.maintenance import REBUILD_ROWS as REBUILD_ROWS
from olav.memory.store.remote import MemoryLocation, location, memory_location, remote_errors
from olav.memory.store.schema import TABLE as TABLE
from olav.memory.store.schema import MemoryRecord, build_schema, now, validate
from olav.memory.store.scopes import Reader
from olav.memory.store.search import SEARCH_MODES as SEARCH_MODES
from olav.memory.store.search import Searcher, SearchTuning
from olav.memory.store.sql import live_filter as live_filter
from olav.memory.store.sql import required_where, sql_in
from olav.memory.store.textvectors import embed_missing
from olav.memory.store.vcache import VectorCache
from olav.memory.store.writes import RemoteGuards, file_guard, retry_conflicts


@dataclass
class UpsertResult:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)


class MemoryStore:
    """Open (or create) the memory table at ``path`` for ``embedder``. Its search
    (:class:`~olav.memory.store.search.Searcher`) and its maintenance
    (:class:`~olav.memory.store.maintenance.Maintenance`) are parts it holds."""

    def __init__(
        self,
        path: Path | MemoryLocation,
        embedder: Embedder,
        *,
        tuning: SearchTuning = SearchTuning(),
        lock_timeout: float = 120.0,
        allow_destructive: bool = False,
        cold: bool = False,
    ) -> None:
        """``cold``: a read-only command; when the snapshot on disk holds the table's latest
        version (olav.memory.store.snapfile), the table is opened only if something needs it."""
        quiet_native_libraries()
        self.location = location(path)
        self.path = self.location.path  # the folder, for a local table
        self.embedder = embedder
        self.rrf_k = tuning.rrf_k
        self.ann_threshold = tuning.ann_threshold
        self._remote = RemoteGuards(self.location, lock_timeout) if self.location.remote else None
        if self._remote is None:
            self.path.mkdir(parents=True, exist_ok=True)
        self._lock: Any = None  # the writers' file lock (a local table), made on first use
        self._lock_timeout = lock_timeout
        self.schema = build_schema(embedder.dim, embedder.name)
        self.vcache = VectorCache(self.columns(False))
        self._tbl: Any = None
        self.searcher = Searcher(self)
        self.maintenance = maintenance.Maintenance(self)
        self._allow_destructive = allow_destructive
        if cold and self._remote is None and not allow_destructive:
            from olav.memory.store import snapfile

            snap = snapfile.load(self.path, embedder.name, embedder.dim, self.columns(False))
            if snap is not None:
                self.vcache.snapshot = snap
                return
        self._connect()

    def _connect(self) -> None:
        allow_destructive = self._allow_destructive
        with remote_errors(self.location):
            self._db = connect(self.location)
            if self._remote is not None:
                self._remote.on_taken = self._latest
            if self._remote is not None and TABLE in self._tables():
                # no lease to read; a machine that is creating the table may still be adding
                # its indexes, and ours then conflict: retry, and find them made
                self._tbl = retry_conflicts(lambda: self._open_or_create(allow_destructive))
                return
            with self.write_lock():
                recover_swap(self._db, self.location)
                self._tbl = self._open_or_create(allow_destructive)

    @property
    def _table(self) -> Any:
        """The LanceDB table, opened on first use by a store opened ``cold``."""
        if self._tbl is None:
            self._connect()
        return self._tbl

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def for_workspace(
        cls, ws: Any, embedder: Embedder | None = None, *, cold: bool = False
    ) -> MemoryStore:
        from olav.core.config import env_flag
        from olav.memory.store.embedders import make_embedder

        return cls(
            memory_location(ws),
            embedder or make_embedder(ws.config),
            tuning=SearchTuning.of(ws.config),
            allow_destructive=env_flag("OLAV_ALLOW_DESTRUCTIVE_DIM_MIGRATION"),
            cold=cold,
        )

    def write_lock(self) -> Any:
        """Serialises writers: the file lock, or the write lease of a remote table."""
        if self._remote is not None:
            return self._remote.write()
        return file_guard(self._file_lock())

    def maintenance_lock(self) -> Any:
        """Maintenance from one place at a time: the maintenance lease of a remote table
        (LeaseHeldError at once when another machine holds it), else the file lock."""
        if self._remote is not None:
            return self._remote.maintenance()
        return file_guard(self._file_lock())

    def _file_lock(self) -> Any:
        if self._lock is None:  # filelock's import is 50 ms of a cold read-only command
            from filelock import FileLock

            self._lock = FileLock(str(lock_path(self.path)), timeout=self._lock_timeout)
        return self._lock

    def _latest(self) -> None:
        table = getattr(self, "_tbl", None)
        if table is not None and self.location.refresh_seconds > 0:
            table.checkout_latest()

    def _tables(self) -> list[str]:
        return table_names(self._db)

    def _open_or_create(self, allow_destructive: bool) -> Any:
        return open_or_create(self._db, self.embedder, self.schema, allow_destructive)

    @property
    def table(self) -> Any:
        """The LanceDB table (opened on first use by a store opened ``cold``)."""
        return self._table

    @property
    def opened(self) -> bool:
        """Whether the table is open (a ``cold`` store may answer from its snapshot)."""
        return self._tbl is not None

    @property
    def remote(self) -> RemoteGuards | None:
        """The leases of a table on object storage; None for a local one."""
        return self._remote

    # -- its parts: search and maintenance ---------------------------------------------------

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        k: int = 10,
        filter: SearchFilter,
        candidates: int | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit]:
        """:meth:`Searcher.search <olav.memory.store.search.Searcher.search>`."""
        return self.searcher.search(
            query, mode=mode, k=k, filter=filter, candidates=candidates, query_vector=query_vector
        )

    def persist_snapshot(self) -> bool:
        return self.searcher.persist_snapshot()

    def maintain(self, *, force_optimize: bool = False, full: bool = False) -> dict[str, Any]:
        return self.maintenance.maintain(force_optimize=force_optimize, full=full)

    def needs_maintenance(self) -> bool:
        return self.maintenance.needs_maintenance()

    def index_state(self) -> dict[str, Any]:
        return self.maintenance.index_state()

    def fragments(self) -> int:
        return self.maintenance.fragments()

    # -- writes ------------------------------------------------------------------------------

    def _validate(self, rec: MemoryRecord) -> None:
        validate(rec, self.embedder.dim, self.embedder.name)

    def _embed_missing(self, records: list[MemoryRecord], batch: int = 64) -> None:
        """Embed texts and contexts that have no vector yet (in one stream of batches)."""
        embed_missing(self.embedder, records, batch=batch)

    def upsert(self, records: Iterable[MemoryRecord], *, restore: bool = False) -> UpsertResult:
        """Insert or replace rows by id. Keeps ``created_at`` and ``access_count`` of existing
        rows (unless ``restore``, which writes the records exactly as given). Idempotent:
        writing the same records twice changes nothing."""
        by_id: dict[str, MemoryRecord] = {}
        for rec in records:
            self._validate(rec)
            by_id[rec.id] = rec
        result = UpsertResult()
        if not by_id:
            return result
        batch = list(by_id.values())
        self._embed_missing(batch)  # slow work outside the lock
        stamp = now()
        with self.write_lock():
            existing = {r.id: r for r in self._fetch_ids(list(by_id))}
            for rec in batch:
                old = existing.get(rec.id)
                if restore:
                    (result.updated if old is not None else result.added).append(rec.id)
                elif old is not None:
                    rec.created_at = old.created_at
                    rec.access_count = old.access_count
                    rec.updated_at = rec.updated_at or stamp
                    rec.event_at = rec.event_at or old.event_at
                    result.updated.append(rec.id)
                else:
                    rec.created_at = rec.created_at or stamp
                    rec.updated_at = rec.updated_at or rec.created_at
                    result.added.append(rec.id)
                rec.event_at = rec.event_at or rec.created_at
            data = pa.Table.from_pylist([r.to_row() for r in batch], schema=self.schema)
            retry_conflicts(
                lambda: (
                    self._table.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(data, on_bad_vectors="null")
                )  # null = no context
            )
        return result

    def insert_new(self, records: Iterable[MemoryRecord]) -> list[str]:
        """Append rows whose ids are not stored yet; ids already present are skipped (a
        replayed capture stores nothing). Cheaper than upsert: one append, no merge."""
        batch = {}
        for rec in records:
            self._validate(rec)
            batch[rec.id] = rec
        if not batch:
            return []
        self._embed_missing(list(batch.values()))
        stamp = now()
        with self.write_lock():
            known = {r.id for r in self._fetch_ids(list(batch))}
            fresh = [r for rid, r in batch.items() if rid not in known]
            for rec in fresh:
                rec.created_at = rec.created_at or stamp
                rec.updated_at = rec.updated_at or rec.created_at
                rec.event_at = rec.event_at or rec.created_at
            if fresh:
                data = pa.Table.from_pylist([r.to_row() for r in fresh], schema=self.schema)
                retry_conflicts(lambda: self._table.add(data, on_bad_vectors="null"))
        return [r.id for r in fresh]

    def update(self, memory_id: str, **changes: Any) -> MemoryRecord:
        """Change fields of one row; a new ``text`` is re-embedded."""
        rec = self._by_id(memory_id, with_vector=True)
        if rec is None:
            raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
        for key, val in changes.items():
            if not hasattr(rec, key) or key in {"id", "created_at", "access_count"}:
                raise MemoryStoreError(f"field {key!r} cannot be updated")
            setattr(rec, key, val)
        if "text" in changes:
            rec.vector = None
        if "context" in changes:
            rec.context_vector = None
        rec.updated_at = now()
        self.upsert([rec])
        return rec

    def delete(self, *, ids: Sequence[str] | None = None, where: str | None = None) -> int:
        """Delete by ids or by predicate; returns the number of rows deleted."""
        if ids is None and where is None:
            raise MemoryStoreError("delete needs ids or a predicate")
        pred = sql_in("id", ids) if ids is not None else str(where)
        with self.write_lock():
            before = self._table.count_rows()
            retry_conflicts(lambda: self._table.delete(pred))
            return int(before - self._table.count_rows())

    def bump_access(self, ids: Sequence[str] | dict[str, int]) -> None:
        """Count recall hits: one per id in a list, or ``{id: hits}``. One write per distinct
        hit count, so callers should batch (the Recaller does, per run)."""
        counts = dict.fromkeys(ids, 1) if not isinstance(ids, dict) else ids
        by_n: dict[int, list[str]] = {}
        for rid, n in counts.items():
            if n > 0:
                by_n.setdefault(int(n), []).append(rid)
        if not by_n:
            return
        with self.write_lock():
            for n, group in sorted(by_n.items()):
                values = {"access_count": f"access_count + {n}"}
                pred = sql_in("id", group)
                retry_conflicts(lambda: self._table.update(where=pred, values_sql=values))  # noqa: B023

    # -- reads -------------------------------------------------------------------------------

    def columns(self, with_vector: bool) -> list[str]:
        return [f.name for f in self.schema if with_vector or f.name not in VECTOR_COLUMNS]

    def _by_id(self, memory_id: str, *, with_vector: bool = False) -> MemoryRecord | None:
        found = self._fetch_ids([memory_id], with_vector)
        return found[0] if found else None

    def _fetch_ids(self, ids: list[str], with_vector: bool = False) -> list[MemoryRecord]:
        out: list[MemoryRecord] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows = (
                self._table.search()
                .where(sql_in("id", chunk))
                .select(self.columns(with_vector))
                .limit(len(chunk) * 4 + 10)
                .to_list()
            )
            out.extend(MemoryRecord.from_row(r) for r in rows)
        return out

    # -- typed reads: what a client reads, always as some reader ---------------------------
    #
    # A client (the CLI, the console, the store API, MCP) reads with rows, count, values and
    # read, never with SQL: the filter is a value (olav.memory.store.filters), and it names
    # the reader, so another operator's private rows are not in what comes back.

    def read(
        self, memory_id: str, reader: Reader, *, with_vector: bool = False
    ) -> MemoryRecord | None:
        """The row ``memory_id`` if ``reader`` may read it, else None: a row of another
        operator's (or team's) scope is missing, so an id never reveals it."""
        rec = self._by_id(memory_id, with_vector=with_vector)
        return rec if rec is not None and reader.allows(rec.scope) else None

    def rows(
        self,
        filter: SearchFilter,
        *,
        order: Order = NEWEST,
        offset: int = 0,
        limit: int | None = None,
        with_vector: bool = False,
    ) -> list[MemoryRecord]:
        """The rows ``filter`` selects (its reader required), sorted by ``order``, from
        ``offset``, at most ``limit``. The order is computed from the ids and times alone; a
        page reads only its own rows."""
        where = required_where(filter, "rows")
        if offset < 0 or (limit is not None and limit < 0):
            raise MemoryStoreError(
                f"rows: offset {offset} and limit {limit} must not be negative",
                hint="Pass offset >= 0 and limit >= 0 (or no limit)",
            )
        keys = order_columns(order)
        times = self.column_values(keys, where)
        if times.num_rows == 0:
            return []
        ids = sorted_ids(times, order)
        page = ids[offset : None if limit is None else offset + limit]
        if not page:
            return []
        if len(page) == len(ids):  # every row: one read with the filter, not by ids
            found = {r.id: r for r in self.list_rows(where, with_vector=with_vector)}
        else:
            found = {r.id: r for r in self._fetch_ids(page, with_vector)}
        return [found[i] for i in page if i in found]

    def count(self, filter: SearchFilter) -> int:
        """How many rows ``filter`` selects (its reader required)."""
        where = required_where(filter, "count")
        return int(self._table.count_rows(where) if where else self._table.count_rows())

    def size(self) -> int:
        """The table's size: every row of every scope and state, as a number (no row is
        read, and none is named): maintenance, a health check, an empty table's fast path."""
        return int(self._table.count_rows())

    def values(self, columns: Sequence[str], filter: SearchFilter) -> pa.Table:
        """Only ``columns`` (no vectors) of the rows ``filter`` selects (its reader required),
        as Arrow: the charts and namespaces over a large table."""
        where = required_where(filter, "values")
        known = set(self.columns(False))
        for name in columns:
            if name not in known:
                raise MemoryStoreError(
                    f"values: no column {name!r}", hint="Ask for: " + ", ".join(sorted(known))
                )
        return self.column_values(list(columns), where)

    def scopes_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The scope of each of ``ids`` that is stored (in any state), and nothing else of
        it: for a caller that must tell a row that is gone from one it may not read (the
        console's decision log hides what names an unreadable row)."""
        if not ids:
            return {}
        wanted = list(dict.fromkeys(ids))
        out: dict[str, str] = {}
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            got = self.column_values(["id", "scope"], sql_in("id", chunk)).to_pylist()
            out.update({r["id"]: r["scope"] for r in got})
        return out

    # -- the library's own reads (olav.memory's modules and tests): SQL, every row -----------

    def list_rows(
        self, where: str | None = None, *, limit: int | None = None, with_vector: bool = False
    ) -> list[MemoryRecord]:
        """Rows by a SQL predicate, of every scope: olav.memory's own passes (gc, capacity,
        imports). Clients read with :meth:`rows` (tests/test_store_reads.py keeps them to it)."""
        total = self.size()
        if total == 0:
            return []
        q = self._table.search().select(self.columns(with_vector))
        if where:
            q = q.where(where)
        rows = q.limit(limit or total).to_list()
        return [MemoryRecord.from_row(r) for r in rows]

    def column_values(self, columns: list[str], where: str | None = None) -> pa.Table:
        """Columns by a SQL predicate, of every scope (olav.memory's own; see list_rows)."""
        total = self.size()
        q = self._table.search().select(columns)
        if where:
            q = q.where(where)
        return q.limit(max(total, 1)).to_arrow()

    def stats(self, reader: Reader) -> dict[str, Any]:
        """Rows per category and per scope; the scopes ``reader`` may not read are not
        named, their rows counted together as ``OTHERS_PRIVATE``."""
        cols = self.column_values(["category", "scope"]).to_pylist()
        by_cat: dict[str, int] = {}
        by_scope: dict[str, int] = {}
        for row in cols:
            by_cat[row["category"]] = by_cat.get(row["category"], 0) + 1
            by_scope[row["scope"]] = by_scope.get(row["scope"], 0) + 1
        return {
            "rows": len(cols),
            "embedder": self.embedder.name,
            "dim": self.embedder.dim,
            "by_category": dict(sorted(by_cat.items())),
            "by_scope": _named(by_scope, reader),
            "indexes": self.index_state(),
            "version": self._table.version,
        }

    # -- re-embedding ------------------------------------------------------------------------

    def backups(self) -> list[str]:
        return sorted(t for t in self._tables() if t.startswith(BACKUP_PREFIX))


OTHERS_PRIVATE = "(other operators, private)"


def _named(by_scope: dict[str, int], reader: Reader) -> dict[str, int]:
    named = {k: n for k, n in sorted(by_scope.items()) if reader.allows(k)}
    hidden = sum(n for k, n in by_scope.items() if not reader.allows(k))
    return {**named, OTHERS_PRIVATE: hidden} if hidden else named
