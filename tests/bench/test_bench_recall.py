"""AutoRecall overhead per model call, at 1k, 10k and 100k memories (issue: agent runtime).

Full AutoRecall = embed the query with the bundled e5 embedder + hybrid search with
pre-filters + selection + rendering (+ the access_count bump when injecting). In the same run
it is compared with a bare vector search over the same table with a precomputed query vector.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from olav.memory.policy import DEFAULTS
from olav.memory.recall.recaller import Recaller, RecallOptions
from olav.memory.store.embedders import CachedEmbedder, E5Embedder
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.search import SearchTuning
from olav.memory.store.table import MemoryStore
from tests.bench.support import fts_query, latencies_ms, p50, p95, report, sentence

pytestmark = pytest.mark.bench
SIZES = tuple(int(x) for x in os.environ.get("BENCH_RECALL_SIZES", "1000,10000,100000").split(","))
N_QUERIES = 60


def build(path: Path, embedder: E5Embedder, n: int, seed: int = 3) -> MemoryStore:
    store = MemoryStore(path, embedder, tuning=SearchTuning(ann_threshold=50_000))
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    cats = list(DEFAULTS.quotas)
    batch: list[MemoryRecord] = []
    for i in range(n):
        v = nrng.standard_normal(embedder.dim).astype(np.float32)
        batch.append(
            MemoryRecord(
                id=f"m{i}",
                text=sentence(rng),
                category=cats[i % len(cats)],
                scope=("global", "netops", "coder")[i % 3],
                vector=list(v / np.linalg.norm(v)),
            )
        )
        if len(batch) == 5000:
            store.upsert(batch)
            batch = []
    store.upsert(batch)
    store.maintain(force_optimize=True)
    return store


def measure(store: MemoryStore, e5: E5Embedder, queries: list[str]) -> list[float]:
    qv = e5.embed_query("warm up")
    scopes = ["netops", "global"]
    bare = latencies_ms(
        lambda i: store.search(
            "",
            mode="vector",
            k=10,
            query_vector=qv,
            filter=SearchFilter(scopes=scopes, reader=EVERYONE),
        ),
        N_QUERIES,
    )
    store.embedder = CachedEmbedder(e5, size=0)  # no cache: every query is embedded
    dry = Recaller(store, agent="netops", options=RecallOptions(tier="medium", bump_access=False))
    full = Recaller(store, agent="netops", options=RecallOptions(tier="medium"))
    recall_dry = latencies_ms(lambda i: dry.recall(queries[i], dry_run=True), N_QUERIES)
    recall_full = latencies_ms(lambda i: full.recall(queries[i]), N_QUERIES)
    full.flush()
    embed = latencies_ms(lambda i: e5.embed_query(queries[i]), N_QUERIES)
    assert full.recall(queries[0]).injected, "recall injected nothing"
    return [
        p50(bare),
        p95(bare),
        p50(embed),
        p50(recall_dry),
        p95(recall_dry),
        p50(recall_full),
        p95(recall_full),
        p50(recall_full) / p50(bare),
    ]


@pytest.mark.timeout(2400)
def test_bench_autorecall_overhead(tmp_path: Path) -> None:
    e5 = E5Embedder()
    rng = random.Random(11)
    queries = [fts_query(rng) + f" {i}" for i in range(N_QUERIES + 10)]
    rows = [[n, *measure(build(tmp_path / f"m{n}.lance", e5, n), e5, queries)] for n in SIZES]
    report(
        "autorecall",
        "AutoRecall overhead per model call (ms)",
        [
            "memories",
            "bare vector p50",
            "bare vector p95",
            "e5 query embed p50",
            "recall (no bump) p50",
            "recall (no bump) p95",
            "full AutoRecall p50",
            "full AutoRecall p95",
            "full / bare",
        ],
        rows,
    )


@pytest.mark.timeout(600)
def test_bench_l1_capture_cost(tmp_path: Path) -> None:
    """L1 capture per write event: one redaction, one e5 embedding and one LanceDB write."""
    from olav.memory.ingest.capture import ToolEvent, capture

    e5 = E5Embedder()
    store = MemoryStore(tmp_path / "m.lance", e5)
    store.upsert(
        [MemoryRecord(id=f"seed{i}", text=f"seed row {i}", category="fact") for i in range(1000)]
    )

    counter = iter(range(10**6))  # every call a new operation (a replay would store nothing)

    def one(_: int) -> None:
        i = next(counter)
        ev = ToolEvent(
            "services",
            "register_service",
            {"name": f"svc_{i}", "port": 8000 + i, "token": "s3cr3t"},
            f"registered svc_{i} on 10.0.0.{i % 250}:{8000 + i}",
            "success",
        )
        assert capture(store, [ev], question="", run_id=f"r{i}")

    times = latencies_ms(one, 40)
    embed = latencies_ms(lambda i: e5.embed_passages([f"Action: register_service {i}"]), 40)
    report(
        "l1_capture",
        "L1 capture cost per event (ms), 1k-row table",
        ["capture p50", "capture p95", "e5 passage embed p50", "write share of p50"],
        [[p50(times), p95(times), p50(embed), 1 - p50(embed) / p50(times)]],
    )
