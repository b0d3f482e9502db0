"""MemoryStore: the library API over the one LanceDB ``memory`` table.

Writers are serialised across processes with a file lock next to the database, because two
processes running ``merge_insert`` on the same ids leave duplicates; a table on object storage
(``memory.uri``) uses leases in the bucket instead (olav.memory.writes). Readers open the table with
a zero read-consistency interval, so they see other processes' writes. Scope, category, expiry
and invalidation are always LanceDB pre-filters, never post-filters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from olav.core.errors import MemoryStoreError, NotFoundError
from olav.core.log import quiet_native_libraries
from olav.memory.connection import (
    BACKUP_PREFIX,
    VECTOR_COLUMNS,
    connect,
    ensure_fts,
    ensure_scalar,
    lock_path,
    open_or_create,
    recover_swap,
    table_names,
)
from olav.memory.connection import REEMBED_TABLE as REEMBED_TABLE
from olav.memory.connection import drop_backup as drop_backup
from olav.memory.connection import reembed as reembed
from olav.memory.embedders import Embedder
from olav.memory.ftscache import analyzer
from olav.memory.fusion import rrf
from olav.memory.remote import MemoryLocation, location, memory_location, remote_errors
from olav.memory.schema import (
    CATEGORIES,
    ORIGINS,
    TABLE,
    MemoryRecord,
    build_schema,
    now,
)
from olav.memory.scopes import Reader
from olav.memory.textvectors import embed_missing
from olav.memory.timeq import Period, query_period
from olav.memory.vcache import CachedQuery, VectorCache, take_rows, valid_mask
from olav.memory.writes import RemoteGuards, file_guard, retry_conflicts

SEARCH_MODES = ("vector", "fts", "hybrid")


_WORD = re.compile(r"\w", re.UNICODE)
# more data fragments than this (each append or bump writes one) slows every search down;
# maintain() compacts them
MAX_FRAGMENTS = 8
# With an ANN index, compaction cannot merge fragments indexed in different index segments,
# so each optimize() leaves one more fragment behind; rebuilding the vector index puts every
# row in one segment again. maintain() does that by itself below this many rows (seconds);
# above it, `olav memory gc` (and the gc cron job) does.
REBUILD_ROWS = 20000


def sql_str(value: str) -> str:
    """A SQL string literal with quotes escaped."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    vals = list(values)
    if not vals:
        return "false"
    return f"{column} IN ({', '.join(sql_str(v) for v in vals)})"


def sql_ts(when: datetime) -> str:
    return f"CAST('{when.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}' AS TIMESTAMP)"


def live_filter(
    *,
    scopes: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    at: datetime | None = None,
    include_invalid: bool = False,
    extra: str | None = None,
) -> str | None:
    """The pre-filter predicate for rows that may be recalled."""
    parts = []
    if scopes is not None:
        parts.append(sql_in("scope", scopes))
    if categories is not None:
        parts.append(sql_in("category", categories))
    if not include_invalid:
        parts.append("invalidated_at IS NULL")
        parts.append(f"(expires_at IS NULL OR expires_at > {sql_ts(at or now())})")
    if extra:
        parts.append(f"({extra})")
    return " AND ".join(parts) if parts else None


@dataclass
class Hit:
    """A search result: the row plus how it ranked."""

    record: MemoryRecord
    score: float
    distance: float | None = None
    fts_score: float | None = None
    vector_rank: int | None = None
    fts_rank: int | None = None
    # position in every ranking that found it: vector, fts, context_vector, context_fts,
    # time_vector, time_fts (see MemoryStore.search)
    ranks: dict[str, int] = field(default_factory=dict)
    # the memory's own embedding, when the search computed vectors (the relevance decision
    # compares it with the background requests)
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        rec = self.record.to_json()
        for col in VECTOR_COLUMNS:
            rec.pop(col, None)
        return {
            **rec,
            "score": self.score,
            "distance": self.distance,
            "fts_score": self.fts_score,
            "vector_rank": self.vector_rank,
            "fts_rank": self.fts_rank,
            "ranks": self.ranks,
        }


@dataclass
class UpsertResult:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)


_POOL: Any = None


def _pool() -> Any:
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="olav-search")
    return _POOL


class MemoryStore:
    """Open (or create) the memory table at ``path`` for ``embedder``."""

    def __init__(
        self,
        path: Path | MemoryLocation,
        embedder: Embedder,
        *,
        rrf_k: int = 20,
        ann_threshold: int = 10000,
        lock_timeout: float = 120.0,
        allow_destructive: bool = False,
        cold: bool = False,
    ) -> None:
        """``cold``: a read-only command; when the snapshot on disk holds the table's latest
        version (olav.memory.snapfile), the table is opened only if something needs it."""
        quiet_native_libraries()
        self.location = location(path)
        self.path = self.location.path  # the folder, for a local table
        self.embedder = embedder
        self.rrf_k = rrf_k
        self.ann_threshold = ann_threshold
        self._remote = RemoteGuards(self.location, lock_timeout) if self.location.remote else None
        if self._remote is None:
            self.path.mkdir(parents=True, exist_ok=True)
        self._lock: Any = None  # the writers' file lock (a local table), made on first use
        self._lock_timeout = lock_timeout
        self.schema = build_schema(embedder.dim, embedder.name)
        self._context_rows: tuple[int, bool] | None = None  # (table version, any context?)
        self._fragment_floor = 0  # fragments the last maintain() left behind, if stuck
        self.vcache = VectorCache(self._columns(False))
        self._tbl: Any = None
        self._allow_destructive = allow_destructive
        if cold and self._remote is None and not allow_destructive:
            from olav.memory import snapfile

            snap = snapfile.load(self.path, embedder.name, embedder.dim, self._columns(False))
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
        from olav.memory.embedders import make_embedder

        return cls(
            memory_location(ws),
            embedder or make_embedder(ws.config),
            rrf_k=ws.config["memory.rrf_k"],
            ann_threshold=ws.config["memory.ann_threshold"],
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
        return self._table

    # -- writes ------------------------------------------------------------------------------

    def _validate(self, rec: MemoryRecord) -> None:
        if not rec.id:
            raise MemoryStoreError("a memory record needs a non-empty id")
        if rec.category not in CATEGORIES:
            raise MemoryStoreError(
                f"unknown category {rec.category!r} for memory {rec.id}",
                hint="Use one of: " + ", ".join(CATEGORIES),
            )
        if rec.origin not in ORIGINS:
            raise MemoryStoreError(
                f"unknown origin {rec.origin!r} for memory {rec.id}",
                hint="Use one of: " + ", ".join(ORIGINS),
            )
        if not rec.scope or not rec.scope.strip() or rec.scope != rec.scope.strip():
            raise MemoryStoreError(
                f"memory {rec.id} needs a scope, got {rec.scope!r}",
                hint="Use global, an agent name or team:<id>, without spaces around it",
            )
        if not 0.0 <= rec.confidence <= 1.0:
            raise MemoryStoreError(f"confidence of memory {rec.id} must be within 0.0 and 1.0")
        for vec in (rec.vector, rec.context_vector):
            if vec is not None and not math.isfinite(sum(vec)):
                # checked here because writes turn bad vectors into nulls (see upsert)
                raise MemoryStoreError(f"memory {rec.id} has a vector with NaN or infinity")
            if vec is not None and len(vec) != self.embedder.dim:
                raise MemoryStoreError(
                    f"memory {rec.id} has a {len(vec)}-d vector; the table is "
                    f"{self.embedder.dim}-d ({self.embedder.name})",
                    hint="Re-embed it (omit the vector) or import into a workspace with the "
                    "same embedder",
                )

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
        rec = self.get(memory_id, with_vector=True)
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

    def _columns(self, with_vector: bool) -> list[str]:
        return [f.name for f in self.schema if with_vector or f.name not in VECTOR_COLUMNS]

    def _fetch_ids(self, ids: list[str], with_vector: bool = False) -> list[MemoryRecord]:
        out: list[MemoryRecord] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows = (
                self._table.search()
                .where(sql_in("id", chunk))
                .select(self._columns(with_vector))
                .limit(len(chunk) * 4 + 10)
                .to_list()
            )
            out.extend(MemoryRecord.from_row(r) for r in rows)
        return out

    def get(self, memory_id: str, *, with_vector: bool = False) -> MemoryRecord | None:
        found = self._fetch_ids([memory_id], with_vector)
        return found[0] if found else None

    def count(self, where: str | None = None) -> int:
        return int(self._table.count_rows(where) if where else self._table.count_rows())

    def list_rows(
        self, where: str | None = None, *, limit: int | None = None, with_vector: bool = False
    ) -> list[MemoryRecord]:
        total = self.count()
        if total == 0:
            return []
        q = self._table.search().select(self._columns(with_vector))
        if where:
            q = q.where(where)
        rows = q.limit(limit or total).to_list()
        return [MemoryRecord.from_row(r) for r in rows]

    def column_values(self, columns: list[str], where: str | None = None) -> pa.Table:
        total = self.count()
        q = self._table.search().select(columns)
        if where:
            q = q.where(where)
        return q.limit(max(total, 1)).to_arrow()

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        scopes: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        k: int = 10,
        include_invalid: bool = False,
        where: str | None = None,
        candidates: int | None = None,
        query_vector: np.ndarray | None = None,
        period: Period | None = None,
        time_aware: bool = True,
        reader: Reader | None = None,
    ) -> list[Hit]:
        """Search live rows. Returns hits with distance, FTS score and fused score.

        ``hybrid`` fuses with reciprocal-rank fusion: a vector and a full-text ranking over
        each memory's text; the same two over its context window when the table holds
        sequential memories (a memory without a context counts its own text there); and,
        when the query names a period ("in May 2023", "last week", "上周") or ``period`` is
        given, a vector and a full-text ranking restricted to memories whose ``event_at``
        falls in it. ``vector`` and ``fts`` rank by the text alone. ``reader`` hides the rows
        that operator may not read (another operator's private rows); unlike ``where``, it
        keeps the search on the in-process snapshot.
        """
        if mode not in SEARCH_MODES:
            raise MemoryStoreError(
                f"unknown search mode {mode!r}", hint="Use one of: " + ", ".join(SEARCH_MODES)
            )
        extra = " AND ".join(f"({p})" for p in (where, reader and reader.where()) if p) or None
        pred = live_filter(
            scopes=scopes, categories=categories, include_invalid=include_invalid, extra=extra
        )
        n = candidates or (k if mode != "hybrid" else max(3 * k, 30))
        wants_vector = mode in ("vector", "hybrid")
        do_fts = mode in ("fts", "hybrid") and bool(_WORD.search(query))
        hybrid = mode == "hybrid"
        # rankings from the in-process snapshot when it is current (olav.memory.vcache)
        snap = self._current_snapshot() if where is None else None
        with_context = hybrid and (snap.has_context if snap else self._has_context())
        if hybrid and period is None and time_aware:
            period = query_period(query)
        qv: np.ndarray | None = query_vector
        cq = CachedQuery(scopes, categories, include_invalid, now(), reader=reader)

        def cached(extra: str | None) -> CachedQuery:
            timed = period is not None and extra == period.sql("event_at")
            self.vcache.served += 1
            return replace(cq, period=period if timed else None)

        def run(column: str, extra: str | None) -> pa.Table:
            """One ranking: vector search over ``column`` or FTS over it, pre-filtered."""
            full = " AND ".join(f"({p})" for p in (pred, extra) if p) or None
            if column in VECTOR_COLUMNS and snap is not None and qv is not None:
                return snap.rank(column, qv, n, cached(extra))
            if column in VECTOR_COLUMNS:
                q = self._table.search(qv, vector_column_name=column).select(
                    [*self._columns(False), "vector", "_distance"]
                )
            else:
                # the vector comes along so that hits from here get a distance
                cols = self._columns(False) + (["vector"] if wants_vector else [])
                q = self._table.search(query, query_type="fts", fts_columns=column).select(
                    [*cols, "_score"]
                )
            if full:
                q = q.where(full, prefilter=True)
            return q.limit(n).to_arrow()

        # (ranking name, column, extra filter); full-text rankings first: they start while
        # the query is being embedded
        text_jobs: list[tuple[str, str, str | None]] = []
        vector_jobs: list[tuple[str, str, str | None]] = []
        if do_fts:
            text_jobs.append(("fts", "text", None))
            if with_context:
                text_jobs.append(("context_fts", "context", None))
            if period is not None:
                text_jobs.append(("time_fts", "text", period.sql("event_at")))
        if wants_vector:
            vector_jobs.append(("vector", "vector", None))
            if with_context:
                vector_jobs.append(("context_vector", "context_vector", "context IS NOT NULL"))
            if hybrid and period is not None:
                vector_jobs.append(("time_vector", "vector", period.sql("event_at")))
        jobs = text_jobs + vector_jobs
        if snap is not None:  # numpy throughout: one thread, no LanceDB query
            tokens = analyzer().query(query) if text_jobs else []
            results = [
                snap.rank_text(col, tokens, n, cached(extra), wants_vector)
                for _name, col, extra in text_jobs
            ]
            if vector_jobs and qv is None:
                qv = self.embedder.embed_query(query)
            results += [run(col, extra) for _name, col, extra in vector_jobs]
        elif len(jobs) == 1 and (qv is not None or not vector_jobs):
            results = [run(jobs[0][1], jobs[0][2])]
        else:  # concurrently: LanceDB releases the GIL
            futures = [_pool().submit(run, col, extra) for _name, col, extra in text_jobs]
            if vector_jobs and qv is None:
                qv = self.embedder.embed_query(query)
            futures += [_pool().submit(run, col, extra) for _name, col, extra in vector_jobs[1:]]
            own = [run(vector_jobs[0][1], vector_jobs[0][2])] if vector_jobs else []
            done = [f.result() for f in futures]
            results = done[: len(text_jobs)] + own + done[len(text_jobs) :]
        rankings = {name: rows for (name, _c, _e), rows in zip(jobs, results, strict=True)}
        return self._fuse(rankings, k, qv, with_context)

    def _current_snapshot(self) -> Any:
        """The in-process snapshot when it holds the table's current version. On a local
        table that version is read from the manifests (a write by any process adds one),
        so a current snapshot answers without a LanceDB call."""
        snap = self.vcache.snapshot
        if snap is not None and self._remote is None:
            # a local table's newest version is the newest manifest name: one directory
            # listing, where asking LanceDB costs a round trip through its event loop
            from olav.memory.snapfile import latest_version

            if latest_version(self.path) == snap.version:
                return self.vcache.served_current(snap)
        return self.vcache.view(self._table)

    def persist_snapshot(self) -> bool:
        """Keep the current version's snapshot next to a local table for the next cold
        command (olav.memory.snapfile); False when there is none to keep (remote, too big)."""
        if self._remote is not None:
            return False
        from olav.memory import snapfile

        if self._tbl is None and self.vcache.snapshot is not None:
            return True  # answered from the snapshot on disk, which is current
        snap = self.vcache.refresh(self._table)
        if snap is None:
            return False
        if snapfile.saved_version(self.path) != snap.version:
            snapfile.save(self.path, snap, self.embedder.name, self.embedder.dim)
        return True

    def _has_context(self) -> bool:
        """Whether any row has a context window (cached per table version)."""
        version = self._table.version
        if self._context_rows is None or self._context_rows[0] != version:
            self._context_rows = (version, self._table.count_rows("context IS NOT NULL") > 0)
        return self._context_rows[1]

    def _fuse(
        self,
        rankings: dict[str, pa.Table],
        k: int,
        qv: np.ndarray | None,
        with_context: bool,
    ) -> list[Hit]:
        """RRF over the rankings; only the top k rows become records (the hot path)."""
        ids: dict[str, list[str]] = {}
        first: dict[str, tuple[str, int]] = {}  # id -> (ranking, row) where it was first seen
        distance: dict[str, float] = {}
        fts_score: dict[str, float] = {}
        no_context: set[str] = set()
        for name, tbl in rankings.items():
            ids[name] = found_ids = tbl.column("id").to_pylist()
            if name == "vector":
                distance = dict(zip(found_ids, tbl.column("_distance").to_pylist(), strict=True))
            elif name == "fts":
                fts_score = dict(zip(found_ids, tbl.column("_score").to_pylist(), strict=True))
            if with_context:
                nulls = (~valid_mask(tbl.column("context"))).tolist()
                no_context.update(i for i, null in zip(found_ids, nulls, strict=True) if null)
            for pos, rid in enumerate(found_ids):
                first.setdefault(rid, (name, pos))
        # a memory without a context window: its text stands in for its context
        fused = rrf(ids, k=self.rrf_k, stand_ins=no_context, stand_in_rankings=("vector", "fts"))
        top = fused.order[:k]
        by_ranking: dict[str, list[int]] = {}
        for rid in top:
            name, pos = first[rid]
            by_ranking.setdefault(name, []).append(pos)
        rows: dict[str, dict[str, Any]] = {}
        vectors: dict[str, np.ndarray | None] = {}
        for name, idx in by_ranking.items():
            part = take_rows(rankings[name], idx)
            found_vecs: list[np.ndarray | None] = [None] * part.num_rows
            if "vector" in part.column_names:  # as numpy: to_pylist of vectors is slow
                found_vecs = _vector_rows(part.column("vector"))
                part = part.drop_columns(["vector"])
            for found_row, found_vec in zip(part.to_pylist(), found_vecs, strict=True):
                rows[found_row["id"]] = found_row
                vectors[found_row["id"]] = found_vec
        hits = []
        for rid in top:
            row = rows[rid]
            vec = vectors[rid]
            row.pop("_distance", None)
            row.pop("_score", None)
            dist = distance.get(rid)
            if dist is None and vec is not None and qv is not None:
                diff = vec - qv
                dist = float(diff @ diff)
            found = fused.ranks[rid]
            hits.append(
                Hit(
                    MemoryRecord.from_row(row),
                    fused.scores[rid],
                    distance=None if dist is None else float(dist),
                    fts_score=fts_score.get(rid),
                    vector_rank=found.get("vector"),
                    fts_rank=found.get("fts"),
                    ranks=found,
                    vector=vec,
                )
            )
        return hits

    # -- maintenance -------------------------------------------------------------------------

    def index_state(self) -> dict[str, Any]:
        """The indexes by role: fts and context_fts (full text), vector and context_vector."""
        state: dict[str, Any] = dict.fromkeys(("fts", "vector", "context_fts", "context_vector"))
        roles = {"text": "fts", "context": "context_fts"}
        for idx in self._table.list_indices():
            stats = self._table.index_stats(idx.name)
            entry = {
                "name": idx.name,
                "type": str(idx.index_type),
                "indexed": getattr(stats, "num_indexed_rows", None),
                "unindexed": getattr(stats, "num_unindexed_rows", None),
            }
            column = idx.columns[0] if idx.columns else ""
            state[roles.get(column, column)] = entry
        return state

    def fragments(self) -> int:
        """Data fragments of the table (cheap: read from the manifest)."""
        stats = self._table.stats()
        frag = stats.get("fragment_stats") if isinstance(stats, dict) else None
        return int((frag or {}).get("num_fragments") or 0)

    def needs_maintenance(self) -> bool:
        """More fragments than MAX_FRAGMENTS, or MAX_FRAGMENTS more than the last maintain()
        could not compact away (a big table waiting for `olav memory gc`)."""
        return self.fragments() > self._fragment_floor + MAX_FRAGMENTS

    def maintain(self, *, force_optimize: bool = False, full: bool = False) -> dict[str, Any]:
        """Fold new rows into the indexes, compact fragments and build the ANN indexes past
        the threshold. When compaction is stuck behind the ANN index segments, rebuild the
        vector indexes (always with ``full``, otherwise only below REBUILD_ROWS rows)."""
        done: dict[str, Any] = {"optimized": False, "ann_built": False, "rebuilt": False}
        if self._remote is not None and not self._remote.maintaining():
            from olav.memory.remote import LeaseHeldError

            try:
                with self.maintenance_lock():
                    return self.maintain(force_optimize=force_optimize, full=full)
            except LeaseHeldError:  # another machine is maintaining the table right now
                return {**done, "skipped": "lease held"}
        with self.maintenance_lock():
            ensure_fts(self._table)
            ensure_scalar(self._table)
            state = self.index_state()
            unindexed = max(
                (state[role] or {}).get("unindexed") or 0 for role in ("fts", "context_fts")
            )
            fragmented = self.fragments() > MAX_FRAGMENTS
            if fragmented or (unindexed and (force_optimize or unindexed >= 256)):
                self._table.optimize()  # compacts fragments and folds new rows into indexes
                done["optimized"] = True
            from lancedb.index import IvfHnswSq

            if state["vector"] is None and self._table.count_rows() >= self.ann_threshold:
                self._table.create_index("vector", config=IvfHnswSq(distance_type="l2"))
                done["ann_built"] = True
            if (
                state["context_vector"] is None
                and self._table.count_rows("context IS NOT NULL") >= self.ann_threshold
            ):
                self._table.create_index("context_vector", config=IvfHnswSq(distance_type="l2"))
                done["ann_built"] = True
            stuck = self.fragments() > MAX_FRAGMENTS
            vector_indexes = [c for c in VECTOR_COLUMNS if state[c] is not None]
            if stuck and vector_indexes and (full or self._table.count_rows() < REBUILD_ROWS):
                for column in vector_indexes:
                    self._table.create_index(
                        column, config=IvfHnswSq(distance_type="l2"), replace=True
                    )
                self._table.optimize()
                done["rebuilt"] = True
            left = self.fragments()
            self._fragment_floor = left if left > MAX_FRAGMENTS else 0
        return done

    def stats(self) -> dict[str, Any]:
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
            "by_scope": dict(sorted(by_scope.items())),
            "indexes": self.index_state(),
            "version": self._table.version,
        }

    # -- re-embedding ------------------------------------------------------------------------

    def backups(self) -> list[str]:
        return sorted(t for t in self._tables() if t.startswith(BACKUP_PREFIX))


def _vector_rows(column: pa.ChunkedArray) -> list[np.ndarray | None]:
    """A fixed-size-list column as float32 rows (None where null)."""
    arr = column.combine_chunks()
    dim = arr.type.list_size
    start = arr.offset * dim
    flat = arr.values.to_numpy(zero_copy_only=False)[start : start + len(arr) * dim]
    matrix = np.asarray(flat, dtype=np.float32).reshape(len(arr), dim)
    valid = valid_mask(arr)
    return [matrix[i].copy() if ok else None for i, ok in enumerate(valid)]
