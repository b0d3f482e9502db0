"""Read queries on audit.duckdb: the only SQL against its schema outside the writer. The
learning loop, episodes, the chat and the CLI ask here instead of writing their own."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from olav.audit.db import connect
from olav.audit.events import LEARNABLE_OUTCOMES, NARRATED_EVENT, NUDGE_EVENT, TRACE_LEARNED_EVENT

MAX_RESULT = 300


def runs_to_learn(path: Path, *, since: datetime, limit: int) -> list[dict[str, Any]]:
    """The newest runs since ``since`` whose outcome is worth a lesson (failed, cancelled,
    narrated, tool_error), or that completed only after the rescue layer's nudge (outcome
    ``nudged`` here), and that no lesson was learned from yet, with their evidence."""
    marks = ", ".join("?" for _ in LEARNABLE_OUTCOMES)
    with connect(path) as con:
        learned = _learned_run_ids(con)
        rows = con.execute(
            "SELECT id, agent, query, CASE WHEN outcome = 'completed' THEN 'nudged' "
            f"ELSE outcome END, error, operator FROM runs WHERE (outcome IN ({marks}) OR id IN "
            "(SELECT run_id FROM events WHERE kind = ?)) AND started_at >= ? "
            "ORDER BY started_at DESC LIMIT ?",
            [*LEARNABLE_OUTCOMES, NUDGE_EVENT, since, limit * 3],
        ).fetchall()
        fresh = [r for r in rows if r[0] not in learned][:limit]
        return [_evidence(con, *row) for row in fresh]


def _learned_run_ids(con: Any) -> set[str]:
    rows = con.execute(
        "SELECT json_extract_string(detail, '$.run_id') FROM events WHERE kind = ?",
        [TRACE_LEARNED_EVENT],
    ).fetchall()
    return {r[0] for r in rows}


def _evidence(
    con: Any,
    rid: str,
    agent: str,
    query: str,
    outcome: str,
    error: str | None,
    operator: str | None,
) -> dict[str, Any]:
    calls = con.execute(
        "SELECT tool, args, result FROM tool_calls WHERE run_id = ? AND status = 'error' "
        "ORDER BY created_at",
        [rid],
    ).fetchall()
    run: dict[str, Any] = {
        "run_id": rid,
        "operator": operator,  # whose lesson it becomes (None: a run from before operators)
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
    elif outcome == "nudged":
        run.update(_nudged(con, rid))
    return run


def _nudged(con: Any, rid: str) -> dict[str, Any]:
    """What the agent said before the nudge, and the tools the nudge named."""
    event = con.execute(
        "SELECT detail FROM events WHERE run_id = ? AND kind = ? AND "
        "json_extract_string(detail, '$.narration') IS NOT NULL ORDER BY created_at LIMIT 1",
        [rid, NUDGE_EVENT],
    ).fetchone()
    detail = json.loads(event[0]) if event and event[0] else {}
    return {
        "answer": str(detail.get("narration") or "")[:MAX_RESULT],
        "tools_named_by_memory": detail.get("tools", []),
    }


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


# -- sessions and runs -------------------------------------------------------------------------


def session_runs(path: Path, session_id: str) -> list[tuple[Any, ...]]:
    """The runs of one chat session, oldest first: (id, agent, status, query, started_at)."""
    with connect(path) as con:
        return con.execute(
            "SELECT id, agent, status, query, started_at FROM runs WHERE session_id = ? "
            "ORDER BY started_at",
            [session_id],
        ).fetchall()


def runs_tool_calls(path: Path, run_ids: list[str]) -> list[tuple[Any, ...]]:
    """The tool calls of the given runs, oldest first: (tool, status, args, result)."""
    if not run_ids:
        return []
    marks = ",".join("?" for _ in run_ids)
    with connect(path) as con:
        return con.execute(
            f"SELECT tool, status, args, result FROM tool_calls WHERE run_id IN ({marks}) "
            "ORDER BY created_at",
            run_ids,
        ).fetchall()


def run_threads(path: Path, run_ids: list[str]) -> dict[str, str | None]:
    """The thread of each of the given runs (None: a run without one); unknown ids are left
    out."""
    if not run_ids:
        return {}
    with connect(path) as con:
        rows = con.execute(
            "SELECT id, thread_id FROM runs WHERE id IN (SELECT unnest(?::VARCHAR[]))", [run_ids]
        ).fetchall()
    return {str(rid): tid for rid, tid in rows}


def run_operators(path: Path, run_ids: list[str]) -> dict[str, str | None]:
    """The operator each of the given runs names (None: one recorded before runs named
    theirs, or by olav's own jobs); unknown ids are left out."""
    if not run_ids:
        return {}
    with connect(path) as con:
        rows = con.execute(
            "SELECT id, operator FROM runs WHERE id IN (SELECT unnest(?::VARCHAR[]))", [run_ids]
        ).fetchall()
    return {str(rid): op or None for rid, op in rows}


def run_start(path: Path, run_id: str | None) -> tuple[str, float] | None:
    """(id, start as epoch seconds) of ``run_id``, or of the newest run still marked running
    when ``run_id`` is None; None when there is no such run."""
    sql = "SELECT id, epoch(started_at) FROM runs WHERE "
    with connect(path) as con:
        if run_id is None:
            sql += "status = 'running' ORDER BY started_at DESC LIMIT 1"
            row = con.execute(sql).fetchone()
        else:
            row = con.execute(sql + "id = ?", [run_id]).fetchone()
    return (str(row[0]), float(row[1])) if row else None


def errors_since(path: Path, since: datetime) -> list[tuple[str, str, str]]:
    """(text, agent, source) for failed runs and failed tool calls (no event kind holds an
    error: olav.audit.events)."""
    out: list[tuple[str, str, str]] = []
    with connect(path) as con:
        for err, agent in con.execute(
            "SELECT error, agent FROM runs WHERE status = 'error' AND error IS NOT NULL "
            "AND started_at >= ?",
            [since],
        ).fetchall():
            out.append((err, agent, "audit:runs"))
        for tool, result, agent in con.execute(
            "SELECT tool, result, agent FROM tool_calls WHERE status = 'error' AND created_at >= ?",
            [since],
        ).fetchall():
            out.append((f"{tool}: {result}", agent or "?", "audit:tool_calls"))
    return out


# -- memory and recall logs --------------------------------------------------------------------


def memory_events(
    path: Path, memory_ids: list[str], *, detail: bool = False
) -> list[tuple[Any, ...]]:
    """The recorded changes of the given memories, oldest first:
    (memory_id, action, actor, created_at), and with ``detail`` the event's detail (a dict)
    last."""
    if not memory_ids:
        return []
    marks = ",".join("?" for _ in memory_ids)
    columns = "memory_id, action, actor, created_at" + (", detail" if detail else "")
    with connect(path) as con:
        rows = con.execute(
            f"SELECT {columns} FROM memory_events WHERE memory_id IN ({marks}) ORDER BY created_at",
            memory_ids,
        ).fetchall()
    if not detail:
        return rows
    return [(*row[:4], _detail(row[4])) for row in rows]


def _detail(raw: Any) -> dict[str, Any]:
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def recent_recalls(path: Path, *, run_id: str | None, limit: int) -> list[tuple[Any, ...]]:
    """The newest recalls (of one run, when given): (run_id, agent, query, injected,
    latency_ms, created_at)."""
    sql = "SELECT run_id, agent, query, injected, latency_ms, created_at FROM recalls"
    params: list[Any] = []
    if run_id:
        sql += " WHERE run_id = ?"
        params.append(run_id)
    sql += " ORDER BY created_at DESC LIMIT ?"
    params.append(limit)
    with connect(path) as con:
        return con.execute(sql, params).fetchall()


def recall_rows(path: Path, *, limit: int) -> list[tuple[str | None, str, str, str]]:
    """The newest recalls' (run id, query, candidates JSON, injected ids JSON), newest
    first: for a reader who may see only some runs' requests (the console)."""
    with connect(path) as con:
        return con.execute(
            "SELECT run_id, query, candidates, injected FROM recalls "
            "ORDER BY created_at DESC LIMIT ?",
            [limit],
        ).fetchall()


def recall_candidates(path: Path, *, limit: int) -> list[tuple[str, str, str]]:
    """The newest recalls' (query, candidates JSON, injected ids JSON), newest first."""
    with connect(path) as con:
        return con.execute(
            "SELECT query, candidates, injected FROM recalls ORDER BY created_at DESC LIMIT ?",
            [limit],
        ).fetchall()


def memory_decisions(
    path: Path,
    *,
    kinds: tuple[str, ...] | None = None,
    run_id: str | None = None,
    memory_id: str | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """The newest decisions of memory's control plane (``memory_decisions``), newest first:
    of the given kinds (write, conflict, lifecycle), of one run, about one row (as the row
    decided on or the row it was decided against)."""
    where, params = [], []
    if kinds:
        where.append(f"kind IN ({','.join('?' for _ in kinds)})")
        params += list(kinds)
    if run_id:
        where.append("run_id = ?")
        params.append(run_id)
    if memory_id:
        where.append("(memory_id = ? OR other_id = ?)")
        params += [memory_id, memory_id]
    sql = (
        "SELECT kind, action, memory_id, category, other_id, reason, detail, run_id, created_at "
        "FROM memory_decisions"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY created_at DESC, seq DESC LIMIT ?"
    )
    if not _has_table(path, "memory_decisions"):
        return []
    with connect(path) as con:
        rows = con.execute(sql, [*params, limit]).fetchall()
    names = ("kind", "action", "memory_id", "category", "other_id", "reason", "detail", "run_id")
    out = []
    for row in rows:
        item = dict(zip(names, row[:8], strict=True))
        item["detail"] = _detail(item["detail"])
        item["at"] = row[8]
        out.append(item)
    return out


def last_decision_at(path: Path, kind: str, action: str) -> datetime | None:
    """When memory last made this decision (e.g. the last ``collected``: the last gc)."""
    if not _has_table(path, "memory_decisions"):
        return None
    with connect(path) as con:
        row = con.execute(
            "SELECT max(created_at) FROM memory_decisions WHERE kind = ? AND action = ?",
            [kind, action],
        ).fetchone()
    return row[0] if row else None


def _has_table(path: Path, table: str) -> bool:
    """Whether the audit database at ``path`` exists and holds ``table`` (one migrated
    before it was added does not, until a session migrates it)."""
    if not Path(path).is_file():
        return False
    with connect(path) as con:
        found = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]
        ).fetchone()
    return bool(found and found[0])
