"""Reciprocal-rank fusion: the one place where olav turns several rankings into one.

``MemoryStore.search(mode="hybrid")`` fuses its vector, full-text, context and time rankings
here, and the LoCoMo benchmark fuses its experimental recipes with the same function, so the
benchmark measures the fusion the product runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Fused:
    """The fused order and how each id got there."""

    order: list[str]  # every id found, best first; ties broken by id
    scores: dict[str, float]  # id -> fused score
    ranks: dict[str, dict[str, int]]  # id -> ranking name -> rank (from 1) in that ranking


def rrf(
    rankings: Mapping[str, Sequence[str]],
    *,
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
    stand_ins: Collection[str] = (),
    stand_in_rankings: Collection[str] = (),
) -> Fused:
    """Fuse ``rankings`` (name -> ids, best first) by reciprocal rank.

    An id scores ``weight / (k + rank)`` in every ranking that holds it; a ranking without a
    weight counts 1. Ids in ``stand_ins`` score their ``stand_in_rankings`` twice: a memory
    without a context window lets its own text stand in for the context rankings it cannot
    appear in.
    """
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in rankings.items():
        for pos, rid in enumerate(ids, start=1):
            ranks.setdefault(rid, {}).setdefault(name, pos)

    w = {name: 1.0 if weights is None else weights.get(name, 1.0) for name in rankings}
    scores: dict[str, float] = {}
    for rid, found in ranks.items():
        score = sum(w[n] / (k + r) for n, r in found.items())
        if rid in stand_ins:
            score += sum(w[n] / (k + r) for n, r in found.items() if n in stand_in_rankings)
        scores[rid] = score
    order = sorted(scores, key=lambda rid: (-scores[rid], rid))
    return Fused(order, scores, ranks)
