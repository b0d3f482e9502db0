"""The one fusion (olav.memory.store.fusion.rrf) that the store and the benchmarks both run."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from benchmarks.locomo import fuse
from olav.memory.store.fusion import rrf


def reference_rrf(
    rankings: Sequence[Sequence[str]], k: int, weights: Sequence[float]
) -> dict[str, float]:
    """RRF written out the plain way: the sum of weight / (k + rank) over rankings."""
    scores: dict[str, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return scores


def random_rankings(rng: random.Random, n: int) -> list[list[str]]:
    pool = [f"m{i:03d}" for i in range(120)]
    return [rng.sample(pool, rng.randint(0, 60)) for _ in range(n)]


def test_scores_and_ranks() -> None:
    fused = rrf({"vector": ["a", "b"], "fts": ["b", "c"]}, k=60)
    assert fused.scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused.order == ["b", "a", "c"]
    assert fused.ranks["b"] == {"vector": 2, "fts": 1}
    assert fused.ranks["c"] == {"fts": 2}


def test_ties_break_by_id() -> None:
    assert rrf({"x": ["b"], "y": ["a"]}).order == ["a", "b"]


@pytest.mark.parametrize("seed", range(20))
def test_same_order_and_scores_as_plain_rrf(seed: int) -> None:
    rng = random.Random(seed)
    lists = random_rankings(rng, rng.randint(1, 6))
    weights = [rng.choice([1.0, 1.5, 0.5]) for _ in lists]
    k = rng.choice([20, 60])
    want = reference_rrf(lists, k, weights)
    got = rrf(
        {f"r{i}": ids for i, ids in enumerate(lists)},
        k=k,
        weights={f"r{i}": w for i, w in enumerate(weights)},
    )
    assert got.scores == want  # bit for bit: the same sums in the same order
    assert got.order == sorted(want, key=lambda key: (-want[key], key))
    assert fuse([(ids, w) for ids, w in zip(lists, weights, strict=True)], k, 1000) == got.order


def test_the_benchmark_fuses_only_the_first_depth_ids() -> None:
    # "c" at rank 3 of the first ranking is past the depth: it ties with "a" instead of leading
    assert fuse([(["a", "b", "c"], 1.0), (["c"], 1.0)], 60, 2) == ["a", "c", "b"]
    assert fuse([(["a", "b", "c"], 1.0), (["c"], 1.0)], 60, 3)[0] == "c"


def test_a_memory_without_context_counts_its_text_rankings_twice() -> None:
    rankings = {
        "vector": ["solo", "ctx"],
        "fts": ["ctx", "solo"],
        "context_vector": ["ctx"],
        "context_fts": ["ctx"],
    }
    fused = rrf(rankings, k=20, stand_ins={"solo"}, stand_in_rankings=("vector", "fts"))
    assert fused.scores["solo"] == pytest.approx(2 * (1 / 21 + 1 / 22))
    assert fused.scores["ctx"] == pytest.approx(1 / 22 + 1 / 21 + 1 / 21 + 1 / 21)


@pytest.mark.parametrize("seed", range(10))
def test_stand_ins_score_as_the_store_always_has(seed: int) -> None:
    """The store's rule, written out: every rank counts once, and the text rankings of a
    memory without a context window count once more."""
    rng = random.Random(seed)
    names = ["fts", "context_fts", "time_fts", "vector", "context_vector", "time_vector"]
    rankings = dict(zip(names, random_rankings(rng, len(names)), strict=True))
    no_context = {rid for ids in rankings.values() for rid in ids if rng.random() < 0.4}
    want: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in rankings.items():
        for pos, rid in enumerate(ids, start=1):
            ranks.setdefault(rid, {})[name] = pos
    for rid, found in ranks.items():
        score = sum(1.0 / (20 + r) for r in found.values())
        if rid in no_context:
            score += sum(1.0 / (20 + r) for n, r in found.items() if n in ("vector", "fts"))
        want[rid] = score
    got = rrf(rankings, k=20, stand_ins=no_context, stand_in_rankings=("vector", "fts"))
    assert got.scores == want
    assert got.ranks == ranks
    assert got.order == sorted(want, key=lambda rid: (-want[rid], rid))
