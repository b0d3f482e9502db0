"""Reading runs from audit.duckdb: list, count, resolve and load them, and their details
(messages, recalls, events, tokens) in batches.

A run's messages come from the ``steps`` table (schema 4: the graph's messages in order, tool
calls with the ids their results answer). A run recorded before it has none; its messages are
rebuilt from ``messages`` and ``tool_calls`` (each executed call as an assistant call and its
result).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from olav.audit.db import connect, migrate
from olav.audit.events import (
    CONTEXT_EVENT,
    LOOP_EVENT,
    NUDGE_EVENT,
    REASONING_ROLE,
    RUN_STATS_EVENT,
    SALVAGE_EVENT,
)
from olav.audit.export.runs import AuditedRun, RunFilter, Step
from olav.core.errors import OlavError

BATCH = 2000  # runs read per connection (~0.2 s): the chat may write between two batches

_SUMMARY = f"""
WITH s AS (
    SELECT run_id, count(*) AS n, count(*) FILTER (WHERE role = 'assistant') AS turns,
           coalesce(sum(json_array_length(tool_calls)), 0) AS calls
    FROM steps GROUP BY run_id),
m AS (
    SELECT run_id, count(*) FILTER (WHERE role IN ('user', 'assistant')) AS n,
           count(*) FILTER (WHERE role = 'assistant') AS turns
    FROM messages GROUP BY run_id),
t AS (SELECT run_id, count(*) AS n FROM tool_calls GROUP BY run_id),
e AS (
    SELECT run_id,
           count(*) FILTER (WHERE kind = '{SALVAGE_EVENT}') AS salvaged,
           count(*) FILTER (WHERE kind = '{NUDGE_EVENT}') AS nudged,
           count(*) FILTER (WHERE kind = '{LOOP_EVENT}') AS loop_guard,
           count(*) FILTER (WHERE kind = '{CONTEXT_EVENT}') AS context_full
    FROM events WHERE run_id IS NOT NULL GROUP BY run_id)
SELECT r.id, r.agent, r.session_id, r.thread_id, r.status, coalesce(r.outcome, r.status) AS outcome,
       coalesce(r.query, '') AS query, r.model, r.error, r.started_at, r.ended_at,
       CASE WHEN s.n > 0 THEN s.turns ELSE coalesce(m.turns, 0) + coalesce(t.n, 0) END AS turns,
       CASE WHEN s.n > 0 THEN s.n ELSE coalesce(m.n, 0) + 2 * coalesce(t.n, 0) END AS n_steps,
       CASE WHEN s.n > 0 THEN s.calls ELSE coalesce(t.n, 0) END AS n_calls,
       coalesce(e.salvaged, 0) AS salvaged, coalesce(e.nudged, 0) AS nudged,
       coalesce(e.loop_guard, 0) AS loop_guard, coalesce(e.context_full, 0) AS context_full,
       r.operator
FROM runs r
LEFT JOIN s ON s.run_id = r.id LEFT JOIN m ON m.run_id = r.id
LEFT JOIN t ON t.run_id = r.id LEFT JOIN e ON e.run_id = r.id
"""


def ensure_audit(path: Path) -> None:
    """The audit database exists and has every migration (an older one gains the steps)."""
    if not Path(path).exists():
        raise OlavError(f"no audit database at {path}", hint="Run `olav init` to create it")
    migrate(Path(path))


def _where(flt: RunFilter) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if flt.outcomes:
        clauses.append(f"outcome IN ({', '.join('?' for _ in flt.outcomes)})")
        params += list(flt.outcomes)
    if flt.agent:
        clauses.append("agent = ?")
        params.append(flt.agent)
    if flt.but_agents:
        clauses.append("agent NOT IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(flt.but_agents))
    if flt.since is not None:
        clauses.append("started_at >= ?")
        params.append(flt.since)
    if flt.until is not None:
        clauses.append("started_at < ?")
        params.append(flt.until)
    if flt.min_turns > 0:
        clauses.append("turns >= ?")
        params.append(flt.min_turns)
    for col, want in (("salvaged", flt.salvaged), ("nudged", flt.nudged)):
        if want is not None:
            clauses.append(f"{col} {'>' if want else '='} 0")
    if flt.threads is not None:
        clauses.append("thread_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(flt.threads))
    if flt.but_threads:
        clauses.append("(thread_id IS NULL OR thread_id NOT IN (SELECT unnest(?::VARCHAR[])))")
        params.append(list(flt.but_threads))
    if flt.operator is not None:
        unnamed = " OR operator IS NULL" if flt.or_unnamed else ""
        clauses.append(f"(operator = ?{unnamed})")
        params.append(flt.operator)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _run_of(row: tuple[Any, ...]) -> AuditedRun:
    return AuditedRun(*row)


def list_runs(
    path: Path, flt: RunFilter = RunFilter(), *, newest_first: bool = True, read_only: bool = True
) -> list[AuditedRun]:
    """The runs that pass ``flt``, without their details. ``read_only`` False in a process
    that also writes the audit (olav serve): DuckDB refuses a second configuration of one
    file in one process, and a read-only connection would fail the writer's meanwhile."""
    where, params = _where(flt)
    sql = f"SELECT * FROM ({_SUMMARY}) AS runs{where} ORDER BY started_at "
    sql += "DESC, id" if newest_first else "ASC, id"
    if flt.limit is not None:
        sql += " LIMIT ?"
        params.append(flt.limit)
    if flt.offset:
        sql += " OFFSET ?"
        params.append(flt.offset)
    with connect(path, read_only=read_only) as con:
        return [_run_of(r) for r in con.execute(sql, params).fetchall()]


def count_runs(path: Path, flt: RunFilter = RunFilter(), *, read_only: bool = True) -> int:
    """How many runs pass ``flt`` (its limit and offset aside); ``read_only`` as for
    :func:`list_runs`."""
    where, params = _where(flt)
    with connect(path, read_only=read_only) as con:
        row = con.execute(f"SELECT count(*) FROM ({_SUMMARY}) AS runs{where}", params).fetchone()
    return int(row[0]) if row else 0


def runs_sql(flt: RunFilter, columns: str = "id") -> tuple[str, list[Any]]:
    """A ``SELECT columns`` of the runs that pass ``flt`` (its order, limit and offset aside)
    and its parameters, for a query built on top of it (the console's health charts)."""
    where, params = _where(flt)
    return f"SELECT {columns} FROM ({_SUMMARY}) AS runs{where}", params


def resolve_run(path: Path, ref: str) -> str:
    """The id of the run ``ref`` names: a whole id or a prefix of exactly one."""
    ref = ref.strip()
    if not re.fullmatch(r"[A-Za-z0-9_-]+", ref):
        raise OlavError(f"no run {ref!r}", hint="Pass a run id from `olav log list`")
    with connect(path, read_only=True) as con:
        rows = con.execute(
            "SELECT id FROM runs WHERE starts_with(id, ?) ORDER BY started_at DESC LIMIT 6", [ref]
        ).fetchall()
    ids = [r[0] for r in rows]
    if ref in ids:
        return ref
    if not ids:
        raise OlavError(f"no run {ref!r}", hint="Pass a run id from `olav log list`")
    if len(ids) > 1:
        shown = ", ".join(i[:12] for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise OlavError(
            f"run prefix {ref!r} matches more than one run ({shown})",
            hint="Pass more of the id",
        )
    return str(ids[0])


def load_run(path: Path, run_id: str, *, read_only: bool = True) -> AuditedRun:
    """One run with its details (messages, memories, events, tokens); ``read_only`` as for
    :func:`list_runs`."""
    with connect(path, read_only=read_only) as con:
        rows = con.execute(f"SELECT * FROM ({_SUMMARY}) AS runs WHERE id = ?", [run_id]).fetchall()
        if not rows:
            raise OlavError(f"no run {run_id!r}", hint="Pass a run id from `olav log list`")
        run = _run_of(rows[0])
        _fill(con, [run])
    return run


def iter_runs(
    path: Path, runs: list[AuditedRun], *, batch: int = BATCH, read_only: bool = True
) -> Iterator[AuditedRun]:
    """``runs`` (from :func:`list_runs`) with their details, ``batch`` runs per short
    connection, so that a long export never keeps the chat from writing its audit;
    ``read_only`` as for :func:`list_runs`."""
    for start in range(0, len(runs), batch):
        part = runs[start : start + batch]
        with connect(path, read_only=read_only) as con:
            _fill(con, part)
        yield from part


def _fill(con: Any, runs: list[AuditedRun]) -> None:
    """Read the details of ``runs`` (one query per table for all of them)."""
    by_id = {r.id: r for r in runs}
    ids = list(by_id)
    within = "run_id IN (SELECT unnest(?::VARCHAR[]))"
    for rid, role, content, calls, call_id, name, status, thought in con.execute(
        "SELECT run_id, role, content, tool_calls, tool_call_id, name, status, reasoning "
        f"FROM steps WHERE {within} ORDER BY run_id, seq",
        [ids],
    ).fetchall():
        step = Step(role, content or "", _calls(calls), call_id, name, status, thought or None)
        by_id[rid].steps.append(step)
    old = [r for r in runs if not r.steps]
    if old:
        _fill_from_messages(con, old)
    for rid, content in con.execute(
        f"SELECT run_id, content FROM messages WHERE {within} AND role = ? ORDER BY created_at",
        [ids, REASONING_ROLE],
    ).fetchall():
        if content:
            by_id[rid].reasoning.append(content)
    for rid, agent, query, injected, block, latency, created in con.execute(
        "SELECT run_id, agent, query, injected, block, latency_ms, created_at FROM recalls "
        f"WHERE {within} ORDER BY created_at",
        [ids],
    ).fetchall():
        run = by_id[rid]
        ids_in = [str(mid) for mid in _json(injected, [])]
        for mid in ids_in:
            if mid not in run.injected:
                run.injected.append(mid)
        if block and run.memory_block is None and agent == run.agent:
            run.memory_block = block
        run.recalls.append(
            {
                "agent": agent,
                "query": query or "",
                "injected": ids_in,
                "block": block,
                "latency_ms": latency,
                "at": created.isoformat() if created else None,
            }
        )
    for rid, kind, detail, created in con.execute(
        f"SELECT run_id, kind, detail, created_at FROM events WHERE {within} ORDER BY created_at",
        [ids],
    ).fetchall():
        data = _json(detail, {})
        if kind == RUN_STATS_EVENT and isinstance(data, dict):
            by_id[rid].stats = data
        else:
            by_id[rid].events.append({"kind": kind, "detail": data, "at": created.isoformat()})
    for run in runs:
        _pair_reasoning(run)


def _fill_from_messages(con: Any, runs: list[AuditedRun]) -> None:
    """Messages of runs recorded before ``steps`` existed: the person's message, each
    executed tool call as an assistant call with its result, the answer (by time)."""
    by_id = {r.id: r for r in runs}
    ids = list(by_id)
    items: dict[str, list[tuple[Any, int, Step]]] = {}
    for rid, role, content, created in con.execute(
        "SELECT run_id, role, content, created_at FROM messages WHERE run_id IN "
        "(SELECT unnest(?::VARCHAR[])) AND role IN ('user', 'assistant')",
        [ids],
    ).fetchall():
        items.setdefault(rid, []).append(
            (created, 0 if role == "user" else 2, Step(role, content or ""))
        )
    for n, (rid, tool, args, result, status, created) in enumerate(
        con.execute(
            "SELECT run_id, tool, args, result, status, created_at FROM tool_calls WHERE run_id "
            "IN (SELECT unnest(?::VARCHAR[])) ORDER BY created_at",
            [ids],
        ).fetchall()
    ):
        call_id = f"call_{n}"
        call = {"id": call_id, "name": tool, "args": _json(args, {})}
        items.setdefault(rid, []).append((created, 1, Step("assistant", "", [call])))
        items[rid].append((created, 1, Step("tool", result or "", [], call_id, tool, status)))
    for rid, found in items.items():
        # stable: a call and its result stay together, the user message leads at equal times
        found.sort(key=lambda item: (item[0], item[1]))
        by_id[rid].steps = [step for _, _, step in found]
        by_id[rid].source = "messages"


def _pair_reasoning(run: AuditedRun) -> None:
    """Each reasoning row on the assistant message it came with, when there are as many as
    assistant messages (the audit keeps reasoning per run, in the order of the model calls;
    with a different count which message thought what is unknown, and none gets any)."""
    answers = [s for s in run.steps if s.role == "assistant"]
    if any(s.reasoning for s in answers):  # the steps kept each message's own (schema 4)
        return
    if run.reasoning and len(answers) == len(run.reasoning):
        for step, text in zip(answers, run.reasoning, strict=True):
            step.reasoning = text


def reasoning_paired(run: AuditedRun) -> bool:
    """Whether the run's reasoning sits on its messages (no reasoning counts as paired)."""
    return not run.reasoning or any(s.reasoning for s in run.steps)


def _json(text: Any, default: Any) -> Any:
    if text is None or text == "":
        return default
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return default


def _calls(text: Any) -> list[dict[str, Any]]:
    calls = _json(text, [])
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict)]
