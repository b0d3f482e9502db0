"""Search over the memory table: the rankings and where they come from.

A hybrid search runs a vector and a full-text ranking over each memory's text, the same two
over context windows and over a named period, and fuses them (olav.memory.store.hits). When the
in-process snapshot holds the table's current version (olav.memory.store.vcache), every ranking is
computed from it in numpy; otherwise LanceDB answers, its queries run concurrently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from olav.core.errors import MemoryStoreError
from olav.memory.store.connection import VECTOR_COLUMNS
from olav.memory.store.embedders import Embedder
from olav.memory.store.filters import SearchFilter, require_reader, visible_scopes
from olav.memory.store.ftscache import analyzer
from olav.memory.store.hits import Hit, fuse
from olav.memory.store.maintenance import probe
from olav.memory.store.ranking import Ranking, TableRows
from olav.memory.store.schema import now
from olav.memory.store.sql import filter_where
from olav.memory.store.timeq import Period, query_period
from olav.memory.store.vcache import CachedQuery, VectorCache
from olav.memory.store.writes import RemoteGuards

SEARCH_MODES = ("vector", "fts", "hybrid")

_WORD = re.compile(r"\w", re.UNICODE)

_POOL: Any = None

# a lean ranking (_SearchCall.lean) asks for this many times the rows it keeps
LEAN_FACTOR = 2


def _pool() -> Any:
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="olav-search")
    return _POOL


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """A store's ranking settings: ``rrf_k``, the reciprocal-rank fusion constant, and
    ``ann_threshold``, the row count from which the vector column gets an ANN index."""

    rrf_k: int = 20
    ann_threshold: int = 10000

    @classmethod
    def of(cls, config: Any) -> SearchTuning:
        """The workspace's settings (``memory.rrf_k``, ``memory.ann_threshold``)."""
        return cls(config["memory.rrf_k"], config["memory.ann_threshold"])


class SearchedTable(Protocol):
    """What the searcher reads of its store: the table (opened on first use), whether it is
    open yet, whether it is remote, its columns, the vector snapshot, the embedder, the
    fusion constant."""

    embedder: Embedder
    rrf_k: int
    vcache: VectorCache
    path: Path

    @property
    def table(self) -> Any: ...

    @property
    def opened(self) -> bool: ...

    @property
    def remote(self) -> RemoteGuards | None: ...

    def columns(self, with_vector: bool) -> list[str]: ...


class Searcher:
    """A store's search, a part of :class:`~olav.memory.store.table.MemoryStore`: the
    rankings over its table or its snapshot, and what it keeps between searches (whether
    the table has context windows, per table version)."""

    def __init__(self, store: SearchedTable) -> None:
        self.store = store
        self._context_rows: tuple[int, bool] | None = None  # (table version, any context?)

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
        """Search live rows. Returns hits with distance, FTS score and fused score.

        ``hybrid`` fuses with reciprocal-rank fusion: a vector and a full-text ranking over
        each memory's text; the same two over its context window when the table holds
        sequential memories (a memory without a context counts its own text there); and,
        when the query names a period ("in May 2023", "last week", "上周") or
        ``filter.period`` is given, a vector and a full-text ranking restricted to memories
        whose ``event_at`` falls in it. ``vector`` and ``fts`` rank by the text alone.
        ``filter`` (olav.memory.store.filters.SearchFilter) says which rows may be ranked.
        """
        if mode not in SEARCH_MODES:
            raise MemoryStoreError(
                f"unknown search mode {mode!r}", hint="Use one of: " + ", ".join(SEARCH_MODES)
            )
        require_reader(filter, "search")
        store = self.store
        period = filter.period
        pred = filter_where(filter)
        n = candidates or (k if mode != "hybrid" else max(3 * k, 30))
        wants_vector = mode in ("vector", "hybrid")
        do_fts = mode in ("fts", "hybrid") and bool(_WORD.search(query))
        hybrid = mode == "hybrid"
        # rankings from the in-process snapshot when it is current (olav.memory.store.vcache)
        snap = self._current_snapshot() if not filter.table_only else None
        with_context = hybrid and (snap.has_context if snap else self._has_context())
        if hybrid and period is None and filter.time_aware:
            period = query_period(query)
        scopes, reader = visible_scopes(filter)
        cq = CachedQuery(scopes, filter.categories, filter.include_invalid, now(), reader=reader)
        # a local table's rankings carry ids only; the kept rows are read once, by row id
        lean = snap is None and store.remote is None
        rows = TableRows(store.table, store.columns(False)) if lean else None
        call = _SearchCall(
            store, query, pred, n, wants_vector, snap, period, query_vector, cq, rows, with_context
        )
        text_jobs, vector_jobs = _jobs(do_fts, wants_vector, with_context, hybrid, period)
        results = call.rankings(text_jobs, vector_jobs)
        jobs = text_jobs + vector_jobs
        rankings = {name: rows for (name, _c, _e), rows in zip(jobs, results, strict=True)}
        return fuse(rankings, k, call.qv, rrf_k=store.rrf_k, with_context=with_context)

    def _current_snapshot(self) -> Any:
        """The in-process snapshot when it holds the table's current version. On a local
        table that version is read from the manifests (a write by any process adds one),
        so a current snapshot answers without a LanceDB call."""
        store = self.store
        snap = store.vcache.snapshot
        if snap is not None and store.remote is None:
            # a local table's newest version is the newest manifest name: one directory
            # listing, where asking LanceDB costs a round trip through its event loop
            from olav.memory.store.snapfile import latest_version

            if latest_version(store.path) == snap.version:
                return store.vcache.served_current(snap)
        return store.vcache.view(store.table)

    def persist_snapshot(self) -> bool:
        """Keep the current version's snapshot next to a local table for the next cold
        command (olav.memory.store.snapfile); False when there is none to keep (remote, too big)."""
        store = self.store
        if store.remote is not None:
            return False
        from olav.memory.store import snapfile

        if not store.opened and store.vcache.snapshot is not None:
            return True  # answered from the snapshot on disk, which is current
        snap = store.vcache.refresh(store.table)
        if snap is None:
            return False
        if snapfile.saved_version(store.path) != snap.version:
            snapfile.save(store.path, snap, store.embedder.name, store.embedder.dim)
        return True

    def _has_context(self) -> bool:
        """Whether any row has a context window (cached per table version)."""
        table = self.store.table
        version = table.version
        if self._context_rows is None or self._context_rows[0] != version:
            self._context_rows = (version, table.count_rows("context IS NOT NULL") > 0)
        return self._context_rows[1]


# (ranking name, column, extra filter)
_Job = tuple[str, str, str | None]


def _jobs(
    do_fts: bool, wants_vector: bool, with_context: bool, hybrid: bool, period: Period | None
) -> tuple[list[_Job], list[_Job]]:
    """The full-text and the vector rankings a search makes. Full-text rankings run first:
    they start while the query is being embedded."""
    text_jobs: list[_Job] = []
    vector_jobs: list[_Job] = []
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
    return text_jobs, vector_jobs


@dataclass(slots=True)
class _SearchCall:
    """One search in progress: what its rankings share. ``qv`` is the query vector, embedded
    once a vector ranking needs it."""

    store: SearchedTable
    query: str
    pred: str | None
    n: int
    wants_vector: bool
    snap: Any
    period: Period | None
    qv: np.ndarray | None
    cq: CachedQuery
    rows: TableRows | None  # the lean rankings' shared row source (a local table)
    with_context: bool

    def cached(self, extra: str | None) -> CachedQuery:
        period = self.period
        timed = period is not None and extra == period.sql("event_at")
        self.store.vcache.served += 1
        return replace(self.cq, period=period if timed else None)

    def run(self, column: str, extra: str | None) -> Ranking:
        """One ranking: vector search over ``column`` or FTS over it, pre-filtered."""
        full = " AND ".join(f"({p})" for p in (self.pred, extra) if p) or None
        store, qv = self.store, self.qv
        if column in VECTOR_COLUMNS and self.snap is not None and qv is not None:
            return self.snap.rank(column, qv, self.n, self.cached(extra))
        if self.rows is not None:
            return self.lean(column, full)
        if column in VECTOR_COLUMNS:
            q = store.table.search(qv, vector_column_name=column).select(
                [*store.columns(False), "vector", "_distance"]
            )
            q = probe(q)
        else:
            # the vector comes along so that hits from here get a distance
            cols = store.columns(False) + (["vector"] if self.wants_vector else [])
            q = store.table.search(self.query, query_type="fts", fts_columns=column).select(
                [*cols, "_score"]
            )
        if full:
            q = q.where(full, prefilter=True)
        return Ranking.from_arrow(q.limit(self.n).to_arrow())

    def lean(self, column: str, full: str | None) -> Ranking:
        """One ranking of ids, from a local table. The filter is not a pre-filter: LanceDB
        evaluates it over the whole table first, 6 to 8 ms at 100k rows, for each ranking.
        Instead the nearest ``LEAN_FACTOR * n`` rows come back with whether each passes
        it, and the first ``n`` that pass are the ranking. Only when fewer pass, among as
        many rows as were asked for, is the ranking made again under the pre-filter."""
        assert self.rows is not None
        score = "_distance" if column in VECTOR_COLUMNS else "_score"
        # whether the row has a context window matters only when the search ranks them
        noctx = "context IS NULL" if self.with_context else "false"
        select = {"id": "id", "noctx": noctx, score: score}
        limit = LEAN_FACTOR * self.n
        found = self._query(column).select({**select, "ok": full or "true"}).with_row_id(True)
        result = found.limit(limit).to_arrow()
        passed = sum(1 for ok in result.column("ok").to_pylist() if ok)
        if full and passed < self.n and result.num_rows == limit:
            exact = self._query(column).select(select).with_row_id(True)
            result = exact.where(full, prefilter=True).limit(self.n).to_arrow()
        return Ranking.from_lean(result, self.rows, self.n, self.wants_vector)

    def _query(self, column: str) -> Any:
        table = self.store.table
        if column in VECTOR_COLUMNS:
            return probe(table.search(self.qv, vector_column_name=column))
        return table.search(self.query, query_type="fts", fts_columns=column)

    def embed(self) -> None:
        if self.qv is None:
            self.qv = self.store.embedder.embed_query(self.query)

    def rankings(self, text_jobs: list[_Job], vector_jobs: list[_Job]) -> list[Ranking]:
        """Every ranking, in the order of ``text_jobs + vector_jobs``."""
        snap, run = self.snap, self.run
        if snap is not None:  # numpy throughout: one thread, no LanceDB query
            tokens = analyzer().query(self.query) if text_jobs else []
            results = [
                snap.rank_text(col, tokens, self.n, self.cached(extra), self.wants_vector)
                for _name, col, extra in text_jobs
            ]
            if vector_jobs:
                self.embed()
            return results + [run(col, extra) for _name, col, extra in vector_jobs]
        jobs = text_jobs + vector_jobs
        if len(jobs) == 1 and (self.qv is not None or not vector_jobs):
            return [run(jobs[0][1], jobs[0][2])]
        # concurrently: LanceDB releases the GIL
        futures = [_pool().submit(run, col, extra) for _name, col, extra in text_jobs]
        if vector_jobs:
            self.embed()
        futures += [_pool().submit(run, col, extra) for _name, col, extra in vector_jobs[1:]]
        own = [run(vector_jobs[0][1], vector_jobs[0][2])] if vector_jobs else []
        done = [f.result() for f in futures]
        return done[: len(text_jobs)] + own + done[len(text_jobs) :]
