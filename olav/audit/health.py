"""What the console's Health page charts, read from audit.duckdb, per UTC day: the runs by
outcome, how many runs had a memory block injected, the blocks themselves (the caller counts
their tokens with the one token estimate, which lives in the memory layer) and the recalls'
latency p50 and p95.

Which runs count is the caller's :class:`~olav.audit.export.RunFilter` (the console's
visibility rule: the threads an operator may see). A recall counts when its run does; a recall
recorded outside any run only when ``unattributed`` is true (the workspace's own operator).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

from olav.audit.db import connect
from olav.audit.export import RunFilter, runs_sql


def _day(column: str) -> str:
    return f"CAST(({column}) AT TIME ZONE 'UTC' AS DATE)"


@dataclass(frozen=True, slots=True)
class HealthRows:
    outcomes: list[tuple[date, str, int]]  # (day, outcome, runs)
    injection: list[tuple[date, int, int]]  # (day, runs, runs that got a memory block)
    blocks: list[tuple[date, str]]  # (day, block) of every recall that injected one
    latency: list[tuple[date, int, float, float]]  # (day, recalls, p50 ms, p95 ms)


def health_rows(
    path: Path,
    since: datetime,
    visible: RunFilter = RunFilter(),
    *,
    unattributed: bool = True,
    read_only: bool = False,
) -> HealthRows:
    """The day-by-day rows from ``since`` on, of the runs ``visible`` keeps (and of their
    recalls); ``read_only`` as for :func:`olav.audit.export.list_runs` (False in the server,
    which writes the audit too)."""
    window, window_params = runs_sql(replace(visible, since=since), "id, outcome, started_at")
    anyone, anyone_params = runs_sql(replace(visible, since=None))
    recall_where = (
        f"created_at >= ? AND (run_id IN (SELECT id FROM ({anyone}) AS a) "
        "OR (run_id IS NULL AND ?))"
    )
    recall_params: list[Any] = [since, *anyone_params, unattributed]
    with connect(path, read_only=read_only) as con:
        outcomes = con.execute(
            f"WITH v AS ({window}) SELECT {_day('started_at')} AS day, outcome, count(*) "
            "FROM v GROUP BY ALL ORDER BY day, outcome",
            window_params,
        ).fetchall()
        injection = con.execute(
            f"WITH v AS ({window}), b AS (SELECT DISTINCT run_id FROM recalls "
            "WHERE coalesce(json_array_length(injected), 0) > 0) "
            f"SELECT {_day('v.started_at')} AS day, count(*), count(b.run_id) "
            "FROM v LEFT JOIN b ON b.run_id = v.id GROUP BY day ORDER BY day",
            window_params,
        ).fetchall()
        blocks = con.execute(
            f"SELECT {_day('created_at')} AS day, block FROM recalls WHERE {recall_where} "
            "AND coalesce(block, '') <> '' ORDER BY created_at",
            recall_params,
        ).fetchall()
        latency = con.execute(
            f"SELECT {_day('created_at')} AS day, count(*), quantile_cont(latency_ms, 0.5), "
            f"quantile_cont(latency_ms, 0.95) FROM recalls WHERE {recall_where} "
            "AND latency_ms IS NOT NULL GROUP BY day ORDER BY day",
            recall_params,
        ).fetchall()
    return HealthRows(
        outcomes=[(d, str(o), int(n)) for d, o, n in outcomes],
        injection=[(d, int(n), int(b)) for d, n, b in injection],
        blocks=[(d, str(b)) for d, b in blocks],
        latency=[(d, int(n), float(p50), float(p95)) for d, n, p50, p95 in latency],
    )
