"""One ranking of a search, best first, and the rows behind it.

A ranking holds ids, their distances or scores, and row positions in a row source; rows are
built only for the hits that survive the fusion (olav.memory.store.hits). A LanceDB ranking's source
is the Arrow table LanceDB returned; a snapshot ranking's source is the snapshot itself
(olav.memory.store.vcache), so a search from the snapshot builds no table per ranking.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

# Nothing here calls pyarrow.compute: importing it costs 80-100 ms of a cold read-only
# command that answers from the snapshot on disk (olav.memory.store.snapfile).

# columns of a LanceDB result that are not the row's own
SCORE_COLUMNS = ("_distance", "_score")


def valid_mask(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Where ``column`` is not null, read from its validity bitmaps."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [np.zeros(0, dtype=bool)]
    for arr in chunks:
        n = len(arr)
        bitmap = arr.buffers()[0] if arr.null_count and arr.type != pa.null() else None
        if arr.null_count == 0:
            parts.append(np.ones(n, dtype=bool))
        elif bitmap is None:
            parts.append(np.zeros(n, dtype=bool))
        else:
            bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
            parts.append(bits[arr.offset : arr.offset + n].astype(bool))
    return np.concatenate(parts)


def take_rows(table: pa.Table, positions: Sequence[int] | np.ndarray) -> pa.Table:
    """The rows at ``positions``, in that order: ``Table.take`` once pyarrow.compute is
    loaded (a process that opened LanceDB has it), else one slice a row (5x slower for 40
    rows, 0.4 ms, against the 80-100 ms that importing pyarrow.compute costs)."""
    if "pyarrow.compute" in sys.modules:
        return table.take(pa.array([int(i) for i in positions], pa.int64()))
    if len(positions) == 0:
        return table.slice(0, 0)
    return pa.concat_tables([table.slice(int(i), 1) for i in positions])


def vector_rows(column: pa.ChunkedArray) -> list[np.ndarray | None]:
    """A fixed-size-list column as float32 rows (None where null)."""
    arr = column.combine_chunks()
    dim = arr.type.list_size
    start = arr.offset * dim
    flat = arr.values.to_numpy(zero_copy_only=False)[start : start + len(arr) * dim]
    matrix = np.asarray(flat, dtype=np.float32).reshape(len(arr), dim)
    valid = valid_mask(arr)
    return [matrix[i].copy() if ok else None for i, ok in enumerate(valid)]


class RowSource(Protocol):
    def records(
        self, positions: list[int], with_vector: bool
    ) -> tuple[Sequence[dict[str, Any] | None], list[np.ndarray | None]]:
        """The rows at ``positions`` (without vectors and scores) and their text vectors
        (None where the row has none, or ``with_vector`` is false). A row that is gone
        from the table since it was ranked is None."""
        ...


@dataclass(frozen=True)
class Ranking:
    """One ranking: ``ids[i]`` is row ``positions[i]`` of ``source``."""

    ids: list[str]
    values: list[float]  # its distance (vector rankings) or BM25 score (full text)
    positions: list[int]
    no_context: list[bool]  # the row has no context window
    source: RowSource
    with_vector: bool  # hits from here carry the row's text vector

    @classmethod
    def from_arrow(cls, table: pa.Table) -> Ranking:
        """A LanceDB result: the row's columns, maybe ``vector``, and a score column."""
        value = next((c for c in SCORE_COLUMNS if c in table.column_names), None)
        ids = table.column("id").to_pylist()
        no_context = (
            (~valid_mask(table.column("context"))).tolist()
            if "context" in table.column_names
            else [False] * len(ids)
        )
        return cls(
            ids=ids,
            values=table.column(value).to_pylist() if value else [0.0] * len(ids),
            positions=list(range(len(ids))),
            no_context=no_context,
            source=ArrowRows(table),
            with_vector="vector" in table.column_names,
        )

    @classmethod
    def from_lean(cls, table: pa.Table, source: TableRows, n: int, with_vector: bool) -> Ranking:
        """A lean LanceDB result (olav.memory.store.search): ``id``, ``noctx``, maybe ``ok`` (the
        row passes the search's filter), a score column and ``_rowid``. Keeps the first
        ``n`` rows that pass; their rows are read later, once, from ``source``."""
        value = next(c for c in SCORE_COLUMNS if c in table.column_names)
        if "ok" in table.column_names:
            take = [i for i, ok in enumerate(table.column("ok").to_pylist()) if ok][:n]
        else:
            take = list(range(min(n, table.num_rows)))
        every = [table.column(c).to_pylist() for c in ("id", value, "noctx", "_rowid")]
        ids, values, no_context, row_ids = ([col[i] for i in take] for col in every)
        source.expect(row_ids, ids)
        return cls(ids, values, row_ids, no_context, source, with_vector)


class TableRows:
    """The rows of a local LanceDB table, read by row id (``_rowid``) for the hits the
    fusion keeps: every lean ranking of one search shares one, so the rows are read once.
    A row id is the row's address in the version the ranking read; when a write from
    another process moved or removed a row since (compaction), the row is read by its id."""

    def __init__(self, table: Any, columns: list[str]) -> None:
        self.table = table
        self.columns = columns
        self.ids: dict[int, str] = {}

    def expect(self, row_ids: list[int], ids: list[str]) -> None:
        self.ids.update(zip(row_ids, ids, strict=True))

    def records(
        self, positions: list[int], with_vector: bool
    ) -> tuple[list[dict[str, Any] | None], list[np.ndarray | None]]:
        cols = self.columns + (["vector"] if with_vector else [])
        wanted = [self.ids[p] for p in positions]
        got: dict[str, tuple[dict[str, Any], np.ndarray | None]] = {}
        _read(self.table.take_row_ids(positions).select(cols), with_vector, got)
        missing = [i for i in wanted if i not in got]
        if missing:  # the table changed under the ranking: read those rows by id
            from olav.memory.store.sql import sql_in

            where = sql_in("id", missing)
            found = self.table.search().where(where).select(cols).limit(len(missing))
            _read(found, with_vector, got)
        # a row deleted since the ranking is None: the fusion drops it
        pairs = [got.get(i, (None, None)) for i in wanted]
        return [r for r, _v in pairs], [v for _r, v in pairs]


def _read(
    query: Any, with_vector: bool, got: dict[str, tuple[dict[str, Any], np.ndarray | None]]
) -> None:
    table = query.to_arrow()
    rows, vectors = ArrowRows(table).records(list(range(table.num_rows)), with_vector)
    got.update((row["id"], (row, vec)) for row, vec in zip(rows, vectors, strict=True))


class ArrowRows:
    """The rows of one Arrow table (a LanceDB result)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def records(
        self, positions: list[int], with_vector: bool
    ) -> tuple[list[dict[str, Any]], list[np.ndarray | None]]:
        part = take_rows(self.table, positions)
        vectors: list[np.ndarray | None] = [None] * part.num_rows
        if "vector" in part.column_names:  # as numpy: to_pylist of vectors is slow
            if with_vector:
                vectors = vector_rows(part.column("vector"))
            part = part.drop_columns(["vector"])
        drop = [c for c in SCORE_COLUMNS if c in part.column_names]
        return part.drop_columns(drop).to_pylist(), vectors
