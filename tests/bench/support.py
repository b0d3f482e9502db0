"""What the memory benchmarks share (tests/bench/test_bench_*.py): Markdown tables merged into
``OLAV_BENCH_OUT``, latency percentiles, and random English/Chinese text."""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import perf
from benchmarks.perf import EN_WORDS, ZH_WORDS

K = 10
WARMUP = 3


# -- reporting ---------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    return "None" if value is None else perf.fmt(value)


def bench_env(name: str) -> str | None:
    """A benchmark setting from the environment (tests/conftest.py keeps OLAV_BENCH_* and
    OLAV_LOCOMO)."""
    return os.environ.get(name) or None


def report(bench: str, title: str, headers: Sequence[str], rows: list[list[Any]]) -> None:
    """Print a Markdown table and merge it into the JSON file named by OLAV_BENCH_OUT, as
    ``{bench: {title: {"machine": ..., "rows": [{header: value}]}}}``."""
    where = machine()
    lines = [
        f"\n### {title}\n",
        f"_{where}_\n",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    print("\n".join(lines) + "\n")
    out = bench_env("OLAV_BENCH_OUT")
    if not out:
        return
    path = Path(out)
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            data = loaded if isinstance(loaded, dict) else {}
        except json.JSONDecodeError:
            data = {}
    data.setdefault(bench, {})[title] = {
        "machine": where,
        "rows": [dict(zip(headers, row, strict=True)) for row in rows],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def machine() -> str:
    m = perf.machine()
    omp = m["env"]["OMP_WAIT_POLICY"] or "unset"
    return f"{m['cpu_count']} CPUs, {m['cpu_model']}, load {m['load_average'][0]:.1f}, " + (
        f"OMP_WAIT_POLICY {omp}"
    )


# -- timing helpers ----------------------------------------------------------------------------


def latencies_ms(fn: Callable[[int], Any], n: int) -> list[float]:
    """Call ``fn(i)`` for WARMUP warm-ups and then ``n`` timed calls; times in ms."""
    for i in range(WARMUP):
        fn(i)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def p50(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def p95(xs: Sequence[float]) -> float:
    return float(np.percentile(np.asarray(xs), 95))


# -- random text -----------------------------------------------------------------------------


def sentence(rng: random.Random) -> str:
    n = rng.randint(8, 16)
    words = [rng.choice(ZH_WORDS) if rng.random() < 0.2 else rng.choice(EN_WORDS) for _ in range(n)]
    return " ".join(words)


def fts_query(rng: random.Random) -> str:
    words = [rng.choice(EN_WORDS), rng.choice(EN_WORDS)]
    if rng.random() < 0.3:
        words.append(rng.choice(ZH_WORDS))
    return " ".join(words)
