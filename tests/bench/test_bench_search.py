"""Benchmark of the memory layer: search latency at 10k and 100k rows, and the ANN threshold.

Run with ``make bench`` (``pytest -m bench -s``). Every benchmark prints Markdown tables and,
when ``OLAV_BENCH_OUT`` names a file, merges its numbers into that JSON file. The assertions
are sanity checks only (counts, recall); wall-clock times are reported, never asserted.
Results and their reading: docs/benchmarks.md.

Settings: ``OLAV_BENCH_OUT`` (JSON file).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.perf import numpy_topk, one_blas_thread
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import MemoryStore
from tests.bench.memory_support import DIM, NEVER, recall_at_k
from tests.bench.support import (
    WARMUP,
    K,
    fts_query,
    latencies_ms,
    p50,
    p95,
    report,
    sentence,
)

pytestmark = pytest.mark.bench

# -- synthetic corpora -------------------------------------------------------------------------


class FixedEmbedder:
    """A 384-d embedder whose query vector is fixed, so query embedding costs nothing.

    The benchmarks pass precomputed vectors (rows) and ``query_vector=`` (queries); this only
    satisfies the store's protocol and table metadata.
    """

    name = "bench:fixed-384"
    dim = DIM

    def __init__(self) -> None:
        rng = np.random.default_rng(7)
        v = rng.standard_normal(DIM).astype(np.float32)
        self._q = v / np.linalg.norm(v)

    def embed_query(self, text: str) -> np.ndarray:
        return self._q

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        rng = np.random.default_rng(len(texts))
        return unit(rng.standard_normal((len(texts), DIM)))


def unit(mat: np.ndarray) -> np.ndarray:
    mat = np.asarray(mat, dtype=np.float32)
    return (mat / np.linalg.norm(mat, axis=-1, keepdims=True)).astype(np.float32)


def clustered_vectors(rng: np.random.Generator, centers: np.ndarray, n: int) -> np.ndarray:
    """Unit vectors around random centres: some structure, unlike pure noise."""
    pick = rng.integers(0, len(centers), n)
    noise = rng.standard_normal((n, DIM)).astype(np.float32) * (0.9 / np.sqrt(DIM))
    return unit(centers[pick] + noise)


SCOPES = ("global", "netops", "coder", "team:sre")
SCOPE_P = (0.60, 0.20, 0.19, 0.01)  # team:sre is the selective scope: 1 % of rows


# -- 2. search latency at 10k and 100k rows, and the ANN threshold -----------------------------


class SyntheticCorpus:
    """Grows one MemoryStore with precomputed clustered vectors and generated texts."""

    def __init__(self, path: Path, seed: int = 1) -> None:
        self.store = MemoryStore(path, FixedEmbedder(), tuning=SearchTuning(ann_threshold=NEVER))
        self.rng = np.random.default_rng(seed)
        self.text_rng = random.Random(seed)
        self.centers = unit(self.rng.standard_normal((512, DIM)))
        self.vectors = np.zeros((0, DIM), dtype=np.float32)
        self.scopes: list[str] = []
        self.insert_s = 0.0
        self.optimize_s = 0.0

    def grow_to(self, n: int, batch: int = 5000) -> None:
        while len(self.vectors) < n:
            start = len(self.vectors)
            m = min(batch, n - start)
            vecs = clustered_vectors(self.rng, self.centers, m)
            scopes = self.rng.choice(SCOPES, size=m, p=SCOPE_P).tolist()
            recs = [
                MemoryRecord(
                    id=f"m{start + j:07d}",
                    text=sentence(self.text_rng),
                    category="fact",
                    scope=scopes[j],
                    vector=vecs[j].tolist(),
                )
                for j in range(m)
            ]
            t0 = time.perf_counter()
            res = self.store.upsert(recs)
            self.insert_s += time.perf_counter() - t0
            assert len(res.added) == m
            self.vectors = np.vstack([self.vectors, vecs])
            self.scopes += scopes
        t0 = time.perf_counter()
        self.store.maintain(force_optimize=True)
        self.optimize_s += time.perf_counter() - t0
        assert self.store.size() == n

    def row_index(self, memory_id: str) -> int:
        return int(memory_id[1:])


def measure_modes(
    corpus: SyntheticCorpus,
    size_label: str,
    index_label: str,
    queries: np.ndarray,
    texts: list[str],
    n: int,
    np_p50: float,
    *,
    modes: Sequence[str] = ("vector", "fts", "hybrid"),
    scoped: bool = True,
) -> list[list[Any]]:
    """Latency rows for each mode (+ a selective-scope vector cell), with ANN recall."""
    store, mat = corpus.store, corpus.vectors
    rows: list[list[Any]] = []
    cells: list[tuple[str, str, Any]] = [(m, m, None) for m in modes]
    if scoped:
        cells.append(("vector, scope team:sre (1 %)", "vector", ["team:sre"]))
    for label, mode, scopes in cells:
        results: list[list[int]] = []

        def call(i: int, mode: str = mode, scopes: Any = scopes, out: list = results) -> None:
            hits = store.search(
                texts[i % len(texts)],
                mode=mode,
                k=K,
                query_vector=queries[i % len(queries)],
                filter=SearchFilter(scopes=scopes, reader=EVERYONE),
            )
            out.append([corpus.row_index(h.record.id) for h in hits])

        lat = latencies_ms(call, n)
        timed = results[WARMUP:]
        assert all(timed), f"{label}: empty results"
        recall: Any = "-"
        if mode == "vector":
            if scopes is None:
                sub, idx = mat, np.arange(len(mat))
            else:
                idx = np.flatnonzero(np.isin(np.asarray(corpus.scopes), scopes))
                sub = mat[idx]
            pos = {int(g): j for j, g in enumerate(idx)}
            recs = [
                recall_at_k([pos[g] for g in got], sub, queries[i % len(queries)])
                for i, got in enumerate(timed)
            ]
            recall = float(np.mean(recs))
        rows.append(
            [size_label, index_label, label, n, p50(lat), p95(lat), p50(lat) / np_p50, recall]
        )
    return rows


@pytest.mark.timeout(1800)
def test_bench_search_latency_and_ann_threshold(tmp_path: Path) -> None:
    corpus = SyntheticCorpus(tmp_path / "db")
    store = corpus.store
    qrng = np.random.default_rng(99)
    queries = clustered_vectors(qrng, corpus.centers, 200)
    trng = random.Random(5)
    texts = [fts_query(trng) for _ in range(200)]

    latency_rows: list[list[Any]] = []
    numpy_rows: list[list[Any]] = []
    threshold_rows: list[list[Any]] = []
    build_s = 0.0
    vector_only = ("vector",)

    for size in (1_000, 5_000, 10_000, 20_000, 50_000, 100_000):
        corpus.grow_to(size)
        mat = corpus.vectors
        with one_blas_thread() as np_label:
            np_lat = latencies_ms(lambda i, m=mat: numpy_topk(m, queries[i % len(queries)]), 100)
        np_p50 = p50(np_lat)
        numpy_rows.append([f"{size:,}", p50(np_lat), p95(np_lat)])
        label = f"{size // 1000}k"
        full = size in (10_000, 100_000)  # every mode, plus the scoped cell

        # Exact: no vector index yet, LanceDB scans every live row.
        n = 100 if size <= 10_000 else 60 if full else 50
        modes = ("vector", "fts", "hybrid") if full else vector_only
        cell = measure_modes(
            corpus, label, "none (exact)", queries, texts, n, np_p50, modes=modes, scoped=full
        )
        exact = cell[0]
        assert exact[7] >= 0.99, "exact search disagrees with numpy brute force"
        if full:
            latency_rows += cell
        if size not in (5_000, 10_000, 20_000, 100_000):  # an ANN build at 50k costs minutes
            threshold_rows.append([f"{size:,}", exact[4], exact[5], "-", "-", "-", np_p50])
            continue

        # ANN: the index maintain() builds once rows >= ann_threshold.
        store.ann_threshold = size
        t0 = time.perf_counter()
        assert store.maintain()["ann_built"]
        build_s = time.perf_counter() - t0
        assert store.index_state()["vector"] is not None
        n_ann = 100 if full else 50
        cell = measure_modes(
            corpus, label, "IVF_SQ", queries, texts, n_ann, np_p50, modes=modes, scoped=full
        )
        ann = cell[0]
        assert ann[7] > 0.5, f"IVF_SQ recall@10 at {size} rows is {ann[7]:.2f}"
        if full:
            latency_rows += cell
        threshold_rows.append([f"{size:,}", exact[4], exact[5], ann[4], ann[7], build_s, np_p50])
        if size < 100_000:  # back to exact for the next, larger checkpoint
            store.table.drop_index(store.index_state()["vector"]["name"])
            store.ann_threshold = NEVER
            assert store.index_state()["vector"] is None

    report(
        "search_latency",
        f"Search latency, k={K}",
        ["rows", "vector index", "mode", "queries", "p50 ms", "p95 ms", "p50 / numpy", "recall@10"],
        latency_rows,
    )
    report(
        "search_latency",
        f"Brute force top-10 (matrix @ q + argpartition), {np_label}",
        ["rows", "p50 ms", "p95 ms"],
        numpy_rows,
    )
    report(
        "search_latency",
        "Building the tables",
        ["step", "seconds"],
        [
            ["upsert 100k rows in batches of 5k (vectors given)", corpus.insert_s],
            ["maintain(force_optimize=True) at 6 checkpoints (FTS)", corpus.optimize_s],
            ["maintain() building IVF_SQ at 100k rows", build_s],
        ],
    )
    report(
        "ann_threshold",
        "Exact vs. IVF_SQ vector search by row count, store.search(mode='vector')",
        [
            "rows",
            "exact p50 ms",
            "exact p95 ms",
            "ANN p50 ms",
            "ANN recall@10",
            "ANN build s",
            "numpy p50 ms",
        ],
        threshold_rows,
    )
