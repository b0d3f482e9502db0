"""Timing helpers shared by the speed benchmarks (benchmarks.perf, benchmarks.waits)."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

WARMUP = 3


def p50(xs: Sequence[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def p95(xs: Sequence[float]) -> float:
    return float(np.percentile(np.asarray(xs), 95)) if xs else float("nan")


def summary(xs: Sequence[float]) -> dict[str, Any]:
    return {"p50": round(p50(xs), 3), "p95": round(p95(xs), 3), "n": len(xs)}


def ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of durations in seconds, as milliseconds (two decimals)."""
    return {"p50_ms": round(p50(seconds) * 1000, 2), "p95_ms": round(p95(seconds) * 1000, 2)}


def latencies_ms(
    fn: Callable[[int], Any], n: int, after: Callable[[], Any] | None = None
) -> list[float]:
    """``fn(j)`` for j in 0..WARMUP+n-1; the first WARMUP calls are warm-ups. Returns the ``n``
    timed calls in ms. ``after`` runs, untimed, after each call."""
    out = []
    for j in range(WARMUP + n):
        t0 = time.perf_counter()
        fn(j)
        dt = (time.perf_counter() - t0) * 1000.0
        if after is not None:
            after()
        if j >= WARMUP:
            out.append(dt)
    return out


def paired_latencies_ms(
    fn: Callable[[int], Any], floor: Callable[[int], Any], n: int
) -> tuple[list[float], list[float]]:
    """``fn(j)`` and ``floor(j)`` in turn for each j, as latencies_ms times them: a ratio of
    the two is then taken under the same load, which on a shared machine moves by tens of
    percent between blocks of calls a few seconds apart."""
    out: tuple[list[float], list[float]] = ([], [])
    for j in range(WARMUP + n):
        for f, lat in ((fn, out[0]), (floor, out[1])):
            t0 = time.perf_counter()
            f(j)
            if j >= WARMUP:
                lat.append((time.perf_counter() - t0) * 1000.0)
    return out


def olav_command() -> list[str]:
    script = Path(sys.executable).with_name("olav")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from olav.cli.app import main; main()"]
