"""Read queries on audit.duckdb that the learning loop needs (the only SQL on it lives in
olav.audit)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from olav.audit.db import connect
from olav.audit.recorder import LEARNABLE_OUTCOMES

MAX_RESULT = 300
NARRATED_EVENT = "narrated"  # events.kind of a narrated run: the tools it could have called


def runs_to_learn(path: Path, *, since: datetime, limit: int) -> list[dict[str, Any]]:
    """The newest runs since ``since`` whose outcome is worth a lesson (failed, cancelled,
    narrated, tool_error) and that no lesson was learned from yet, with their evidence."""
    marks = ", ".join("?" for _ in LEARNABLE_OUTCOMES)
    with connect(path) as con:
        learned = _learned_run_ids(con)
        rows = con.execute(
            f"SELECT id, agent, query, outcome, error FROM runs WHERE outcome IN ({marks}) "
            "AND started_at >= ? ORDER BY started_at DESC LIMIT ?",
            [*LEARNABLE_OUTCOMES, since, limit * 3],
        ).fetchall()
        fresh = [r for r in rows if r[0] not in learned][:limit]
        return [_evidence(con, *row) for row in fresh]


def _learned_run_ids(con: Any) -> set[str]:
    rows = con.execute(
        "SELECT json_extract_string(detail, '$.run_id') FROM events WHERE kind = 'trace_learned'"
    ).fetchall()
    return {r[0] for r in rows}


def _evidence(
    con: Any, rid: str, agent: str, query: str, outcome: str, error: str | None
) -> dict[str, Any]:
    calls = con.execute(
        "SELECT tool, args, result FROM tool_calls WHERE run_id = ? AND status = 'error' "
        "ORDER BY created_at",
        [rid],
    ).fetchall()
    run: dict[str, Any] = {
        "run_id": rid,
        "agent": agent,
        "request": query,
        "outcome": outcome,
        "error": error,
        "failed_tools": [
            {"tool": t, "args": json.loads(a or "{}"), "result": (r or "")[:MAX_RESULT]}
            for t, a, r in calls
        ],
    }
    if outcome == "narrated":
        run.update(_narration(con, rid))
    return run


def _narration(con: Any, rid: str) -> dict[str, Any]:
    """What the agent said instead of acting, and the tools it had (from the run's event)."""
    answer = con.execute(
        "SELECT content FROM messages WHERE run_id = ? AND role = 'assistant' "
        "ORDER BY created_at DESC LIMIT 1",
        [rid],
    ).fetchone()
    event = con.execute(
        "SELECT detail FROM events WHERE run_id = ? AND kind = ? ORDER BY created_at DESC LIMIT 1",
        [rid, NARRATED_EVENT],
    ).fetchone()
    detail = json.loads(event[0]) if event and event[0] else {}
    return {
        "answer": (answer[0] if answer else "")[:MAX_RESULT],
        "tools_named_by_memory": detail.get("named_tools", []),
        "tools_available": detail.get("tools", []),
    }
