"""What a second look costs recall (``python -m benchmarks perf``): the reranker's round trip and
the judge's call, with the serving side's own time subtracted, so what is left is olav's part.

- **Reranker:** a local server answering the rerank protocol with fixed scores, timing its own
  handling of each request (reading the body, answering). Reported: recall p50/p95 without a
  second look, with the reranker, the server's own time, and the difference less that time.
- **Judge:** the chat model is a scripted one that answers at once, so the judge's cost is the
  prompt, the deadline thread and the parsing. A real model's call adds its own latency.

The store is synthetic (hash vectors, fixed floors), so the numbers are about the second look's
overhead, not about search.
"""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROWS = 400
QUERIES = 60
WARMUP = 5


@contextmanager
def _rerank_server() -> Iterator[tuple[str, list[float]]]:
    """A rerank endpoint answering every document 0.5; yields its URL and its handling ms."""
    handled: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()  # as a real server does: no Nagle wait on the answer's writes
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            started = time.perf_counter()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            docs = body.get("documents") or []
            data = json.dumps(
                {"results": [{"index": i, "relevance_score": 0.5} for i in range(len(docs))]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            handled.append((time.perf_counter() - started) * 1000)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handled
    finally:
        server.shutdown()
        server.server_close()


def _pct(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2)}


def measure_second_look(rows: int = ROWS, queries: int = QUERIES) -> dict[str, Any]:
    from olav.llm.models import ScriptedChatModel
    from olav.memory.recall.calibration import parse_floors
    from olav.memory.recall.judge import Judge
    from olav.memory.recall.recaller import Recaller, RecallOptions
    from olav.memory.recall.relevance import load_background
    from olav.memory.recall.rerank import Reranker
    from olav.memory.recall.rerank_judge import RerankFloors, SecondLook
    from olav.memory.store.embedders import HashEmbedder
    from olav.memory.store.schema import MemoryRecord
    from olav.memory.store.table import MemoryStore

    words = [
        "nginx",
        "kafka",
        "ospf",
        "bgp",
        "backup",
        "restore",
        "rotate",
        "logs",
        "certificate",
        "vlan",
        "dns",
        "ntp",
    ]
    with tempfile.TemporaryDirectory(prefix="olav-perf-look-") as tmp:
        emb = HashEmbedder("hash-64")
        store = MemoryStore(Path(tmp) / "memory.lance", emb)
        store.upsert(
            [
                MemoryRecord(
                    id=f"fact_{i}",
                    text=f"{words[i % 12]} {words[(i * 7) % 12]} note {i}: how the team does it",
                    category="fact",
                    scope="core",
                    origin="user",
                )
                for i in range(rows)
            ]
        )
        floors = parse_floors("-1,-1,-1,1,1,inf")
        background = load_background(emb, Path(tmp) / "cache")
        texts = [f"how do we {words[i % 12]} the {words[(i * 5) % 12]}" for i in range(queries)]

        def timed(look: Any) -> list[float]:
            rec = Recaller(
                store,
                agent="core",
                options=RecallOptions(bump_access=False),
                floors=floors,
                background=background,
                second_look=look,
            )
            for q in texts[:WARMUP]:
                rec.recall(q, dry_run=True)
            return [rec.recall(q, dry_run=True).latency_ms for q in texts]

        plain = timed(None)
        with _rerank_server() as (url, handled):
            reranker = Reranker(url, timeout_ms=5000)
            with_rerank = timed(SecondLook(reranker=reranker, floors=RerankFloors(0.9, 0.05)))
            reranker.close()
            served = handled[WARMUP:]
        verdicts = [{"content": '{"apply": []}'}] * (queries + WARMUP)
        judge = Judge(ScriptedChatModel(turns=verdicts), timeout_ms=5000)
        with_judge = timed(SecondLook(judge=judge, floors=RerankFloors.off(), band=10.0))
    base, rr, jd, srv = _pct(plain), _pct(with_rerank), _pct(with_judge), _pct(served)
    return {
        "rows": rows,
        "queries": queries,
        "recall_ms": base,
        "with_reranker_ms": rr,
        "reranker_server_ms": srv,
        "reranker_overhead_ms": {k: round(rr[k] - base[k] - srv[k], 2) for k in ("p50", "p95")},
        "with_judge_ms": jd,
        "judge_overhead_ms": {k: round(jd[k] - base[k], 2) for k in ("p50", "p95")},
    }


def markdown_second_look(r: dict[str, Any]) -> str:
    lines = [
        f"Recall over {r['rows']} synthetic rows, {r['queries']} requests, in process "
        "(p50 / p95 ms). The reranker's server time and the judge's model time are not olav's.",
        "",
        "| | p50 ms | p95 ms |",
        "|---|---|---|",
    ]
    for label, key in (
        ("recall, no second look", "recall_ms"),
        ("recall with the reranker (one HTTP round trip)", "with_reranker_ms"),
        ("the rerank server's own handling", "reranker_server_ms"),
        (
            "**the reranker's cost to olav** (difference less the server's time)",
            "reranker_overhead_ms",
        ),
        ("recall with the judge (a model that answers at once)", "with_judge_ms"),
        ("**the judge's cost to olav** (prompt, deadline, parsing)", "judge_overhead_ms"),
    ):
        lines.append(f"| {label} | {r[key]['p50']:.2f} | {r[key]['p95']:.2f} |")
    return "\n".join(lines)
