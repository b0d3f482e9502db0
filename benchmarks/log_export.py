"""How fast audited runs become a dataset (``olav log export``).

An audit database is filled with synthetic runs in bulk SQL that matches the schema the
recorder writes (olav.audit.db, migrations 1-4): each run is a person's message, two tool
calls with their results (a query, then a file export) and the answer (6 steps), with the
recall block that was injected, a run_stats event, and every tenth run salvaged. Then it
measures reading them back with their details, turning them into OpenAI lines with the
validator (no I/O), and the whole export to a file.

Runnable alone: ``python -m benchmarks.log_export [--runs N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 10_000
STEPS_PER_RUN = 6
# a run is an export line of about this size: enough rows to make the timing honest
_RESULT = "| hostname | site | role | state |\n" + "| sh1-border01 | sh1 | border | up |\n" * 8
_BLOCK = (
    "<relevant-memories>\nMemories recalled for this request.\n\n[directive: export_when_"
    "asked_to_save]\n"
    + "When the user asks to save, call format_and_export. " * 12
    + "\n</relevant-memories>"
)

_FILL = [
    """
    INSERT INTO runs (id, agent, session_id, status, query, model, started_at, ended_at,
                      outcome, thread_id)
    SELECT printf('run%08d', i), CASE WHEN i % 3 = 0 THEN 'netops' ELSE 'core' END,
           printf('s%06d', i // 4), 'completed',
           printf('save the border devices of site sh%d to a file (request %d)', i % 5, i),
           'qwen3:8b',
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30),
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30 + 7),
           'completed', printf('t%06d', i // 4)
    FROM range($n) t(i)
    """,
    """
    INSERT INTO steps (run_id, seq, role, content, tool_calls, tool_call_id, name, status,
                       created_at)
    SELECT printf('run%08d', i), s,
           CASE s WHEN 0 THEN 'user' WHEN 2 THEN 'tool' WHEN 4 THEN 'tool' ELSE 'assistant' END,
           CASE s WHEN 0 THEN printf('save the border devices of site sh%d to a file', i % 5)
                  WHEN 2 THEN $result
                  WHEN 4 THEN printf('Saved exports/border_%d.md (412 bytes)', i)
                  WHEN 5 THEN printf('Saved exports/border_%d.md with 8 devices.', i)
                  ELSE '' END,
           CASE s
             WHEN 1 THEN to_json([{'id': printf('call_%d_1', i), 'name': 'db_query',
                  'args': {'sql': printf('SELECT * FROM devices WHERE site = ''sh%d''', i % 5)}}])
             WHEN 3 THEN to_json([{'id': printf('call_%d_3', i), 'name': 'format_and_export',
                  'args': {'data': $result, 'format': 'md',
                           'filename': printf('border_%d.md', i)}}])
           END,
           CASE s WHEN 2 THEN printf('call_%d_1', i) WHEN 4 THEN printf('call_%d_3', i) END,
           CASE s WHEN 2 THEN 'db_query' WHEN 4 THEN 'format_and_export' END,
           CASE WHEN s IN (2, 4) THEN 'success' END,
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30 + s)
    FROM range($n) t(i), range(6) q(s)
    """,
    """
    INSERT INTO tool_calls (id, run_id, agent, tool, args, result, status, duration_ms,
                            created_at)
    SELECT printf('tc%08d_%d', i, k), printf('run%08d', i), 'core',
           CASE k WHEN 0 THEN 'db_query' ELSE 'format_and_export' END, '{}',
           $result, 'success', 3.5, TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30 + k)
    FROM range($n) t(i), range(2) q(k)
    """,
    """
    INSERT INTO messages (id, run_id, role, content, created_at)
    SELECT printf('m%08d_%d', i, k), printf('run%08d', i),
           CASE k WHEN 0 THEN 'user' ELSE 'assistant' END, 'text',
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30 + k * 6)
    FROM range($n) t(i), range(2) q(k)
    """,
    """
    INSERT INTO recalls (id, run_id, agent, query, candidates, injected, latency_ms, created_at,
                         block)
    SELECT printf('rc%08d', i), printf('run%08d', i),
           CASE WHEN i % 3 = 0 THEN 'netops' ELSE 'core' END, 'q', '[]',
           '["guide_core_export_when_asked_to_save", "guide_core_audit_report_format"]', 4.2,
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30), $block
    FROM range($n) t(i)
    """,
    """
    INSERT INTO events (id, run_id, kind, detail, created_at)
    SELECT printf('e%08d', i), printf('run%08d', i), 'run_stats',
           '{"salvaged": [], "nudged": false, "loop_stopped": null, "model_calls": 3, '
           || '"tokens_in": 2400, "tokens_out": 180}',
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30 + 6)
    FROM range($n) t(i)
    UNION ALL
    SELECT printf('es%08d', i), printf('run%08d', i), 'salvaged',
           '{"agent": "core", "tool": "format_and_export", "family": "hermes"}',
           TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_seconds(i * 30 + 2)
    FROM range($n) t(i) WHERE i % 10 = 0
    """,
]


def fill(path: Path, runs: int = RUNS) -> float:
    """Create the audit database at ``path`` with ``runs`` synthetic runs; the seconds."""
    from olav.audit.db import connect, migrate

    started = time.perf_counter()
    migrate(path)
    with connect(path) as con:
        values = {"n": runs, "result": _RESULT, "block": _BLOCK}
        for sql in _FILL:
            con.execute(sql, {k: v for k, v in values.items() if f"${k}" in sql})
    return time.perf_counter() - started


def catalog() -> dict[str, dict[str, Any]]:
    """Every tool's function spec, as `olav log export` builds it."""
    from olav.audit.export import tool_catalog
    from olav.compose.tools import LEARNING_TOOLS
    from olav.runtime.tools import registry

    return tool_catalog({**registry._SPECS, **LEARNING_TOOLS})


def run_log_export(runs: int = RUNS, workdir: Path | None = None) -> dict[str, Any]:
    """Fill an audit database with ``runs`` runs and time reading and exporting them."""
    from olav.audit.export import (
        ExportOptions,
        export_runs,
        iter_runs,
        list_runs,
        openai_line,
        validate_openai,
    )

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "audit.duckdb"
        fill_s = fill(path, runs)
        tools = catalog()
        started = time.perf_counter()
        listed = list_runs(path, newest_first=False)
        list_s = time.perf_counter() - started
        loaded = list(iter_runs(path, listed))
        read_s = time.perf_counter() - started
        steps = sum(len(r.steps) for r in loaded)
        started = time.perf_counter()
        valid = sum(validate_openai(openai_line(r, tools)) is None for r in loaded)
        convert_s = time.perf_counter() - started
        del loaded, listed
        target = Path(tmp) / "runs.jsonl"
        summary = export_runs(path, target, opts=ExportOptions(format="openai"), catalog=tools)
        size = target.stat().st_size
    export_s = summary.seconds
    return {
        "runs": runs,
        "steps": steps,
        "fill_s": round(fill_s, 3),
        "list_s": round(list_s, 3),
        "read_s": round(read_s, 3),
        "read_runs_per_s": round(runs / read_s, 1) if read_s else None,
        "convert_validate_s": round(convert_s, 3),
        "convert_runs_per_s": round(runs / convert_s, 1) if convert_s else None,
        "valid": valid,
        "export_s": round(export_s, 3),
        "export_runs_per_s": round(summary.exported / export_s, 1) if export_s else None,
        "exported": summary.exported,
        "skipped": sum(summary.skipped.values()),
        "bytes": size,
    }


def markdown_log_export(report: dict[str, Any]) -> str:
    """The report as a Markdown section for docs/benchmarks.md."""
    r = report
    return "\n".join(
        [
            f"{r['runs']:,} synthetic runs ({r['steps']:,} steps: a request, two tool calls "
            "with their results, the answer; a recall block and a run_stats event each) in a "
            "fresh audit.duckdb, exported as OpenAI chat fine-tuning lines.",
            "",
            "| stage | seconds | runs/s |",
            "|---|---|---|",
            f"| read runs with their details (list + steps, recalls, events) | {r['read_s']} "
            f"| {r['read_runs_per_s']:,} |",
            f"| build and validate the lines (no I/O) | {r['convert_validate_s']} "
            f"| {r['convert_runs_per_s']:,} |",
            f"| `olav log export` to a file (all of it) | {r['export_s']} "
            f"| {r['export_runs_per_s']:,} |",
            "",
            f"{r['exported']:,} runs exported, {r['skipped']} skipped, "
            f"{r['bytes'] / 1e6:.1f} MB written; filling the database took {r['fill_s']} s.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=RUNS, help="synthetic runs (default 10000)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run_log_export(args.runs)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(markdown_log_export(report))


if __name__ == "__main__":
    main()
