"""The reranker's floors on the golden suite, and what rerankers of known quality would do.

Every golden query is recalled once (:func:`golden_rows`, through the suite's own
:class:`Recaller`); its candidates keep their signals. A reranker's scores are then laid on
those candidates, and the block is replayed with the product's own
:func:`~olav.memory.recall.relevance.decide`,
:func:`~olav.memory.recall.rerank_judge.overrule` and :func:`~olav.memory.recall.recaller.select`:

- :func:`calibrate_rerank` chooses ``accept`` and ``reject`` on the calibration half, with the
  same objective as the margin floors (the most targets met, then the worst slack), the grid
  including "never" for both, so a reranker that helps nothing changes nothing;
- :func:`simulate` gives every candidate a score drawn from its query's acceptable set plus
  controlled noise: ``z = d' * (+1 if acceptable else -1) + N(0, 1)``, score ``sigmoid(z)``.
  ``d'`` is the reranker's quality (0: a coin; 3: it separates the right memories from the rest
  almost always). The AUC of each simulated reranker is measured, not assumed. This is a
  simulation: it says how the integration behaves for a reranker of that quality, and nothing
  about any real model.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from olav.memory.golden.block import TARGETS, Recalled, _better, _score, block_metrics
from olav.memory.policy import Floors
from olav.memory.recall.recaller import Candidate, select
from olav.memory.recall.relevance import decide
from olav.memory.recall.rerank_judge import RerankFloors, overrule

ACCEPT = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, math.inf)
REJECT = (-math.inf, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)
HARM = 0.015  # a measure this much worse than the bundled decision's is harm
QUALITIES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)  # d' of the simulated rerankers
SEEDS = (1, 2, 3)
Scores = dict[tuple[int, str], float]  # (row index, memory id) -> score


def replay(
    r: Recalled,
    index: int,
    floors: Floors,
    rerank: RerankFloors,
    scores: Scores,
    tier: str,
    budget: int,
) -> list[Candidate]:
    """The block the product would inject with these scores on the candidates."""
    cands = []
    for c in r.candidates:
        sig = copy.copy(c.signals)
        episode = c.hit.record.category == "episode"
        if r.relevance_on and not episode:
            decide(sig, lesson=c.hit.record.category == "reflection", floors=floors)
            sig.rerank = scores.get((index, c.hit.record.id))
            sig.judged = None
            overrule(sig, rerank)
        cand = copy.copy(c)
        cand.signals, cand.decision = sig, "candidate"
        cands.append(cand)
    select(cands, tier=tier, token_budget=budget, floors=floors)
    return [c for c in cands if c.decision == "injected"]


def measure(
    rows: Sequence[Recalled],
    floors: Floors,
    rerank: RerankFloors,
    scores: Scores,
    budget: int,
    split: str | None,
    tier: str = "small",
) -> dict[str, Any]:
    return block_metrics(
        (r.query, replay(r, i, floors, rerank, scores, tier, budget))
        for i, r in enumerate(rows)
        if split is None or r.query.split == split
    )


def calibrate_rerank(
    rows: Sequence[Recalled], floors: Floors, scores: Scores, budget: int, split: str = "cal"
) -> tuple[RerankFloors, dict[str, Any]]:
    """The (accept, reject) of the grid that best meets the targets on ``split``, and its
    measures there. Only floors that leave every measure at least as good as the bundled
    decision gives, within :data:`HARM` (two or three requests of the half), are considered:
    a reranker may improve the block, never trade one measure for another. A tie with "never"
    keeps "never" (the bundled decision), so a reranker that helps nothing changes nothing."""
    best_floors = RerankFloors.off()
    bundled = best_metrics = measure(rows, floors, best_floors, scores, budget, split)
    best = _score(best_metrics)
    for accept in ACCEPT:
        for reject in REJECT:
            if reject > accept:
                continue
            trial = RerankFloors(accept, reject)
            got_metrics = measure(rows, floors, trial, scores, budget, split)
            got = _score(got_metrics)
            if not _harmless(got_metrics, bundled):
                continue
            if _better(got, best):
                best_floors, best_metrics, best = trial, got_metrics, got
    return best_floors, best_metrics


def _harmless(metrics: dict[str, Any], bundled: dict[str, Any]) -> bool:
    for key, (_target, higher) in TARGETS.items():
        got, was = metrics.get(key), bundled.get(key)
        if got is None or was is None:
            continue
        if (was - got if higher else got - was) > HARM:
            return False
    return True


def simulated_scores(rows: Sequence[Recalled], quality: float, seed: int) -> Scores:
    rng = random.Random(seed)
    out: Scores = {}
    for i, r in enumerate(rows):
        for c in r.candidates:
            rid = c.hit.record.id
            sign = 1.0 if rid in r.query.acceptable else -1.0
            z = quality * sign + rng.gauss(0.0, 1.0)
            out[(i, rid)] = 1.0 / (1.0 + math.exp(-z))
    return out


def auc(rows: Sequence[Recalled], scores: Scores) -> float | None:
    """How often an acceptable candidate outscores an unacceptable one of the same query."""
    wins = pairs = 0.0
    for i, r in enumerate(rows):
        good = [
            scores[(i, c.hit.record.id)]
            for c in r.candidates
            if c.hit.record.id in r.query.acceptable
        ]
        bad = [
            scores[(i, c.hit.record.id)]
            for c in r.candidates
            if c.hit.record.id not in r.query.acceptable
        ]
        for g in good:
            for b in bad:
                pairs += 1
                wins += 1.0 if g > b else 0.5 if g == b else 0.0
    return round(wins / pairs, 3) if pairs else None


KEYS = ("expect", "precision", "empty", "stray", "unrelated_lesson", "lesson_kept", "tokens")


def simulate(
    rows: Sequence[Recalled],
    floors: Floors,
    budget: int,
    qualities: Sequence[float] = QUALITIES,
    seeds: Sequence[int] = SEEDS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """For each quality: floors calibrated on the calibration half, measures on the test half
    (the mean over ``seeds``), beside the bundled decision alone."""
    bundled = measure(rows, floors, RerankFloors.off(), {}, budget, "test")
    out: dict[str, Any] = {"bundled": {k: bundled.get(k) for k in KEYS}, "rerankers": []}
    for quality in qualities:
        if progress:
            progress(f"simulated reranker d'={quality:g}")
        runs = []
        for seed in seeds:
            scores = simulated_scores(rows, quality, seed)
            chosen, _ = calibrate_rerank(rows, floors, scores, budget)
            test = measure(rows, floors, chosen, scores, budget, "test")
            runs.append((auc(rows, scores), chosen, test))
        mean = {k: _mean([t.get(k) for _, _, t in runs]) for k in KEYS}
        out["rerankers"].append(
            {
                "quality": quality,
                "auc": _mean([a for a, _, _ in runs]),
                "floors": [c.to_json() for _, c, _ in runs],
                "test": mean,
                "targets_met": _met(mean),
            }
        )
    return out


def _met(metrics: dict[str, Any]) -> int:
    met = 0
    for key, (target, higher) in TARGETS.items():
        value = metrics.get(key)
        if value is not None and (value >= target if higher else value <= target):
            met += 1
    return met


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(sum(got) / len(got), 3) if got else None


def golden_rows(
    embedder: Any, *, rerank: Callable[[str, list[str]], list[float] | None] | None = None
) -> tuple[list[Recalled], Floors, int, Scores]:
    """Every golden query recalled once with ``embedder`` and the product's floors for it, and,
    with ``rerank`` (request, candidate texts -> scores), a real reranker's scores of every
    candidate (one request per query, as recall makes)."""
    import tempfile
    from pathlib import Path

    from olav.memory.golden.dataset import load_golden
    from olav.memory.golden.suite import _load_store, _recall_all, _recaller, _settings
    from olav.memory.recall.block import memory_body
    from olav.memory.store.embedders import CachedEmbedder
    from olav.memory.store.search import SearchTuning
    from olav.memory.store.table import MemoryStore

    settings = _settings(None, None)
    gs = load_golden()
    emb = CachedEmbedder(embedder, size=4096)
    scores: Scores = {}
    with tempfile.TemporaryDirectory(prefix="olav-golden-rerank-") as tmp:
        store = MemoryStore(
            Path(tmp) / "memory.lance", emb, tuning=SearchTuning(rrf_k=settings["memory.rrf_k"])
        )
        _load_store(gs, store)
        recaller, _ = _recaller(store, settings, fresh=True)
        rows, _ms = _recall_all(store, gs, recaller)
    if rerank is not None:
        for i, r in enumerate(rows):
            pool = [c for c in r.candidates if c.hit.record.category != "episode"]
            got = rerank(r.query.text, [memory_body(c.hit) for c in pool])
            if got is not None:
                scores.update({(i, c.hit.record.id): s for c, s in zip(pool, got, strict=True)})
    return rows, recaller.floors or Floors.off(), int(settings["memory.token_budget"]), scores
