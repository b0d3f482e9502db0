"""Benchmark of the memory layer: ANN recall on real e5 embeddings (LoCoMo).

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
from pathlib import Path

import numpy as np
import pytest

from benchmarks.perf import numpy_topk, one_blas_thread
from olav.memory.store.embedders import E5Embedder
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import MemoryStore
from tests.bench.memory_support import NEVER, recall_at_k
from tests.bench.support import (
    WARMUP,
    K,
    bench_env,
    latencies_ms,
    p50,
    p95,
    report,
)
from tests.helpers import EVERY_ROW

pytestmark = pytest.mark.bench

# the shared data folder beside the repository (../shared/data/locomo)
LOCOMO_DEFAULT = str(
    Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo_dev.json"
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

    store = MemoryStore(tmp_path / "db", e5, tuning=SearchTuning(ann_threshold=NEVER))
    for i in range(0, len(passages), 5000):
        store.upsert(
            MemoryRecord(
                id=f"t{j:06d}", text=passages[j], category="fact", vector=pvecs[j].tolist()
            )
            for j in range(i, min(i + 5000, len(passages)))
        )
    store.maintain(force_optimize=True)
    assert store.size() == len(passages)

    def run(n: int) -> tuple[list[float], list[list[int]]]:
        got: list[list[int]] = []

        def call(i: int) -> None:
            hits = store.search(
                questions[i % n], mode="vector", k=K, query_vector=qvecs[i % n], filter=EVERY_ROW
            )
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
    assert ann_recall >= 0.8, f"IVF_SQ recall@10 is {ann_recall:.3f}"

    size = len(passages)
    rows = [
        [np_label, size, n, p50(np_lat), p95(np_lat), 1.0, "-"],
        ["store.search, exact", size, n, p50(exact_lat), p95(exact_lat), exact_recall, "-"],
        ["store.search, IVF_SQ", size, n, p50(ann_lat), p95(ann_lat), ann_recall, overlap],
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
            ["IVF_SQ build s", build_s],
        ],
    )
