"""``olav bench perf``: how fast olav's memory layer is on this machine.

One run measures, in one process and on the same data:

- recall latency (p50/p95) at each table size for vector, FTS and hybrid search (precomputed
  query vectors) and for full AutoRecall (``Recaller.recall`` with the query embedded by the
  bundled e5, as the chat middleware calls it), next to a numpy brute-force top-k over the same
  vectors on one BLAS thread;
- L1 capture cost per event through ``olav.memory.capture.capture``;
- ``import_guides`` throughput with e5;
- the wall time of ``olav --help`` and ``olav memory search`` as cold subprocesses in a
  workspace made by ``olav init``;
- peak RSS of a process that opens the largest table and recalls from it.

Tables are synthetic (olav.bench.perf_data). ``run_perf`` returns a JSON-safe report and
``markdown_perf`` (olav.bench.perf_markdown) renders it for docs/benchmarks.md; the recall
measurements live in olav.bench.perf_recall, the others in olav.bench.perf_probes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# the names callers and tests use, from the modules that define them
from olav.bench.perf_data import AGENT as AGENT
from olav.bench.perf_data import EN_WORDS as EN_WORDS
from olav.bench.perf_data import SEARCH_QUERY as SEARCH_QUERY
from olav.bench.perf_data import ZH_WORDS as ZH_WORDS
from olav.bench.perf_data import build_table as build_table
from olav.bench.perf_data import make_queries as make_queries
from olav.bench.perf_data import write_guides as write_guides
from olav.bench.perf_markdown import fmt as fmt
from olav.bench.perf_markdown import machine_line as machine_line
from olav.bench.perf_markdown import markdown_perf as markdown_perf
from olav.bench.perf_markdown import recall_rows as recall_rows
from olav.bench.perf_probes import machine as machine
from olav.bench.perf_probes import measure_capture as measure_capture
from olav.bench.perf_probes import measure_cli as measure_cli
from olav.bench.perf_probes import measure_guides as measure_guides
from olav.bench.perf_probes import measure_rss as measure_rss
from olav.bench.perf_recall import K as K
from olav.bench.perf_recall import measure_recall as measure_recall
from olav.bench.perf_recall import numpy_topk as numpy_topk
from olav.bench.perf_recall import one_blas_thread as one_blas_thread
from olav.bench.timing import WARMUP as WARMUP

DEFAULT_SIZES = (1000, 10000, 100000)
Progress = Callable[[str], None]


def run_perf(
    sizes: Sequence[int] = DEFAULT_SIZES,
    queries: int = 100,
    guides: int = 200,
    progress: Progress | None = None,
    *,
    captures: int = 30,
    cli_runs: int = 5,
    rss_recalls: int = 20,
    tier: str = "small",
    remote: bool = False,
) -> dict[str, Any]:
    """Run every measurement; return a JSON-safe report. ``cli_runs=0`` skips the subprocesses
    of ``olav``; ``rss_recalls=0`` skips the RSS probe."""
    from olav.bench.waits import (
        dir_mb,
        measure_cold,
        measure_first_prompt,
        measure_reply_path,
        wait_targets,
    )
    from olav.core.config import Config
    from olav.memory.embedders import E5Embedder

    say = progress or (lambda msg: None)
    started = time.perf_counter()
    # lance warns on every index_stats() of a vector index unless this is decided
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
    config = Config.load(None, environ={})
    sizes = sorted({int(s) for s in sizes})
    if not sizes or sizes[0] < 20 or queries < 1:
        raise ValueError("perf needs sizes of at least 20 rows and at least one query")
    report: dict[str, Any] = {
        "machine": machine(),
        "settings": {
            "sizes": sizes,
            "queries": queries,
            "guides": guides,
            "captures": captures,
            "k": K,
            "warmup": WARMUP,
            "tier": tier,
            "ann_threshold": config["memory.ann_threshold"],
            "rrf_k": config["memory.rrf_k"],
        },
        "recall": [],
        "capture": [],
        "reply_path": [],
    }
    say("loading e5")
    e5 = E5Embedder()
    say("embedding the vocabulary and the queries with e5")
    word_vecs = e5.embed_passages(EN_WORDS + ZH_WORDS)
    qtexts = make_queries(queries + WARMUP)
    qvecs = np.vstack([e5.embed_query(q) for q in qtexts])
    tmp = Path(tempfile.mkdtemp(prefix="olav-perf-"))
    try:
        largest: Path | None = None
        for n in sizes:
            say(f"building {n:,} memories (and the indexes maintain() builds)")
            path = tmp / f"m{n}.lance"
            store, vectors, build = build_table(path, e5, word_vecs, n, config)
            state = store.index_state()
            say(f"recall at {n:,} memories")
            block = measure_recall(store, vectors, e5, qtexts, qvecs, config, tier)
            report["recall"].append(
                {
                    "memories": n,
                    "vector_index": (state["vector"] or {}).get("type", "none"),
                    "build": build,
                    **block,
                }
            )
            if captures:
                say(f"L1 capture into {n:,} memories")
                report["capture"].append(
                    {"memories": n, **measure_capture(store, e5, captures, str(n))}
                )
                say(f"the reply path at {n:,} memories")
                report["reply_path"].append(
                    {"memories": n, **measure_reply_path(store, tmp, captures, f"r{n}", AGENT)}
                )
            largest = path
            del store, vectors
        if guides:
            say(f"importing {guides} guides with e5")
            report["guides"] = measure_guides(tmp, e5, guides)
        if cli_runs:
            say("olav --help and olav memory search as cold subprocesses")
            report["cli"] = measure_cli(tmp, cli_runs)
            report["cold"] = measure_cold(tmp / "ws", cli_runs, SEARCH_QUERY)
            report["first_prompt"] = measure_first_prompt(tmp / "ws", cli_runs)
        if remote:  # olav.bench.remote: the same table on a local S3 server
            from olav.bench.remote import PerfKit, run_remote

            say("the team table on a local S3 server, next to the local folder")
            kit = PerfKit(build_table, measure_capture, write_guides, AGENT)
            queried = (qtexts[WARMUP:], qvecs[WARMUP:])
            report["remote"] = run_remote(kit, e5, word_vecs, config, queried)
        if rss_recalls and largest is not None:
            say(f"peak RSS of a process recalling from {sizes[-1]:,} memories")
            report["rss"] = {
                "memories": sizes[-1],
                "table_mb": dir_mb(largest),
                **measure_rss(largest, rss_recalls),
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report["targets"] = wait_targets(report)
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
