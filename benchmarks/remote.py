"""Remote cases of ``python -m benchmarks perf --remote``: the same memory table on a local
S3-protocol server next to the local folder, in one run, and the cost of 1, 3 and 10 concurrent
writers.

The server is ``moto`` in server mode (installed with olav's dev extras), started on
127.0.0.1 for the run, so the numbers measure olav and LanceDB over HTTP without a network's
round trips; a real bucket adds its latency to every request.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from olav.core.errors import OlavError
from olav.memory.store.filters import SearchFilter
from olav.memory.store.remote import MemoryLocation
from olav.memory.store.scopes import EVERYONE

WRITERS = (1, 3, 10)
WHOLE = SearchFilter(reader=EVERYONE)  # the benchmark's own table, every live row


@dataclass(frozen=True)
class PerfKit:
    """What benchmarks.perf lends this module (it imports this one, not the other way):
    its table builder, its capture measurement and its guide writer."""

    build_table: Callable[..., Any]
    measure_capture: Callable[..., dict[str, Any]]
    write_guides: Callable[[Path, int], list[Path]]
    agent: str


WRITES_EACH = 10

WRITER = """
import json, sys, time
from olav.memory.store.embedders import HashEmbedder
from olav.memory.store.remote import MemoryLocation
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.table import MemoryStore
from olav.memory.store import writes

loc = MemoryLocation(sys.argv[1], json.loads(sys.argv[2]), 1.0)
me, n, start = sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
store = MemoryStore(loc, HashEmbedder("hash-64"))
while time.time() < start:
    time.sleep(0.001)
lat = []
for i in range(n):
    t0 = time.perf_counter()
    store.upsert([MemoryRecord(id=f"w{me}_{i}", text=f"writer {me} event {i}", category="fact")])
    lat.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"lat": lat, "retries": writes.stats["retries"]}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_s3() -> Iterator[MemoryLocation]:
    """A moto S3 server on 127.0.0.1 with a fresh bucket, for the length of the block."""
    try:
        import boto3  # noqa: F401
        import moto  # noqa: F401
    except ImportError:
        raise OlavError(
            "the remote benchmark needs moto's S3 server", hint="Install olav's dev extras"
        ) from None
    for key, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(key, value)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise OlavError("the local S3 server did not start") from None
                time.sleep(0.05)
        endpoint = f"http://127.0.0.1:{port}"
        loc = MemoryLocation(
            "s3://olav-bench/perf",
            {"endpoint": endpoint, "allow_http": "true", "region": "us-east-1"},
            refresh_seconds=1.0,  # the memory.refresh_seconds default
        )
        from olav.memory.store.remote import s3_client

        s3_client(loc).create_bucket(Bucket="olav-bench")
        yield loc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _timed(fn: Callable[[int], Any], n: int, warmup: int = 3) -> list[float]:
    out = []
    for j in range(warmup + n):
        t0 = time.perf_counter()
        fn(j)
        if j >= warmup:
            out.append((time.perf_counter() - t0) * 1000.0)
    return out


def _stats(xs: list[float]) -> dict[str, Any]:
    arr = np.asarray(xs or [0.0])
    return {
        "p50": round(float(np.percentile(arr, 50)), 2),
        "p95": round(float(np.percentile(arr, 95)), 2),
        "n": len(xs),
    }


def measure_store(
    kit: PerfKit, store: Any, queries: list[str], qvecs: np.ndarray, e5: Any
) -> dict[str, Any]:
    """Hybrid search (vector precomputed), AutoRecall (dry run, e5 included) and capture."""
    from olav.memory.recall.recaller import Recaller, RecallOptions

    def search(j: int) -> None:
        store.search(
            queries[j % len(queries)], query_vector=qvecs[j % len(queries)], k=10, filter=WHOLE
        )

    recaller = Recaller(store, agent=kit.agent, options=RecallOptions(bump_access=False))
    return {
        "hybrid": _stats(_timed(search, len(queries))),
        "autorecall": _stats(
            _timed(lambda j: recaller.recall(queries[j % len(queries)]), len(queries))
        ),
        "capture": kit.measure_capture(store, e5, 10, uuid.uuid4().hex[:6]),
    }


def measure_import(kit: PerfKit, location: Any, e5: Any, root: Path, n: int) -> dict[str, Any]:
    from olav.memory.ingest.guides import import_guides
    from olav.memory.store.table import MemoryStore

    files = kit.write_guides(root / "guides", n)
    store = MemoryStore(location, e5)
    t0 = time.perf_counter()
    import_guides(store, files, base=root / "guides", prune_under=root / "guides")
    seconds = time.perf_counter() - t0
    return {"guides": n, "seconds": round(seconds, 2), "guides_per_s": round(n / seconds, 1)}


def measure_writers(loc: MemoryLocation, counts: tuple[int, ...] = WRITERS) -> list[dict]:
    """``n`` processes each upsert WRITES_EACH rows into one fresh remote table at once."""
    out = []
    for n in counts:
        table = MemoryLocation(f"{loc.uri}/writers{n}", loc.storage_options, loc.refresh_seconds)
        from olav.memory.store.embedders import HashEmbedder
        from olav.memory.store.table import MemoryStore

        MemoryStore(table, HashEmbedder("hash-64"))  # created before the writers start
        start = time.time() + 3.0 + 0.3 * n  # every writer has imported lancedb by then
        args = [table.uri, json.dumps(table.storage_options)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, *args, str(i), str(WRITES_EACH), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(n)
        ]
        lat: list[float] = []
        retries = 0
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise OlavError(f"a benchmark writer failed: {stderr.strip()[-300:]}")
            result = json.loads(stdout.strip().splitlines()[-1])
            lat += result["lat"]
            retries += result["retries"]
        store = MemoryStore(table, HashEmbedder("hash-64"))
        from olav.memory.store.filters import SearchFilter
        from olav.memory.store.scopes import EVERYONE

        every = SearchFilter(reader=EVERYONE, include_invalid=True)
        ids = store.values(["id"], every).column("id").to_pylist()
        out.append(
            {
                "writers": n,
                "writes": n * WRITES_EACH,
                "rows": len(ids),
                "duplicates": len(ids) - len(set(ids)),
                "commit_retries": retries,
                **_stats(lat),
            }
        )
    return out


def run_remote(
    kit: PerfKit, e5: Any, word_vecs: np.ndarray, config: Any, queries: tuple[list[str], Any]
) -> dict[str, Any]:
    """Local folder and local S3 server side by side: a 1,000-row table each. ``queries``
    holds the query texts and their e5 vectors."""
    texts, qvecs = queries
    n = 1000
    report: dict[str, Any] = {"memories": n, "cases": {}}
    tmp = Path(tempfile.mkdtemp(prefix="olav-perf-remote-"))
    with local_s3() as loc:
        for name, where in (("local", tmp / "local.lance"), ("remote", loc)):
            store, _vectors, build = kit.build_table(where, e5, word_vecs, n, config)
            case = {"build": build, **measure_store(kit, store, texts, qvecs, e5)}
            guides = (
                tmp / "guides.lance"
                if name == "local"
                else MemoryLocation(f"{loc.uri}/guides", loc.storage_options)
            )
            case["import"] = measure_import(kit, guides, e5, tmp / name, 50)
            report["cases"][name] = case
        report["writers"] = measure_writers(loc)
    local, remote = report["cases"]["local"], report["cases"]["remote"]
    report["ratio_autorecall_p50"] = round(
        remote["autorecall"]["p50"] / max(local["autorecall"]["p50"], 1e-9), 2
    )
    return report


def markdown_remote(block: dict[str, Any]) -> list[str]:
    rows = []
    for name, case in block["cases"].items():
        rows.append(
            f"| {name} | {case['hybrid']['p50']} | {case['hybrid']['p95']} | "
            f"{case['autorecall']['p50']} | {case['autorecall']['p95']} | "
            f"{case['capture']['p50']} | {case['import']['guides_per_s']} |"
        )
    out = [
        f"### Team table: local folder vs a local S3 server ({block['memories']:,} memories)",
        "",
        "| table | hybrid p50 | hybrid p95 | AutoRecall p50 | AutoRecall p95 | capture p50 | "
        "guides/s |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"AutoRecall remote / local (p50): {block['ratio_autorecall_p50']}×.",
        "",
        "| concurrent writers | writes | rows | duplicates | commit retries | write p50 ms | "
        "write p95 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in block["writers"]:
        out.append(
            f"| {w['writers']} | {w['writes']} | {w['rows']} | {w['duplicates']} | "
            f"{w['commit_retries']} | {w['p50']} | {w['p95']} |"
        )
    return out
