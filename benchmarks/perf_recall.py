"""Recall latency for ``python -m benchmarks perf``: every search mode and AutoRecall over one
table, next to a numpy brute-force top-k over the same vectors on one BLAS thread."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from benchmarks.perf_data import AGENT
from benchmarks.timing import WARMUP, latencies_ms, paired_latencies_ms, summary
from olav.memory.store.embedders import EmbedderProxy
from olav.memory.store.filters import SearchFilter
from olav.memory.store.scopes import EVERYONE

K = 10


@contextmanager
def one_blas_thread() -> Iterator[str]:
    """numpy's OpenBLAS on one thread (a threaded gemv waits for descheduled workers on a busy
    2-core machine). Yields a label; does nothing when numpy's OpenBLAS cannot be reached."""
    from olav.core.log import blas_threads

    before = blas_threads()
    if before is None:
        yield "numpy, default BLAS threads"
        return
    blas_threads(1)
    try:
        yield "numpy, 1 BLAS thread"
    finally:
        blas_threads(before)


def numpy_topk(matrix: np.ndarray, q: np.ndarray, k: int = K) -> np.ndarray:
    scores = matrix @ q
    k = min(k, len(scores) - 1)
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part])]


class Precomputed(EmbedderProxy):
    """An embedder whose query vectors are looked up: AutoRecall without the e5 call."""

    def __init__(self, inner: Any, vectors: dict[str, np.ndarray]) -> None:
        super().__init__(inner)
        self.vectors = vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


def fragments(store: Any) -> int | None:
    """How many data fragments the table has (every write adds one until it is compacted)."""
    try:
        return int(store.table.stats()["fragment_stats"]["num_fragments"])
    except Exception:  # an optional statistic; older lancedb has no table.stats()
        return None


def _numpy_baseline(vectors: np.ndarray, qvecs: np.ndarray, n: int) -> dict[str, Any]:
    with one_blas_thread() as label:
        lat = latencies_ms(lambda i: numpy_topk(vectors, qvecs[i]), n)
    return {**summary(lat), "label": label}


def vector_recall(store: Any, vectors: np.ndarray, qvecs: np.ndarray) -> float:
    """Mean recall@K of the store's vector ranking against numpy's exact top K. Every row of
    a perf table is live and row ``i`` is memory ``m{i:07d}``, so the search filters none."""
    found = []
    for q in qvecs:
        hits = store.search(
            "", mode="vector", k=K, query_vector=q, filter=SearchFilter(reader=EVERYONE)
        )
        exact = {f"m{int(i):07d}" for i in numpy_topk(vectors, q)}
        found.append(len(exact & {h.record.id for h in hits}) / K)
    return round(float(np.mean(found)), 3)


def _paired(
    recall: Callable[[int], None], vectors: np.ndarray, qvecs: np.ndarray, n: int
) -> dict[str, Any]:
    """AutoRecall and numpy's brute force (on one BLAS thread) timed in turn, query by query,
    so that their ratio is taken under the same load: on a shared machine it moves by tens
    of percent between blocks of calls a few seconds apart. Only where the target is that
    ratio: below the snapshot's size the two would evict each other's vectors from the CPU
    caches."""

    def floor(i: int) -> None:
        with one_blas_thread():
            numpy_topk(vectors, qvecs[i])

    own, base = paired_latencies_ms(recall, floor, n)
    return {"autorecall_paired": summary(own), "numpy_paired": summary(base)}


def _relative_to_numpy(modes: dict[str, dict[str, Any]], base: float) -> None:
    for block in modes.values():
        block["x_numpy"] = round(block["p50"] / base, 1) if base else None


def _dry_recall(dry: Any, queries: list[str]) -> Callable[[int], None]:
    """One timed AutoRecall selection that writes nothing."""

    def call(i: int) -> None:
        dry.recall(queries[i], dry_run=True)

    return call


def _searcher(
    store: Any,
    queries: list[str],
    qvecs: np.ndarray,
    mode: str,
    k: int = K,
    cats: list[str] | None = None,
) -> Callable[[int], None]:
    """One timed call: the ``i``-th query searched in ``mode`` with its precomputed vector."""
    scopes = [AGENT, "global"]

    def call(i: int) -> None:
        hits = store.search(
            queries[i],
            mode=mode,
            k=k,
            query_vector=qvecs[i],
            filter=SearchFilter(scopes=scopes, categories=cats, reader=EVERYONE),
        )
        if not hits:
            raise RuntimeError(f"{mode} search found nothing for {queries[i]!r}")

    return call


def _forget(rec: Any, queries: list[str]) -> None:
    """Make the second opinion encode these requests again, as e5 does uncached."""
    if rec.lesson_margins is not None:
        rec.lesson_margins.opinion.forget(queries)


def _recaller_kwargs(e5: Any, config: Any, tier: str) -> dict[str, Any]:
    from olav.memory.policy import Floors, policy_for
    from olav.memory.recall.recaller import RecallOptions
    from olav.memory.recall.relevance import load_background

    policy = policy_for(config)
    options = RecallOptions(tier=tier, token_budget=policy.token_budget, policy=policy)
    from olav.memory.recall import lesson_encoder

    # lessons are decided with the second opinion as in chat (its weights load untimed here)
    margins = lesson_encoder.margins_for(None) if lesson_encoder.wanted(config) else None
    if margins is not None:
        margins.opinion.vectors(["warm"])
    return {
        "agent": AGENT,
        "options": options,
        "lesson_margins": margins,
        # the relevance signals are computed as in chat, but with no floor: random-word
        # queries are relevant to nothing, and the bench must still pay for injecting and
        # for the access-count bumps that injected memories cost
        "floors": Floors.off(),
        "background": load_background(e5),
    }


def _full_autorecall(
    store: Any, e5: Any, queries: list[str], config: Any, kwargs: dict[str, Any], n: int
) -> tuple[dict[str, Any], list[int]]:
    """Full AutoRecall: every query a cache miss, so e5 embeds it; the access-count bump runs on
    the background writer as in chat and is waited for (untimed) before the next model call.
    Returns the latency summary and how many memories each recall injected."""
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.embedders import CachedEmbedder
    from olav.runtime.runner import BUMP_EVERY_N_TURNS

    store.embedder = CachedEmbedder(e5, config["embedder.cache_size"])
    rec = Recaller(store, **kwargs)
    injected: list[int] = []

    def recall(i: int) -> None:
        injected.append(len(rec.recall(queries[i], run_id=f"bench{i}").injected))

    runs = [0]

    def after_run() -> None:
        # what a chat Session does after each run, off the model call's path: write the
        # access-count bumps every few runs, and compact the table once it is fragmented
        runs[0] += 1
        rec.flush(bumps=runs[0] % BUMP_EVERY_N_TURNS == 0)
        if store.needs_maintenance():
            store.maintain()
        store.vcache.refresh(store.table)

    return summary(latencies_ms(recall, n, after=after_run)), injected


def _force_maintain(store: Any) -> float:
    """Compact the fragments the bumps wrote; return the seconds it took."""
    t0 = time.perf_counter()
    store.maintain(force_optimize=True)
    maintain_s = time.perf_counter() - t0
    store.vcache.refresh(store.table)
    return maintain_s


@dataclass(frozen=True, slots=True)
class TimedQueries:
    """The queries one run times (the first ``WARMUP`` untimed) and their e5 vectors."""

    texts: list[str]
    vectors: np.ndarray


def measure_recall(
    store: Any, vectors: np.ndarray, e5: Any, timed: TimedQueries, config: Any, tier: str
) -> dict[str, Any]:
    """p50/p95 of every search mode, AutoRecall and numpy over one table.

    Read-only measurements come first; full AutoRecall, whose access-count bumps each write a
    table version, comes last and is followed by one more read-only AutoRecall pass."""
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.embedders import CachedEmbedder

    queries, qvecs = timed.texts, timed.vectors
    n = len(queries) - WARMUP
    out: dict[str, Any] = {}
    # the vector snapshot (olav.memory.store.vcache) is current, as a chat session keeps it
    out["vector_cache"] = store.vcache.refresh(store.table) is not None
    out["numpy"] = _numpy_baseline(vectors, qvecs, n)
    modes = {
        m: summary(latencies_ms(_searcher(store, queries, qvecs, m), n))
        for m in ("vector", "fts", "hybrid")
    }
    out["vector_recall"] = vector_recall(store, vectors, qvecs[WARMUP:])
    kwargs = _recaller_kwargs(e5, config, tier)
    # the pieces of AutoRecall: e5 alone, the hybrid search it makes (its candidate count and
    # categories, precomputed vector), and the whole selection with the query vector cached
    cached = Precomputed(e5, dict(zip(queries, qvecs, strict=True)))
    no_bump = replace(kwargs["options"], bump_access=False)
    dry = Recaller(store, **{**kwargs, "options": no_bump})
    dry_recall = _dry_recall(dry, queries)
    # what a request without "last time" gets
    cats = [c for c in dry.policy.quotas if c != "episode"]
    hybrid = _searcher(store, queries, qvecs, "hybrid", dry.policy.candidates, cats)
    parts = {
        "e5_query": summary(latencies_ms(lambda i: e5.embed_query(queries[i]), n)),
        "hybrid_k_candidates": summary(latencies_ms(hybrid, n)),
    }
    if dry.lesson_margins is not None:  # its encoding of the request, uncached
        encode = dry.lesson_margins.opinion.encode
        parts["second_query"] = summary(latencies_ms(lambda i: encode([queries[i]]), n))
    store.embedder = CachedEmbedder(e5, 0)  # e5 embeds every query, no bump is written
    _forget(dry, queries)  # and so does the second opinion
    parts["autorecall_no_bump"] = summary(latencies_ms(dry_recall, n))
    store.embedder = cached
    parts["autorecall_cached_vector"] = summary(latencies_ms(dry_recall, n))
    if store.size() > store.vcache.max_rows:  # the sizes whose target is a ratio to numpy
        parts.update(_paired(dry_recall, vectors, qvecs, n))
    frags_before = fragments(store)
    _forget(dry, queries)
    modes["autorecall"], injected = _full_autorecall(store, e5, queries, config, kwargs, n)
    frags_after = fragments(store)
    store.embedder = cached
    parts["autorecall_cached_vector_after_bumps"] = summary(latencies_ms(dry_recall, n))
    maintain_s = _force_maintain(store)
    parts["autorecall_cached_vector_after_maintain"] = summary(latencies_ms(dry_recall, n))
    store.embedder = e5
    _relative_to_numpy(modes, out["numpy"]["p50"])
    out.update(modes=modes, parts=parts)
    out["fragments"] = {
        "before_autorecall": frags_before,
        "after_autorecall": frags_after,
        "after_maintain": fragments(store),
        "maintain_s": round(maintain_s, 3),
    }
    out["injected_mean"] = round(sum(injected) / max(len(injected), 1), 2)
    return out
