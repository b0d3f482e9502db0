"""What the web console costs on a large memory table (``make bench``, section 9).

A workspace on the hash embedder and the scripted model whose memory table holds ``rows``
synthetic rows (:func:`benchmarks.perf_data.build_table`, indexed as ``maintain()`` indexes
it) and the template guides. ``olav serve --port 0`` serves it in its own process; a console
session (the login form's cookie) asks, each request timed from sending it to the last byte on
127.0.0.1:

- **the memory page**: ``GET /memory`` (the newest rows first), ``/memory?q=…`` (the hybrid
  search, a distinct request each time) and ``/memory?category=…&created_from=…`` (filters);
- **the Why page over recall**: ``GET /why?q=…`` against ``Recaller.recall(dry_run=True)``
  in this process on the same table (what ``olav memory why`` runs), each request in turn
  with the page, so both are timed under the same load; the difference of the medians is what
  the page adds (its HTTP round trip included).

Runnable alone: ``python -m benchmarks.console [--rows N] [--requests N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.timing import WARMUP, ms

ROWS = 100_000
REQUESTS = 30
MEMORY_PAGES = ("memory_newest", "memory_search", "memory_filtered")
TARGETS = {"memory_p95_ms": 300, "why_added_ms": 20}


def _fill(ws: Any, rows: int) -> dict[str, float]:
    """Replace the workspace's memory table by ``rows`` synthetic rows, then import the
    template guides again (the Why page has them to decide on)."""
    from benchmarks.perf_data import EN_WORDS, ZH_WORDS, build_table
    from olav.memory.ingest.guides import find_guides, import_guides
    from olav.memory.store.embedders import make_embedder

    embedder = make_embedder(ws.config)
    shutil.rmtree(ws.memory_path, ignore_errors=True)
    words = embedder.embed_passages(EN_WORDS + ZH_WORDS)
    store, _vectors, timings = build_table(Path(ws.memory_path), embedder, words, rows, ws.config)
    import_guides(store, find_guides(Path(ws.root)), base=Path(ws.root))
    return timings


def _timed(client: Any, path: str, params: dict[str, str]) -> float:
    started = time.perf_counter()
    got = client.get(path, params=params)
    took = time.perf_counter() - started
    if got.status_code != 200:
        raise RuntimeError(f"GET {path} {params} answered {got.status_code}: {got.text[:300]}")
    return took


def _series(client: Any, path: str, params: list[dict[str, str]]) -> list[float]:
    """Each request once after WARMUP of them untimed."""
    for p in params[:WARMUP]:
        _timed(client, path, p)
    return [_timed(client, path, p) for p in params[WARMUP:]]


def run_console_bench(rows: int = ROWS, requests: int = REQUESTS) -> dict[str, Any]:
    import httpx

    from benchmarks.perf_data import make_queries
    from benchmarks.serve import _start
    from benchmarks.threads import echo_workspace
    from olav.access.tokens import TokenStore
    from olav.llm.tiers import model_tier
    from olav.memory.recall.recaller import Recaller
    from olav.memory.store.table import MemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        ws = echo_workspace(root, turns=4)
        build = _fill(ws, rows)
        _, token = TokenStore.for_workspace(ws).create("bench")
        queries = make_queries(2 * (requests + WARMUP))
        since = (datetime.now(UTC) - timedelta(days=20)).date().isoformat()
        proc, url = _start(root)
        try:
            with httpx.Client(base_url=url, timeout=120) as client:
                login = client.post("/login", data={"token": token}, headers={"Origin": url})
                if login.status_code != 303:
                    raise RuntimeError(f"the console login answered {login.status_code}")
                n = requests + WARMUP
                newest = _series(client, "/memory", [{}] * n)
                searched = _series(client, "/memory", [{"q": q} for q in queries[:n]])
                filters = {"category": "fact", "created_from": since}
                filtered = _series(client, "/memory", [filters] * n)
                store = MemoryStore.for_workspace(ws)
                cfg = ws.config
                tier = model_tier(cfg["llm.model"], cfg["llm.tier"])
                page, recall = [], []
                for j, q in enumerate(queries[n : 2 * n]):
                    took_page = _timed(client, "/why", {"q": q, "agent": "core"})
                    started = time.perf_counter()
                    Recaller.for_config(store, cfg, agent="core", tier=tier).recall(q, dry_run=True)
                    took_recall = time.perf_counter() - started
                    if j >= WARMUP:
                        page.append(took_page)
                        recall.append(took_recall)
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    added = (statistics.median(page) - statistics.median(recall)) * 1000
    out: dict[str, Any] = {
        "rows": rows,
        "requests": requests,
        "build_s": build,
        "memory_newest": ms(newest),
        "memory_search": ms(searched),
        "memory_filtered": ms(filtered),
        "why_page": ms(page),
        "recall_dry_run": ms(recall),
        "why_added_ms": round(added, 2),
        "targets": TARGETS,
    }
    worst = max(out[k]["p95_ms"] for k in MEMORY_PAGES)
    out["met"] = {
        "memory": worst <= TARGETS["memory_p95_ms"],
        "why": added <= TARGETS["why_added_ms"],
    }
    return out


def markdown_console(r: dict[str, Any]) -> str:
    ok = {True: "yes", False: "**no**"}
    rows = [
        ("`GET /memory` (the newest rows first, 50 a page)", r["memory_newest"]),
        ("`GET /memory?q=…` (hybrid search, a new request each time)", r["memory_search"]),
        ("`GET /memory?category=fact&created_from=…` (filters)", r["memory_filtered"]),
        ("`GET /why?q=…` (the whole page)", r["why_page"]),
        ("`Recaller.recall(dry_run=True)` in process (`olav memory why`)", r["recall_dry_run"]),
    ]
    worst = max(r[k]["p95_ms"] for k in MEMORY_PAGES)
    return "\n".join(
        [
            f"{r['rows']:,} synthetic memory rows and the template guides, the hash embedder "
            f"(relevance off), {r['requests']} timed requests per row after {WARMUP} untimed; "
            "`olav serve --port 0` in its own process, a console session's cookie, each "
            "request timed from sending it to the last byte on 127.0.0.1. The recall and the "
            "page take turns, one request each.",
            "",
            "| | p50 ms | p95 ms |",
            "|---|---|---|",
            *(f"| {what} | {m['p50_ms']} | {m['p95_ms']} |" for what, m in rows),
            "",
            "| target | measured | met |",
            "|---|---|---|",
            f"| a memory page in ≤ {TARGETS['memory_p95_ms']} ms p95 at {r['rows']:,} rows | "
            f"{worst} ms (the slowest of the three) | {ok[r['met']['memory']]} |",
            f"| the Why page adds ≤ {TARGETS['why_added_ms']} ms p50 to the dry-run recall | "
            f"{r['why_added_ms']} ms | {ok[r['met']['why']]} |",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=ROWS, help="memory rows (default 100000)")
    parser.add_argument("--requests", type=int, default=REQUESTS, help="timed requests per row")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run_console_bench(args.rows, args.requests)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(markdown_console(report))


if __name__ == "__main__":
    main()
