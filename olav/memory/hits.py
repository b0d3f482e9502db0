"""Search hits: a row with how it ranked, and the fusion of rankings into hits.

Each ranking (vector, full text, context, time) arrives as an Arrow table, best row first.
``fuse`` orders their ids by reciprocal rank (olav.memory.fusion) and builds records only for
the top k: that is the hot path of AutoRecall.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from olav.memory.connection import VECTOR_COLUMNS
from olav.memory.fusion import rrf
from olav.memory.schema import MemoryRecord
from olav.memory.vcache import take_rows, valid_mask


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


def fuse(
    rankings: dict[str, pa.Table],
    k: int,
    qv: np.ndarray | None,
    *,
    rrf_k: int,
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
    fused = rrf(ids, k=rrf_k, stand_ins=no_context, stand_in_rankings=("vector", "fts"))
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
            found_vecs = vector_rows(part.column("vector"))
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


def vector_rows(column: pa.ChunkedArray) -> list[np.ndarray | None]:
    """A fixed-size-list column as float32 rows (None where null)."""
    arr = column.combine_chunks()
    dim = arr.type.list_size
    start = arr.offset * dim
    flat = arr.values.to_numpy(zero_copy_only=False)[start : start + len(arr) * dim]
    matrix = np.asarray(flat, dtype=np.float32).reshape(len(arr), dim)
    valid = valid_mask(arr)
    return [matrix[i].copy() if ok else None for i, ok in enumerate(valid)]
