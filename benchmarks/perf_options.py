"""The options of ``python -m benchmarks perf`` (benchmarks.perf.run_perf), in a module light enough
for ``python -m benchmarks report`` to import before it runs anything."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_SIZES = (1000, 10000, 100000)


@dataclass(frozen=True, slots=True)
class PerfOptions:
    """What one ``run_perf`` measures: the table ``sizes``, the timed ``queries`` per cell,
    the ``guides`` to import (0: skip), the ``captures`` per size, the cold CLI start-ups
    (``cli_runs``, 0: skip), the recalls of the RSS probe (``rss_recalls``, 0: skip), the
    model ``tier`` and whether to measure the team table on a local S3 server (``remote``)."""

    sizes: Sequence[int] = DEFAULT_SIZES
    queries: int = 100
    guides: int = 200
    captures: int = 30
    cli_runs: int = 5
    rss_recalls: int = 20
    tier: str = "small"
    remote: bool = False
