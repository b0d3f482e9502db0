"""Search hits: a row with how it ranked, and the fusion of rankings into hits.

Each ranking (vector, full text, context, time) arrives as ids and row positions, best first
(olav.memory.store.ranking). ``fuse`` orders the ids by reciprocal rank
(olav.memory.store.fusion) and builds records only for the top k: that is the hot path of
AutoRecall.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from olav.memory.store.connection import VECTOR_COLUMNS
from olav.memory.store.fusion import rrf
from olav.memory.store.ranking import Ranking, RowSource
from olav.memory.store.schema import MemoryRecord


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
    rankings: dict[str, Ranking],
    k: int,
    qv: np.ndarray | None,
    *,
    rrf_k: int,
    with_context: bool,
) -> list[Hit]:
    """RRF over the rankings; only the top k rows become records (the hot path)."""
    ids: dict[str, list[str]] = {}
    first: dict[str, tuple[Ranking, int]] = {}  # id -> (ranking, place) where first seen
    distance: dict[str, float] = {}
    fts_score: dict[str, float] = {}
    no_context: set[str] = set()
    for name, ranking in rankings.items():
        ids[name] = found_ids = ranking.ids
        if name == "vector":
            distance = dict(zip(found_ids, ranking.values, strict=True))
        elif name == "fts":
            fts_score = dict(zip(found_ids, ranking.values, strict=True))
        if with_context:
            flags = zip(found_ids, ranking.no_context, strict=True)
            no_context.update(i for i, null in flags if null)
        for place, rid in enumerate(found_ids):
            if rid not in first:
                first[rid] = (ranking, place)
    # a memory without a context window: its text stands in for its context
    fused = rrf(ids, k=rrf_k, stand_ins=no_context, stand_in_rankings=("vector", "fts"))
    top = fused.order[:k]
    rows, vectors = _records(top, first)
    hits = []
    for rid in top:
        row = rows.get(rid)
        if row is None:
            continue  # deleted since it was ranked (olav.memory.store.ranking.TableRows)
        vec = vectors[rid]
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


def _records(
    top: list[str], first: dict[str, tuple[Ranking, int]]
) -> tuple[dict[str, dict[str, Any] | None], dict[str, np.ndarray | None]]:
    """The rows and text vectors of ``top``, read once per row source (all the rankings of a
    snapshot search share one)."""
    groups: dict[tuple[int, bool], tuple[RowSource, list[str], list[int]]] = {}
    for rid in top:
        ranking, place = first[rid]
        key = (id(ranking.source), ranking.with_vector)
        group = groups.setdefault(key, (ranking.source, [], []))
        group[1].append(rid)
        group[2].append(ranking.positions[place])
    rows: dict[str, dict[str, Any] | None] = {}
    vectors: dict[str, np.ndarray | None] = {}
    for (_source, with_vector), (source, rids, positions) in groups.items():
        found, vecs = source.records(positions, with_vector)
        rows.update(zip(rids, found, strict=True))
        vectors.update(zip(rids, vecs, strict=True))
    return rows, vectors
