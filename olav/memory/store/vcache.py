"""An in-process copy of a small memory table, for the rankings of a search.

LanceDB answers every query with a fixed cost of 4-10 ms, whatever the table size; numpy
ranks 20k vectors in about 1 ms on one thread. So up to :data:`MAX_ROWS` rows, the store
keeps a snapshot of the table (rows, vectors, the full-text postings of ``text`` and
``context``, and the columns its pre-filters read) and ranks in numpy, with the same filters
LanceDB would apply: scope, category, expiry, invalidation, the context window and the period
a request names. The full-text ranking is LanceDB's BM25 over LanceDB's own tokens
(olav.memory.store.ftscache).

A snapshot belongs to one table version. Every write, from this process or any other, makes
a new version, and a search that finds the table at another version is answered by LanceDB
while a fresh snapshot loads in the background (from the second search on, so a one-shot
command never pays for a load it will not use). A chat session refreshes the snapshot on its
background writer after each run's writes, so the next request finds it current.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from olav.core.log import get_logger
from olav.memory.store.ftscache import Postings, analyzer, top_scored
from olav.memory.store.ranking import Ranking, take_rows, valid_mask
from olav.memory.store.timeq import Period

MAX_ROWS = 20000
VECTOR_COLUMNS = ("vector", "context_vector")
TEXT_COLUMNS = ("text", "context")
NEVER = np.iinfo(np.int64).max
log = get_logger("memory.vcache")


def _micros(column: pa.ChunkedArray, missing: int) -> np.ndarray:
    """A timestamp column as int64 microseconds (UTC); nulls become ``missing``."""
    stamps = np.asarray(column.to_numpy()).astype("datetime64[us]").view(np.int64)
    return np.where(valid_mask(column), stamps, missing).astype(np.int64)


def _as_micros(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000)


@dataclass
class _Vectors:
    matrix: np.ndarray  # rows x dim, float32 (zeros where the vector is null)
    valid: np.ndarray  # bool: the row has this vector
    sqnorm: np.ndarray  # squared norms, for exact squared-L2 distances


@dataclass
class Snapshot:
    """One table version in memory; immutable once built, so threads share it."""

    version: int
    rows: pa.Table  # what a LanceDB vector ranking returns, without _distance
    vectors: dict[str, _Vectors]
    scope: pa.ChunkedArray
    category: pa.ChunkedArray
    live_invalid: np.ndarray  # bool: invalidated_at is null
    expires: np.ndarray  # int64 us, NEVER when null
    event_at: np.ndarray  # int64 us
    has_context: bool
    context: np.ndarray  # bool: context is not null
    postings: dict[str, Postings]  # full text, by column
    tokens: dict[str, str]  # text -> its tokens, handed on to the next version
    _masks: dict[tuple[Any, ...], np.ndarray] = field(default_factory=dict, repr=False)
    _ids: np.ndarray | None = field(default=None, repr=False)  # object array, made on use
    _plain: pa.Table | None = field(default=None, repr=False)  # rows without vector, times
    # timestamp columns as (int64 us, not null, tzinfo): pyarrow's own datetime conversion
    # costs 3 us a value, most of building a recall's 40 rows
    _stamps: dict[str, tuple[np.ndarray, np.ndarray, Any]] = field(default_factory=dict)

    @classmethod
    def load(
        cls, table: Any, version: int, columns: Sequence[str], previous: Snapshot | None = None
    ) -> Snapshot:
        return cls.from_arrow(table.to_arrow(), version, columns, previous)

    @classmethod
    def from_arrow(
        cls,
        data: pa.Table,
        version: int,
        columns: Sequence[str],
        previous: Snapshot | None = None,
        postings: dict[str, Postings] | None = None,
    ) -> Snapshot:
        """The snapshot of ``data`` (the table's rows at ``version``); ``postings`` when
        they were kept (olav.memory.store.snapfile), else built here."""
        tokens: dict[str, str] = {}
        if postings is None:
            if previous is not None:  # rows that did not change keep their tokens
                tokens = {**previous.tokens}
            postings = {
                name: Postings.build(data.column(name), tokens, analyzer()) for name in TEXT_COLUMNS
            }
            live: set[str] = set()
            for name in TEXT_COLUMNS:
                live.update(t for t in data.column(name).to_pylist() if t is not None)
            tokens = {t: tokens[t] for t in live}
        vectors = {}
        for name in VECTOR_COLUMNS:
            arr = data.column(name).combine_chunks()
            dim = arr.type.list_size
            flat = arr.values.to_numpy(zero_copy_only=False)[: len(arr) * dim]
            matrix = np.nan_to_num(flat.reshape(len(arr), dim).astype(np.float32, copy=False))
            valid = valid_mask(arr)
            matrix[~valid] = 0.0
            vectors[name] = _Vectors(matrix, valid, np.einsum("ij,ij->i", matrix, matrix))
        context = valid_mask(data.column("context"))
        return cls(
            version=version,
            rows=data.select([*columns, "vector"]).combine_chunks(),
            vectors=vectors,
            scope=data.column("scope"),
            category=data.column("category"),
            live_invalid=~valid_mask(data.column("invalidated_at")),
            expires=_micros(data.column("expires_at"), NEVER),
            event_at=_micros(data.column("event_at"), 0),
            has_context=bool(context.any()),
            context=context,
            postings=postings,
            tokens=tokens,
        )

    def _member(self, name: str, values: Sequence[str] | None) -> np.ndarray | None:
        if values is None:
            return None
        key = (name, tuple(sorted(values)))
        mask = self._masks.get(key)
        if mask is None:
            col = self.scope if name == "scope" else self.category
            wanted = set(values)
            mask = np.fromiter((v in wanted for v in col.to_pylist()), bool, len(col))
            self._masks[key] = mask
        return mask

    def _readable(self, reader: Any) -> np.ndarray:
        key = ("reader", reader.user, reader.team)
        mask = self._masks.get(key)
        if mask is None:
            scopes = self.scope.to_pylist()
            mask = np.fromiter((reader.allows(v) for v in scopes), bool, len(scopes))
            self._masks[key] = mask
        return mask

    def _period(self, period: Period) -> np.ndarray:
        if period.months:
            key: tuple[Any, ...] = ("months", period.months)
            if key not in self._masks:
                months = (self.event_at.astype("datetime64[us]").astype("datetime64[M]")).astype(
                    np.int64
                ) % 12 + 1
                self._masks[key] = np.isin(months, period.months)
            return self._masks[key]
        assert period.start is not None and period.end is not None
        start, end = _as_micros(period.start), _as_micros(period.end)
        return (self.event_at >= start) & (self.event_at < end)

    def _mask(self, query: CachedQuery, valid: np.ndarray, column: str) -> np.ndarray:
        mask = valid.copy()
        for part in (
            self._member("scope", query.scopes),
            self._member("category", query.categories),
        ):
            if part is not None:
                mask &= part
        if not query.include_invalid:
            mask &= self.live_invalid
            mask &= self.expires > _as_micros(query.at)
        if query.reader is not None and not query.reader.everyone:
            mask &= self._readable(query.reader)
        if column in ("context_vector", "context"):
            mask &= self.context
        if query.period is not None:
            mask &= self._period(query.period)
        return mask

    def rank(self, column: str, qv: np.ndarray, n: int, query: CachedQuery) -> Ranking:
        """The ``n`` nearest live rows by ``column`` and their distances, as LanceDB's
        vector search ranks them; hits from here carry the text vector."""
        vec = self.vectors[column]
        mask = self._mask(query, vec.valid, column)
        q = np.asarray(qv, dtype=np.float32)
        dist = vec.sqnorm - 2.0 * (vec.matrix @ q) + float(q @ q)
        dist[~mask] = np.inf
        live = int(mask.sum())
        k = min(n, live)
        if k == 0:
            top = np.zeros(0, dtype=np.int64)
        else:
            part = np.argpartition(dist, k - 1)[:k] if k < len(dist) else np.arange(len(dist))
            top = part[np.argsort(dist[part], kind="stable")]
        return self._ranking(top, dist, with_vector=True)

    def rank_text(
        self, column: str, tokens: Sequence[str], n: int, query: CachedQuery, with_vector: bool
    ) -> Ranking:
        """The ``n`` best full-text matches in ``column`` and their BM25 scores, as LanceDB's
        FTS ranks them; hits from here carry the text vector when ``with_vector``."""
        scores = self.postings[column].scores(tokens, self.rows.num_rows)
        valid = np.ones(self.rows.num_rows, dtype=bool)
        top = top_scored(scores, self._mask(query, valid, column), n)
        return self._ranking(top, scores, with_vector=with_vector)

    def _ranking(self, top: np.ndarray, values: np.ndarray, *, with_vector: bool) -> Ranking:
        if self._ids is None:  # once per version; ids of the top rows are then a lookup
            self._ids = np.array(self.rows.column("id").to_pylist(), dtype=object)
        return Ranking(
            ids=self._ids[top].tolist(),
            values=values[top].astype(np.float32).tolist(),
            positions=top.tolist(),
            no_context=(~self.context[top]).tolist(),
            source=self,
            with_vector=with_vector,
        )

    def records(
        self, positions: list[int], with_vector: bool
    ) -> tuple[list[dict[str, Any]], list[np.ndarray | None]]:
        """The rows at ``positions`` (olav.memory.store.ranking.RowSource)."""
        if self._plain is None:
            self._prepare_records()
        assert self._plain is not None
        rows = take_rows(self._plain, positions).to_pylist()
        for name, (micros, valid, tz) in self._stamps.items():
            epoch = datetime(1970, 1, 1, tzinfo=tz)
            for row, pos in zip(rows, positions, strict=True):
                row[name] = epoch + timedelta(microseconds=int(micros[pos])) if valid[pos] else None
        if not with_vector:
            return rows, [None] * len(rows)
        vec = self.vectors["vector"]
        return rows, [vec.matrix[p].copy() if vec.valid[p] else None for p in positions]

    def _prepare_records(self) -> None:
        stamps = {}
        for f in self.rows.schema:
            if pa.types.is_timestamp(f.type):
                column = self.rows.column(f.name)
                # the tzinfo object pyarrow itself gives this column's values
                tz = pa.scalar(0, type=f.type).as_py().tzinfo
                stamps[f.name] = (_micros(column, 0), valid_mask(column), tz)
        self._stamps = stamps
        self._plain = self.rows.drop_columns(["vector", *stamps])


@dataclass
class CachedQuery:
    """The pre-filters of one search, in the form the snapshot evaluates them."""

    scopes: Sequence[str] | None
    categories: Sequence[str] | None
    include_invalid: bool
    at: datetime
    period: Period | None = None
    reader: Any = None  # olav.memory.store.scopes.Reader: the scopes this operator may read


class VectorCache:
    """The snapshot of one table for one MemoryStore (see the module docstring)."""

    def __init__(self, columns: Sequence[str], max_rows: int = MAX_ROWS) -> None:
        self.columns = list(columns)
        self.max_rows = max_rows
        self.snapshot: Snapshot | None = None
        self.served = 0  # rankings answered from the snapshot (tests, benchmarks)
        self._seen = 0
        self._loading: threading.Thread | None = None
        self._lock = threading.Lock()

    def view(self, table: Any) -> Snapshot | None:
        """The snapshot when it holds the table's current version; otherwise None, and a
        fresh one starts loading in the background (from the second search on)."""
        version = table.version
        self._seen += 1
        snap = self.snapshot
        if snap is not None and snap.version == version:
            return snap
        if self._seen > 1:
            self._load_in_background(table)
        return None

    def served_current(self, snap: Snapshot) -> Snapshot:
        """``snap``, which the caller found current without asking the table (a local
        table's manifests); counted as a search, as :meth:`view` counts them."""
        self._seen += 1
        return snap

    def refresh(self, table: Any) -> Snapshot | None:
        """Load the current version now (unless it is loaded, or the table is too big)."""
        version = table.version
        snap = self.snapshot
        if snap is not None and snap.version == version:
            return snap
        if table.count_rows() > self.max_rows:
            self.snapshot = None
            return None
        fresh = Snapshot.load(table, version, self.columns, snap)
        with self._lock:
            if self.snapshot is None or self.snapshot.version < fresh.version:
                self.snapshot = fresh
        return fresh

    def _load_in_background(self, table: Any) -> None:
        with self._lock:
            if self._loading is not None and self._loading.is_alive():
                return

            def work() -> None:
                try:
                    self.refresh(table)
                except Exception as exc:  # LanceDB keeps answering; try again next time
                    log.warning("vector cache load failed: %s: %s", type(exc).__name__, exc)

            self._loading = threading.Thread(target=work, name="olav-vcache", daemon=True)
            self._loading.start()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background load (tests, benchmarks)."""
        loading = self._loading
        if loading is not None:
            loading.join(timeout)
