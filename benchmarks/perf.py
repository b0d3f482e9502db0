"""``python -m benchmarks perf``: how fast olav's memory layer is on this machine.

One run measures, in one process and on the same data:

- recall latency (p50/p95) at each table size for vector, FTS and hybrid search (precomputed
  query vectors) and for full AutoRecall (``Recaller.recall`` with the query embedded by the
  bundled e5, as the chat middleware calls it), next to a numpy brute-force top-k over the same
  vectors on one BLAS thread;
- L1 capture cost per event through ``olav.memory.ingest.capture.capture``;
- ``import_guides`` throughput with e5;
- the wall time of ``olav --help`` and ``olav memory search`` as cold subprocesses in a
  workspace made by ``olav init``;
- peak RSS of a process that opens the largest table and recalls from it.

Tables are synthetic (benchmarks.perf_data). ``run_perf`` returns a JSON-safe report and
``markdown_perf`` (benchmarks.perf_markdown) renders it for docs/benchmarks.md; the recall
measurements live in benchmarks.perf_recall, the others in benchmarks.perf_probes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# the names callers and tests use, from the modules that define them
from benchmarks.perf_data import AGENT as AGENT
from benchmarks.perf_data import EN_WORDS as EN_WORDS
from benchmarks.perf_data import SEARCH_QUERY as SEARCH_QUERY
from benchmarks.perf_data import ZH_WORDS as ZH_WORDS
from benchmarks.perf_data import build_table as build_table
from benchmarks.perf_data import make_queries as make_queries
from benchmarks.perf_data import write_guides as write_guides
from benchmarks.perf_markdown import fmt as fmt
from benchmarks.perf_markdown import machine_line as machine_line
from benchmarks.perf_markdown import markdown_perf as markdown_perf
from benchmarks.perf_markdown import recall_rows as recall_rows
from benchmarks.perf_options import PerfOptions as PerfOptions
from benchmarks.perf_probes import machine as machine
from benchmarks.perf_probes import measure_capture as measure_capture
from benchmarks.perf_probes import measure_cli as measure_cli
from benchmarks.perf_probes import measure_guides as measure_guides
from benchmarks.perf_probes import measure_rss as measure_rss
from benchmarks.perf_recall import K as K
from benchmarks.perf_recall import TimedQueries
from benchmarks.perf_recall import measure_recall as measure_recall
from benchmarks.perf_recall import numpy_topk as numpy_topk
from benchmarks.perf_recall import one_blas_thread as one_blas_thread
from benchmarks.timing import WARMUP as WARMUP

Progress = Callable[[str], None]


@dataclass
class _Run:
    """What every measurement of one ``run_perf`` shares."""

    config: Any
    tier: str
    tmp: Path
    say: Progress
    e5: Any
    word_vecs: np.ndarray
    qtexts: list[str]
    qvecs: np.ndarray


def _new_report(config: Any, sizes: list[int], opts: PerfOptions) -> dict[str, Any]:
    return {
        "machine": machine(),
        "settings": {
            "sizes": sizes,
            "queries": opts.queries,
            "guides": opts.guides,
            "captures": opts.captures,
            "k": K,
            "warmup": WARMUP,
            "tier": opts.tier,
            "ann_threshold": config["memory.ann_threshold"],
            "rrf_k": config["memory.rrf_k"],
        },
        "recall": [],
        "capture": [],
        "reply_path": [],
    }


def _measure_size(run: _Run, report: dict[str, Any], n: int, captures: int) -> Path:
    """Build a table of ``n`` memories and measure recall, capture and the reply path on it;
    return the table's path."""
    from benchmarks.waits import measure_reply_path

    say = run.say
    say(f"building {n:,} memories (and the indexes maintain() builds)")
    path = run.tmp / f"m{n}.lance"
    store, vectors, build = build_table(path, run.e5, run.word_vecs, n, run.config)
    state = store.index_state()
    say(f"recall at {n:,} memories")
    timed = TimedQueries(run.qtexts, run.qvecs)
    block = measure_recall(store, vectors, run.e5, timed, run.config, run.tier)
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
            {"memories": n, **measure_capture(store, run.e5, captures, str(n))}
        )
        say(f"the reply path at {n:,} memories")
        report["reply_path"].append(
            {"memories": n, **measure_reply_path(store, run.tmp, captures, f"r{n}", AGENT)}
        )
    return path


def _measure_cli(run: _Run, report: dict[str, Any], cli_runs: int) -> None:
    from benchmarks.waits import measure_cold, measure_first_prompt

    run.say("olav --help and olav memory search as cold subprocesses")
    report["cli"] = measure_cli(run.tmp, cli_runs)
    report["cold"] = measure_cold(run.tmp / "ws", cli_runs, SEARCH_QUERY)
    report["first_prompt"] = measure_first_prompt(run.tmp / "ws", cli_runs)


def _measure_remote(run: _Run, report: dict[str, Any]) -> None:
    """benchmarks.remote: the same table on a local S3 server."""
    from benchmarks.remote import PerfKit, run_remote

    run.say("the team table on a local S3 server, next to the local folder")
    kit = PerfKit(build_table, measure_capture, write_guides, AGENT)
    queried = (run.qtexts[WARMUP:], run.qvecs[WARMUP:])
    report["remote"] = run_remote(kit, run.e5, run.word_vecs, run.config, queried)


def _measure_rss(run: _Run, report: dict[str, Any], largest: Path, rss_recalls: int) -> None:
    from benchmarks.waits import dir_mb

    memories = report["settings"]["sizes"][-1]
    run.say(f"peak RSS of a process recalling from {memories:,} memories")
    report["rss"] = {
        "memories": memories,
        "table_mb": dir_mb(largest),
        **measure_rss(largest, rss_recalls),
    }


def run_perf(opts: PerfOptions = PerfOptions(), progress: Progress | None = None) -> dict[str, Any]:
    """Run every measurement ``opts`` asks for; return a JSON-safe report."""
    from benchmarks.waits import wait_targets
    from olav.core.config import Config
    from olav.memory.store.embedders import E5Embedder

    say = progress or (lambda msg: None)
    started = time.perf_counter()
    # lance warns on every index_stats() of a vector index unless this is decided
    os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")
    config = Config.load(None, environ={})
    sizes = sorted({int(s) for s in opts.sizes})
    if not sizes or sizes[0] < 20 or opts.queries < 1:
        raise ValueError("perf needs sizes of at least 20 rows and at least one query")
    report = _new_report(config, sizes, opts)
    say("loading e5")
    e5 = E5Embedder()
    say("embedding the vocabulary and the queries with e5")
    word_vecs = e5.embed_passages(EN_WORDS + ZH_WORDS)
    qtexts = make_queries(opts.queries + WARMUP)
    qvecs = np.vstack([e5.embed_query(q) for q in qtexts])
    tmp = Path(tempfile.mkdtemp(prefix="olav-perf-"))
    run = _Run(config, opts.tier, tmp, say, e5, word_vecs, qtexts, qvecs)
    try:
        largest: Path | None = None
        for n in sizes:
            largest = _measure_size(run, report, n, opts.captures)
        if opts.guides:
            say(f"importing {opts.guides} guides with e5")
            report["guides"] = measure_guides(tmp, e5, opts.guides)
        say("the reranker's and the judge's cost to recall")
        from benchmarks.perf_second_look import measure_second_look

        # as many requests as the recall cells time (at least 20), on up to 400 rows
        report["second_look"] = measure_second_look(
            rows=min(400, sizes[-1]), queries=max(20, opts.queries)
        )
        say("opening the audit database, and a chat run's audit")
        from benchmarks.waits import measure_audit

        report["audit"] = measure_audit(tmp, max(20, opts.queries))
        if opts.cli_runs:
            _measure_cli(run, report, opts.cli_runs)
        if opts.remote:
            _measure_remote(run, report)
        if opts.rss_recalls and largest is not None:
            _measure_rss(run, report, largest, opts.rss_recalls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report["targets"] = wait_targets(report)
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
