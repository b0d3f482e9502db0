"""olav's own benchmark harness, run from a checkout and never shipped in the wheel:
``python -m benchmarks report|perf|recall|hostile`` (``make bench`` writes docs/benchmarks.md
with ``report``). It imports olav as a library; olav never imports it. The evaluations that
ship with olav stay there: the golden suite (olav/memory/golden/, ``olav memory calibrate``,
``olav bench golden``) and ``olav bench steer|toolcalls|rerank`` (olav/bench/)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# the folder that holds this package: a Python child process that imports ``benchmarks``
# needs it on its path, whatever its working directory
CHECKOUT = Path(__file__).resolve().parent.parent


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the checkout first on ``PYTHONPATH``."""
    out = dict(os.environ if env is None else env)
    rest = out.get("PYTHONPATH", "")
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), rest) if p)
    return out
