"""Benchmarks of the memory layer: guide import, search latency, ANN recall, ANN threshold.

Run with ``make bench`` (``pytest -m bench -s``). Every benchmark prints Markdown tables and,
when ``OLAV_BENCH_OUT`` names a file, merges its numbers into that JSON file. The assertions
are sanity checks only (counts, recall); wall-clock times are reported, never asserted.
Results and their reading: docs/benchmarks.md.

Settings: ``OLAV_BENCH_OUT`` (JSON file), ``OLAV_LOCOMO`` (path of locomo_dev.json),
``OLAV_BENCH_LOCOMO_ROWS`` (passages embedded for the recall bench, default 3000).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from olav.bench.perf import numpy_topk, one_blas_thread, write_guides
from olav.memory.embedders import E5Embedder, HashEmbedder
from olav.memory.guides import import_guides
from olav.memory.schema import MemoryRecord
from olav.memory.store import MemoryStore
from tests.bench.support import (
    WARMUP,
    K,
    bench_env,
    fts_query,
    latencies_ms,
    p50,
    p95,
    report,
    sentence,
)

pytestmark = pytest.mark.bench

DIM = 384
NEVER = 10**12  # an ann_threshold that is never reached
# the shared data folder beside the repository (../shared/data/locomo)
LOCOMO_DEFAULT = str(
    Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"
)


def recall_at_k(
    returned: Sequence[int], matrix: np.ndarray, q: np.ndarray, k: int = K, eps: float = 1e-4
) -> float:
    """Share of the returned rows that are within the exact k-th best distance (tie-safe)."""
    scores = matrix @ q
    kth = np.partition(-scores, k - 1)[k - 1]  # minus the k-th best inner product
    good = sum(1 for i in returned[:k] if -scores[i] <= kth + eps)
    return good / k


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


# -- 1. guides imported per second -------------------------------------------------------------


@pytest.mark.timeout(900)
def test_bench_guide_import(tmp_path: Path) -> None:
    n = 1000
    root = tmp_path / "guides"
    files = write_guides(root, n)
    assert len(files) == n

    rows: list[list[Any]] = []
    for label, embedder in (
        ("e5 (multilingual-e5-small)", E5Embedder()),
        ("hash-384 (storage only)", HashEmbedder("hash-384")),
    ):
        store = MemoryStore(tmp_path / f"db-{embedder.name.split(':')[0]}", embedder)
        t0 = time.perf_counter()
        first = import_guides(store, files, base=root, prune_under=root)
        t_first = time.perf_counter() - t0
        assert not first.errors, [e.one_line() for e in first.errors]
        assert len(first.added) == n
        assert store.count() == n

        version = store.table.version
        t0 = time.perf_counter()
        again = import_guides(store, files, base=root, prune_under=root)
        t_again = time.perf_counter() - t0
        assert len(again.unchanged) == n
        assert not again.added and not again.updated and not again.pruned and not again.errors
        assert store.table.version == version, "a no-change re-import wrote to the table"

        hits = store.search("回滚 router", mode="fts", k=5)
        assert hits, "imported guides are not found by full-text search"
        rows.append([label, n, t_first, n / t_first, t_again * 1000.0])

    report(
        "guide_import",
        f"Guide import ({n} guides)",
        ["embedder", "guides", "first import s", "guides/s", "no-change re-import ms"],
        rows,
    )


# -- 2. search latency at 10k and 100k rows, and the ANN threshold -----------------------------


class SyntheticCorpus:
    """Grows one MemoryStore with precomputed clustered vectors and generated texts."""

    def __init__(self, path: Path, seed: int = 1) -> None:
        self.store = MemoryStore(path, FixedEmbedder(), ann_threshold=NEVER)
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
        assert self.store.count() == n

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
                scopes=scopes,
                query_vector=queries[i % len(queries)],
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
            corpus, label, "IVF_HNSW_SQ", queries, texts, n_ann, np_p50, modes=modes, scoped=full
        )
        ann = cell[0]
        assert ann[7] > 0.5, f"IVF_HNSW_SQ recall@10 at {size} rows is {ann[7]:.2f}"
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
            ["maintain() building IVF_HNSW_SQ at 100k rows", build_s],
        ],
    )
    report(
        "ann_threshold",
        "Exact vs. IVF_HNSW_SQ vector search by row count, store.search(mode='vector')",
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


# -- 3. ANN recall on real e5 embeddings (LoCoMo) ----------------------------------------------


def locomo_texts(path: Path, limit: int) -> tuple[list[str], list[str]]:
    """Dialogue turns (then observations, if turns run short) and the questions."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns: list[str] = []
    observations: list[str] = []
    questions: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        for key, val in conv.items():
            if key.startswith("session_") and isinstance(val, list):
                turns += [t["text"] for t in val if t.get("text")]
        for sess in (sample.get("observation") or {}).values():
            for facts in sess.values():
                observations += [f[0] for f in facts if f and isinstance(f[0], str)]
        questions += [q["question"] for q in sample["qa"] if q.get("question")]
    seen: set[str] = set()
    passages = []
    for text in turns + observations:  # drop exact duplicates, so recall has no ties to hide
        if text.strip() and text not in seen:
            seen.add(text)
            passages.append(text)
    return passages[:limit], questions


@pytest.mark.timeout(1200)
def test_bench_ann_recall_locomo(tmp_path: Path) -> None:
    path = Path(bench_env("OLAV_LOCOMO") or LOCOMO_DEFAULT)
    if not path.is_file():
        pytest.skip(f"LoCoMo data not found at {path}; set OLAV_LOCOMO to locomo_dev.json")
    # e5 embeds these ~30-token passages at about 15/s on 2 cores: 3,000 keep this bench
    # near three minutes. OLAV_BENCH_LOCOMO_ROWS=5000 takes every turn and observation.
    passages, questions = locomo_texts(path, int(bench_env("OLAV_BENCH_LOCOMO_ROWS") or 3000))
    questions = random.Random(3).sample(questions, min(200, len(questions)))
    assert len(passages) >= 500 and questions

    e5 = E5Embedder()
    passages.sort(key=len)  # batches of similar length pad less: same vectors, 1.5x faster
    t0 = time.perf_counter()
    pvecs = np.vstack(
        [e5.embed_passages(passages[i : i + 64]) for i in range(0, len(passages), 64)]
    )
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    qvecs = np.vstack([e5.embed_query(q) for q in questions])
    query_embed_ms = (time.perf_counter() - t0) * 1000.0 / len(questions)

    store = MemoryStore(tmp_path / "db", e5, ann_threshold=NEVER)
    for i in range(0, len(passages), 5000):
        store.upsert(
            MemoryRecord(
                id=f"t{j:06d}", text=passages[j], category="fact", vector=pvecs[j].tolist()
            )
            for j in range(i, min(i + 5000, len(passages)))
        )
    store.maintain(force_optimize=True)
    assert store.count() == len(passages)

    def run(n: int) -> tuple[list[float], list[list[int]]]:
        got: list[list[int]] = []

        def call(i: int) -> None:
            hits = store.search(questions[i % n], mode="vector", k=K, query_vector=qvecs[i % n])
            got.append([int(h.record.id[1:]) for h in hits])

        lat = latencies_ms(call, n)
        return lat, got[WARMUP:]

    n = len(questions)
    exact_lat, exact_got = run(n)
    with one_blas_thread() as np_label:
        np_lat = latencies_ms(lambda i: numpy_topk(pvecs, qvecs[i % n]), n)
    store.ann_threshold = 1
    t0 = time.perf_counter()
    assert store.maintain()["ann_built"]
    build_s = time.perf_counter() - t0
    ann_lat, ann_got = run(n)

    exact_recall = float(
        np.mean([recall_at_k(g, pvecs, qvecs[i]) for i, g in enumerate(exact_got)])
    )
    ann_recall = float(np.mean([recall_at_k(g, pvecs, qvecs[i]) for i, g in enumerate(ann_got)]))
    overlap = float(
        np.mean([len(set(a) & set(b)) / K for a, b in zip(ann_got, exact_got, strict=True)])
    )
    assert exact_recall >= 0.99, "exact store search disagrees with numpy brute force"
    assert ann_recall >= 0.8, f"IVF_HNSW_SQ recall@10 is {ann_recall:.3f}"

    size = len(passages)
    rows = [
        [np_label, size, n, p50(np_lat), p95(np_lat), 1.0, "-"],
        ["store.search, exact", size, n, p50(exact_lat), p95(exact_lat), exact_recall, "-"],
        ["store.search, IVF_HNSW_SQ", size, n, p50(ann_lat), p95(ann_lat), ann_recall, overlap],
    ]
    report(
        "ann_recall_locomo",
        "ANN recall@10 on e5 embeddings of LoCoMo dev",
        ["search", "rows", "questions", "p50 ms", "p95 ms", "recall@10", "overlap with exact"],
        rows,
    )
    report(
        "ann_recall_locomo",
        "e5 cost on this data",
        ["step", "value"],
        [
            ["passages embedded (batches of 64)", len(passages)],
            ["passages/s", len(passages) / embed_s],
            ["query embedding ms (mean)", query_embed_ms],
            ["IVF_HNSW_SQ build s", build_s],
        ],
    )
