"""Audited runs as datasets (``olav log``): read runs from audit.duckdb, turn them into OpenAI
chat fine-tuning lines, ShareGPT lines (the LLaMA-Factory convention with tools) or
evaluation trajectories, check every line before it is written, and split train/test by
thread.

A run's messages come from the ``steps`` table (schema 4: the graph's messages in order, tool
calls with the ids their results answer). A run recorded before it has none; its messages are
rebuilt from ``messages`` and ``tool_calls`` (each executed call as an assistant call and its
result). Secrets are redacted again on the way out, with the audit's own rules
(:mod:`olav.core.redact`): rows written by an older olav were redacted by older rules.

No terminal here (the CLI is :mod:`olav.cli.log`), and no import of the engine: the tools'
schemas come in as a catalog (:func:`tool_catalog`) that the caller builds from the registry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from olav.audit.db import connect, migrate
from olav.audit.queries import NUDGE_EVENT
from olav.audit.recorder import OUTCOMES
from olav.core.errors import OlavError
from olav.core.redact import REDACTED, redact, redact_text

FORMATS = ("openai", "sharegpt", "trajectory")
# the rescue layer's audit names (olav.runtime.rescue.middleware; this layer cannot import it)
SALVAGE_EVENT = "salvaged"
LOOP_EVENT = "loop_guard"
CONTEXT_EVENT = "context_full"
RUN_STATS_EVENT = "run_stats"
REASONING_ROLE = "reasoning"
RUN_OUTCOMES = (*OUTCOMES, "running")  # a run without an outcome yet shows its status
BATCH = 2000  # runs read per connection (~0.2 s): the chat may write between two batches
MEMORY_BLOCK = re.compile(r"^\s*<relevant-memories>.*?</relevant-memories>\s*", re.S)
TOOL_PARAMETERS = {"type": "object", "properties": {}}


# -- what is read ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs: ``salvaged``/``nudged`` True keeps only those runs, False drops them,
    None keeps both. ``until`` is exclusive. ``turns`` counts the run's assistant messages.
    ``threads``: only the runs of these threads (None: any run); ``but_threads``: not the runs
    of these (a run without a thread stays). ``operator``: only the runs recorded as that
    operator's, and with ``or_unnamed`` those that name none too (recorded before runs named
    their operator, or by olav's own jobs). ``offset`` skips that many, after the order."""

    outcomes: tuple[str, ...] = ()
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_turns: int = 0
    salvaged: bool | None = None
    nudged: bool | None = None
    limit: int | None = None
    threads: tuple[str, ...] | None = None
    but_threads: tuple[str, ...] = ()
    offset: int = 0
    operator: str | None = None
    or_unnamed: bool = False
    but_agents: tuple[str, ...] = ()  # not these agents' runs (olav's own jobs)


@dataclass(slots=True)
class Step:
    """One message of a run: ``tool_calls`` ``[{id, name, args}]`` on assistant steps;
    ``tool_call_id``, ``name`` and ``status`` on tool steps."""

    role: str  # user | assistant | tool
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    reasoning: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.role == "tool":
            out.update(tool_call_id=self.tool_call_id, name=self.name, status=self.status)
        if self.reasoning:
            out["reasoning"] = self.reasoning
        return out


@dataclass(slots=True)
class Run:
    """A run as ``olav log`` shows and exports it; ``steps`` and what follows them are read
    only when the run's details are (:func:`load_run`, :func:`iter_runs`)."""

    id: str
    agent: str
    session_id: str | None
    thread_id: str | None
    status: str
    outcome: str
    query: str
    model: str | None
    error: str | None
    started_at: datetime
    ended_at: datetime | None
    turns: int
    n_steps: int
    n_tool_calls: int
    salvaged: int
    nudged: int
    loop_guard: int
    context_full: int
    operator: str | None = None  # whose run it is (None: recorded before runs said)
    steps: list[Step] = field(default_factory=list)
    source: str = "steps"  # steps, or messages for a run recorded before schema 4
    injected: list[str] = field(default_factory=list)
    memory_block: str | None = None
    reasoning: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    # every recall of the run, oldest first: {agent, query, injected, block, latency_ms, at}
    recalls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def group(self) -> str:
        """What the train/test split keeps together: the thread, or the run alone."""
        return self.thread_id or self.id

    def marks(self) -> dict[str, Any]:
        return {
            "salvaged": self.salvaged,
            "nudged": bool(self.nudged),
            "loop_guard": bool(self.loop_guard),
            "context_full": bool(self.context_full),
        }

    def summary_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "agent": self.agent,
            "model": self.model,
            "thread_id": self.thread_id,
            "session_id": self.session_id,
            "status": self.status,
            "outcome": self.outcome,
            "turns": self.turns,
            "steps": self.n_steps,
            "tool_calls": self.n_tool_calls,
            "rescue": self.marks(),
            "query": self.query,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        """The whole run (``olav log show --json``)."""
        return {
            **self.summary_json(),
            "source": self.source,
            "tokens": {k: self.stats.get(k) for k in ("tokens_in", "tokens_out", "model_calls")},
            "stats": self.stats,
            "memories": {"injected": self.injected, "block": self.memory_block},
            "messages": [s.to_json() for s in self.steps],
            "reasoning": self.reasoning,
            "events": self.events,
        }


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


def _run_of(row: tuple[Any, ...]) -> Run:
    return Run(*row)


def list_runs(
    path: Path, flt: RunFilter = RunFilter(), *, newest_first: bool = True, read_only: bool = True
) -> list[Run]:
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


def load_run(path: Path, run_id: str, *, read_only: bool = True) -> Run:
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
    path: Path, runs: list[Run], *, batch: int = BATCH, read_only: bool = True
) -> Iterator[Run]:
    """``runs`` (from :func:`list_runs`) with their details, ``batch`` runs per short
    connection, so that a long export never keeps the chat from writing its audit;
    ``read_only`` as for :func:`list_runs`."""
    for start in range(0, len(runs), batch):
        part = runs[start : start + batch]
        with connect(path, read_only=read_only) as con:
            _fill(con, part)
        yield from part


def _fill(con: Any, runs: list[Run]) -> None:
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


def _fill_from_messages(con: Any, runs: list[Run]) -> None:
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


def _pair_reasoning(run: Run) -> None:
    """Each reasoning row on the assistant message it came with, when there are as many as
    assistant messages (the audit keeps reasoning per run, in the order of the model calls;
    with a different count which message thought what is unknown, and none gets any)."""
    answers = [s for s in run.steps if s.role == "assistant"]
    if any(s.reasoning for s in answers):  # the steps kept each message's own (schema 4)
        return
    if run.reasoning and len(answers) == len(run.reasoning):
        for step, text in zip(answers, run.reasoning, strict=True):
            step.reasoning = text


def reasoning_paired(run: Run) -> bool:
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


# -- dates -------------------------------------------------------------------------------------

_RELATIVE = re.compile(r"(\d+)\s*([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(text: str, *, option: str = "--since", end: bool = False) -> datetime:
    """A point in time: ``YYYY-MM-DD`` (local; with ``end`` the day after, so that an
    exclusive ``--until DAY`` takes in that whole day), an ISO time (local unless it has an
    offset), or an age such as ``30m``, ``12h``, ``7d``, ``2w`` (ago)."""
    raw = text.strip().lower()
    rel = _RELATIVE.fullmatch(raw)
    if rel:
        delta = timedelta(**{_UNITS[rel[2]]: int(rel[1])})
        return datetime.now(UTC) - delta
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise OlavError(
            f"{option} {text!r} is not a date",
            hint="Use YYYY-MM-DD, an ISO time such as 2026-12-01T08:00, or an age: 12h, 7d",
        ) from None
    if len(raw) == 10 and end:
        when += timedelta(days=1)
    return when if when.tzinfo else when.astimezone()


# -- tools -------------------------------------------------------------------------------------


def tool_catalog(specs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{name: {description, parameters}}`` from tool specs with ``description`` and a
    pydantic ``args`` model (olav.runtime.tools.ToolSpec): the JSON schema the model was
    offered (the same conversion as the chat model's bind_tools)."""
    from langchain_core.utils.function_calling import convert_to_openai_function

    out: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        try:
            params = dict(convert_to_openai_function(spec.args)["parameters"])
        except Exception:  # a model langchain cannot convert: pydantic's own schema
            params = dict(spec.args.model_json_schema())
            params.pop("title", None)
        out[name] = {"description": str(spec.description), "parameters": params}
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _function(name: str, calls: list[dict[str, Any]], catalog: Mapping[str, Any]) -> dict[str, Any]:
    """The tool as a function spec: the catalog's, or (a tool olav no longer has) a minimal
    object schema built from the arguments the run used."""
    known = catalog.get(name)
    if known is not None:
        return {
            "name": name,
            "description": known.get("description", ""),
            "parameters": known.get("parameters") or dict(TOOL_PARAMETERS),
        }
    props: dict[str, dict[str, str]] = {}
    for call in calls:
        args = call.get("args")
        if isinstance(args, dict):
            for key, value in args.items():
                props.setdefault(str(key), {"type": _json_type(value)})
    return {"name": name, "description": "", "parameters": {"type": "object", "properties": props}}


def _run_tools(steps: list[Step], catalog: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The function specs of every tool the run's assistant called, in order of first use."""
    used: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        for call in step.tool_calls:
            used.setdefault(str(call.get("name") or ""), []).append(call)
    return [_function(name, calls, catalog) for name, calls in used.items() if name]


# -- the formats -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """``system``: a system message to put first (None: none); ``memories``: keep the
    ``<relevant-memories>`` block in front of the person's message; ``reasoning``: add the
    model's reasoning; ``split``: the share of threads for the test file."""

    format: str = "openai"
    system: str | None = None
    memories: bool = False
    reasoning: bool = False
    split: float = 0.0
    seed: int = 42


# stands for [REDACTED] while a row is redacted again: redact_text is not idempotent
# ("token=[REDACTED]" would become "token=[REDACTED]]")
_KEPT = "OLAVXREDACTEDX"


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_swap(v, old, new) for v in value]
    return value


def _clean(text: str | None) -> str:
    """Text redacted again by today's rules (what an older olav let through is masked)."""
    if not text:
        return ""
    return redact_text(text.replace(REDACTED, _KEPT)).replace(_KEPT, REDACTED)


def _redacted(value: Any) -> Any:
    return _swap(redact(_swap(value, REDACTED, _KEPT)), _KEPT, REDACTED)


def redact_again(value: Any) -> Any:
    """A value read from the audit (text, or JSON data) redacted again by today's rules, for
    whoever shows it (the web console); what is masked already stays masked once."""
    return _redacted(value)


def _user_text(run: Run, step: Step, first: bool, memories: bool) -> str:
    text = MEMORY_BLOCK.sub("", _clean(step.content), count=1)
    if memories and first and run.memory_block:
        return f"{_clean(run.memory_block)}\n\n{text}"
    return text


def _args(call: dict[str, Any]) -> Any:
    args = call.get("args")
    return _redacted(args if args is not None else {})


def openai_line(
    run: Run, catalog: Mapping[str, Any], opts: ExportOptions = ExportOptions()
) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` (OpenAI chat fine-tuning with tools)."""
    messages: list[dict[str, Any]] = []
    if opts.system:
        messages.append({"role": "system", "content": opts.system})
    first = True
    for step in run.steps:
        if step.role == "user":
            messages.append(
                {"role": "user", "content": _user_text(run, step, first, opts.memories)}
            )
            first = False
        elif step.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": _clean(step.content)}
            if step.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": str(c.get("id") or ""),
                        "type": "function",
                        "function": {
                            "name": str(c.get("name") or ""),
                            "arguments": json.dumps(_args(c), ensure_ascii=False, default=str),
                        },
                    }
                    for c in step.tool_calls
                ]
            if opts.reasoning and step.reasoning:
                msg["reasoning_content"] = _clean(step.reasoning)
            messages.append(msg)
        elif step.role == "tool":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(step.tool_call_id or ""),
                    "content": _clean(step.content),
                }
            )
    tools = [{"type": "function", "function": f} for f in _run_tools(run.steps, catalog)]
    return {"messages": messages, "tools": tools}


class _Skip(Exception):
    """A run that a format cannot express; the argument is the reason counted."""


def sharegpt_line(
    run: Run, catalog: Mapping[str, Any], opts: ExportOptions = ExportOptions()
) -> dict[str, Any]:
    """``{"conversations": [{"from", "value"}], "tools": "<JSON list>"}``: LLaMA-Factory's
    sharegpt with tools. An assistant's tool calls are one ``function_call`` turn (one
    ``{"name", "arguments"}`` object, or a list of them for parallel calls), their results
    one ``observation`` (the result, or a JSON list of them in call order); the text an
    assistant wrote next to its calls is not kept. With reasoning, a ``gpt`` turn starts
    with ``<think>...</think>``."""
    conv: list[dict[str, str]] = []
    if opts.system:
        conv.append({"from": "system", "value": opts.system})
    first = True
    steps = run.steps
    i = 0
    while i < len(steps):
        step = steps[i]
        i += 1
        if step.role == "user":
            conv.append({"from": "human", "value": _user_text(run, step, first, opts.memories)})
            first = False
        elif step.role == "assistant" and step.tool_calls:
            calls = [
                {"name": str(c.get("name") or ""), "arguments": _args(c)} for c in step.tool_calls
            ]
            value: Any = calls[0] if len(calls) == 1 else calls
            conv.append(
                {
                    "from": "function_call",
                    "value": json.dumps(value, ensure_ascii=False, default=str),
                }
            )
            ids = [str(c.get("id") or "") for c in step.tool_calls]
            results: dict[str, str] = {}
            while i < len(steps) and steps[i].role == "tool":
                call_id = str(steps[i].tool_call_id or "")
                if call_id not in ids or call_id in results:
                    raise _Skip("tool_without_call")
                results[call_id] = _clean(steps[i].content)
                i += 1
            if len(results) < len(ids):
                raise _Skip("unanswered_tool_call")
            shown = [results[c] for c in ids]
            value = shown[0] if len(shown) == 1 else json.dumps(shown, ensure_ascii=False)
            conv.append({"from": "observation", "value": value})
        elif step.role == "assistant":
            text = _clean(step.content)
            if opts.reasoning and step.reasoning:
                text = f"<think>\n{_clean(step.reasoning)}\n</think>\n\n{text}"
            conv.append({"from": "gpt", "value": text})
        elif step.role == "tool":
            conv.append({"from": "observation", "value": _clean(step.content)})
    tools = _run_tools(run.steps, catalog)
    return {"conversations": conv, "tools": json.dumps(tools, ensure_ascii=False)}


def trajectory_line(
    run: Run, catalog: Mapping[str, Any], opts: ExportOptions = ExportOptions()
) -> dict[str, Any]:
    """Every step with its tool results and statuses, and what happened to the run: for
    evaluation (never skipped: a run that broke off is a trajectory too)."""
    first = True
    steps: list[dict[str, Any]] = []
    for seq, step in enumerate(run.steps):
        item: dict[str, Any] = {"seq": seq, "role": step.role}
        if step.role == "user":
            item["content"] = _user_text(run, step, first, opts.memories)
            first = False
        else:
            item["content"] = _clean(step.content)
        if step.tool_calls:
            item["tool_calls"] = [
                {"id": str(c.get("id") or ""), "name": c.get("name"), "args": _args(c)}
                for c in step.tool_calls
            ]
        if step.role == "tool":
            item.update(tool_call_id=step.tool_call_id, name=step.name, status=step.status)
        if opts.reasoning and step.reasoning:
            item["reasoning"] = _clean(step.reasoning)
        steps.append(item)
    memories: dict[str, Any] = {"injected": run.injected}
    if opts.memories:
        memories["block"] = _clean(run.memory_block) if run.memory_block else None
    out: dict[str, Any] = {
        "run_id": run.id,
        "thread_id": run.thread_id,
        "session_id": run.session_id,
        "agent": run.agent,
        "model": run.model,
        "started_at": run.started_at.isoformat(),
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
        "status": run.status,
        "outcome": run.outcome,
        "error": _clean(run.error) or None,
        "query": _clean(run.query),
        "turns": run.turns,
        "rescue": run.marks(),
        "stats": _redacted(run.stats),
        "memories": memories,
        "source": run.source,
        "steps": steps,
    }
    if opts.reasoning:
        out["reasoning"] = [_clean(t) for t in run.reasoning]
    if opts.system:
        out["system"] = opts.system
    return out


# -- validators --------------------------------------------------------------------------------


def validate_openai(line: Mapping[str, Any]) -> str | None:
    """Why ``line`` is not a valid chat fine-tuning example, or None. The rules: an optional
    system message first, then the person's; tool messages only right after the assistant
    message whose calls they answer, each call answered exactly once; every called tool in
    ``tools``; arguments a JSON string of an object; the last message the assistant's."""
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no_messages"
    tools = line.get("tools")
    if not isinstance(tools, list):
        return "bad_tools"
    names = set()
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not (isinstance(tool, dict) and tool.get("type") == "function" and isinstance(fn, dict)):
            return "bad_tools"
        if not isinstance(fn.get("name"), str) or not isinstance(fn.get("parameters"), dict):
            return "bad_tools"
        names.add(fn["name"])
    body = messages[1:] if messages[0].get("role") == "system" else messages
    if not body or body[0].get("role") != "user":
        return "no_user_message"
    seen_ids: set[str] = set()
    pending: set[str] = set()
    prev = ""
    for msg in body:
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ("user", "assistant", "tool"):
            return "bad_role"
        content = msg.get("content")
        if not isinstance(content, str):
            return "bad_content"
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if prev not in ("assistant_calls", "tool") or call_id not in pending:
                return "tool_without_call"
            pending.discard(call_id)
            prev = "tool"
            continue
        if pending:
            return "unanswered_tool_call"
        if role == "user":
            if prev not in ("", "assistant"):
                return "bad_order"
            prev = "user"
            continue
        calls = msg.get("tool_calls")
        if calls is None:
            prev = "assistant"
            continue
        if not isinstance(calls, list) or not calls:
            return "bad_tool_calls"
        for call in calls:
            reason = _check_call(call, names, seen_ids)
            if reason:
                return reason
            pending.add(call["id"])
        prev = "assistant_calls"
    if pending:
        return "unanswered_tool_call"
    last = body[-1]
    if last.get("role") != "assistant":
        return "last_not_assistant"
    if not str(last.get("content") or "").strip():
        return "empty_answer"
    return None


def _check_call(call: Any, names: set[str], seen: set[str]) -> str | None:
    if not isinstance(call, dict) or call.get("type") != "function":
        return "bad_tool_calls"
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        return "missing_tool_call_id"
    if call_id in seen:
        return "duplicate_tool_call_id"
    seen.add(call_id)
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return "bad_tool_calls"
    if fn["name"] not in names:
        return "tool_not_declared"
    args = fn.get("arguments")
    if not isinstance(args, str):
        return "bad_arguments"
    try:
        parsed = json.loads(args)
    except ValueError:
        return "bad_arguments"
    return None if isinstance(parsed, dict) else "bad_arguments"


def validate_sharegpt(line: Mapping[str, Any]) -> str | None:
    """Why ``line`` is not a valid sharegpt-with-tools example, or None: an optional system
    turn, then human/observation and gpt/function_call turns alternating from a human one;
    an observation right after each function_call; every called tool in ``tools`` (a JSON
    string of a list); the last turn gpt."""
    conv = line.get("conversations")
    if not isinstance(conv, list) or not conv:
        return "no_messages"
    try:
        tools = json.loads(line.get("tools") or "")
    except (TypeError, ValueError):
        return "bad_tools"
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
    ):
        return "bad_tools"
    names = {t["name"] for t in tools}
    if not all(isinstance(t, dict) and isinstance(t.get("value"), str) for t in conv):
        return "bad_content"
    body = conv[1:] if conv[0].get("from") == "system" else conv
    if not body or body[0].get("from") != "human":
        return "no_user_message"
    for n, turn in enumerate(body):
        who = turn.get("from")
        if who not in ("human", "observation", "gpt", "function_call"):
            return "bad_role"
        if (who in ("human", "observation")) != (n % 2 == 0):
            if who == "observation":
                return "tool_without_call"
            if body[n - 1].get("from") == "function_call":
                return "unanswered_tool_call"
            return "bad_order"
        if who == "observation" and body[n - 1].get("from") != "function_call":
            return "tool_without_call"
        if who == "human" and n and body[n - 1].get("from") != "gpt":
            return (
                "unanswered_tool_call"
                if body[n - 1].get("from") == "function_call"
                else "bad_order"
            )
        if who == "function_call":
            reason = _check_function_call(turn["value"], names)
            if reason:
                return reason
    last = body[-1].get("from")
    if last == "function_call":
        return "unanswered_tool_call"
    if last != "gpt":
        return "last_not_assistant"
    if not body[-1]["value"].strip():
        return "empty_answer"
    return None


def _check_function_call(value: str, names: set[str]) -> str | None:
    try:
        data = json.loads(value)
    except ValueError:
        return "bad_arguments"
    calls = data if isinstance(data, list) else [data]
    if not calls:
        return "bad_tool_calls"
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return "bad_tool_calls"
        if call["name"] not in names:
            return "tool_not_declared"
        if not isinstance(call.get("arguments"), dict):
            return "bad_arguments"
    return None


_LINES = {"openai": openai_line, "sharegpt": sharegpt_line, "trajectory": trajectory_line}
_VALIDATORS = {"openai": validate_openai, "sharegpt": validate_sharegpt}


def run_line(
    run: Run, catalog: Mapping[str, Any], opts: ExportOptions
) -> tuple[dict[str, Any] | None, str | None]:
    """(line, None) for a run the format takes, (None, reason) for one it does not."""
    if not run.steps:
        return None, "no_messages"
    try:
        line = _LINES[opts.format](run, catalog, opts)
    except _Skip as skip:
        return None, str(skip)
    validate = _VALIDATORS.get(opts.format)
    reason = validate(line) if validate else None
    return (None, reason) if reason else (line, None)


# -- the split ---------------------------------------------------------------------------------


def _score(group: str, seed: int) -> float:
    digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_groups(groups: Iterable[str], share: float, seed: int) -> set[str]:
    """The groups (threads) that go to the test file: ``share`` of them (rounded, at least
    one and never all while there are two or more), the ones whose seeded hash is lowest,
    so that the same seed and threads give the same split; a single group stays in train."""
    unique = sorted(set(groups))
    if share <= 0 or len(unique) < 2:
        return set()
    ranked = sorted(unique, key=lambda g: (_score(g, seed), g))
    n = min(max(round(share * len(ranked)), 1), len(ranked) - 1)
    return set(ranked[:n])


def split_test_path(path: Path) -> Path:
    """Where the test half of a split goes: ``.test`` before the suffix (``runs.jsonl`` ->
    ``runs.test.jsonl``; ``runs`` -> ``runs.test``)."""
    if path.suffix:
        return path.with_name(f"{path.stem}.test{path.suffix}")
    return path.with_name(f"{path.name}.test")


# -- the export --------------------------------------------------------------------------------


@dataclass(slots=True)
class ExportSummary:
    format: str
    exported: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    files: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    reasoning_unpaired: int = 0  # with --reasoning: runs whose reasoning no message got

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "exported": self.exported,
            "skipped": sum(self.skipped.values()),
            "skipped_by_reason": dict(self.skipped.most_common()),
            "files": self.files,
            "reasoning_unpaired": self.reasoning_unpaired,
            "seconds": round(self.seconds, 3),
        }

    def one_line(self) -> str:
        n = sum(self.skipped.values())
        skipped = f"skipped {n}" + (
            ": " + ", ".join(f"{k} {v}" for k, v in self.skipped.most_common()) if n else ""
        )
        if len(self.files) == 1:
            f = self.files[0]
            where = "stdout" if f["path"] == "-" else f["path"]
            text = f"exported {_count(self.exported, 'run')} to {where} ({self.format}), {skipped}"
        else:
            sides = ", ".join(
                f"{f['role']} {_count(f['runs'], 'run')} of {_count(f['threads'], 'thread')} "
                f"in {f['path']}"
                for f in self.files
            )
            text = f"exported {_count(self.exported, 'run')} ({self.format}): {sides}; {skipped}"
        if self.reasoning_unpaired:
            text += (
                f"; the reasoning of {_count(self.reasoning_unpaired, 'run')} could not be "
                "placed on its messages and was left out"
            )
        return text


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class _Sink:
    """A destination written through a temp file beside it and renamed at the end, so that
    a reader never sees half a file; or a stream (stdout), written as it goes."""

    def __init__(self, target: Path | IO[str], role: str = "") -> None:
        self.role = role
        self.runs = 0
        self.groups: set[str] = set()
        self.path: Path | None = None
        self._tmp: Path | None = None
        if isinstance(target, Path):
            self.path = target
            if target.is_dir():
                raise OlavError(f"cannot write {target}: it is a folder", hint="Pass a file name")
            if not target.parent.is_dir():
                raise OlavError(
                    f"cannot write {target}: {target.parent} is not a folder",
                    hint="Create the folder, or pass -o - for stdout",
                )
            self._tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            self.stream: IO[str] = self._tmp.open("w", encoding="utf-8")
        else:
            self.stream = target

    def write(self, line: dict[str, Any], group: str) -> None:
        self.stream.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self.runs += 1
        self.groups.add(group)

    def commit(self) -> None:
        if self._tmp is not None and self.path is not None:
            self.stream.close()
            self._tmp.replace(self.path)
            self._tmp = None
        else:
            self.stream.flush()

    def abort(self) -> None:
        if self._tmp is not None:
            self.stream.close()
            self._tmp.unlink(missing_ok=True)
            self._tmp = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": str(self.path) if self.path else "-",
            "runs": self.runs,
            "threads": len(self.groups),
        }
        if self.role:
            out["role"] = self.role
        return out


def export_runs(
    path: Path,
    target: Path | IO[str],
    *,
    flt: RunFilter = RunFilter(),
    opts: ExportOptions = ExportOptions(),
    catalog: Mapping[str, Any] | None = None,
) -> ExportSummary:
    """Write the runs that pass ``flt`` to ``target`` (a file, written atomically, or a
    stream), one JSON line each, oldest first. A run its format's validator rejects is
    skipped and counted by reason, never written. With ``opts.split`` a second file
    (:func:`split_test_path`) gets the runs of that share of the threads."""
    if opts.format not in FORMATS:
        raise OlavError(f"unknown format {opts.format!r}", hint="Use " + ", ".join(FORMATS))
    if not 0 <= opts.split < 1:
        raise OlavError(f"--split {opts.split} is not a share", hint="Use a number in [0, 1)")
    if opts.split and not isinstance(target, Path):
        raise OlavError("--split writes two files", hint="Pass -o FILE, not stdout")
    started = time.perf_counter()
    summary = ExportSummary(opts.format)
    runs = list_runs(path, flt, newest_first=False)
    test_groups = split_groups((r.group for r in runs), opts.split, opts.seed)
    sinks = [_Sink(target, "train" if opts.split else "")]
    try:
        if opts.split:
            assert isinstance(target, Path)
            sinks.append(_Sink(split_test_path(target), "test"))
        for run in iter_runs(path, runs):
            line, reason = run_line(run, catalog or {}, opts)
            if line is None:
                summary.skipped[reason or "invalid"] += 1
                continue
            sink = sinks[1] if run.group in test_groups and len(sinks) > 1 else sinks[0]
            sink.write(line, run.group)
            summary.exported += 1
            if opts.reasoning and opts.format != "trajectory" and not reasoning_paired(run):
                summary.reasoning_unpaired += 1
            run.steps = []  # a long export keeps only the run it is writing
    except BaseException:
        for sink in sinks:
            sink.abort()
        raise
    for sink in sinks:
        sink.commit()
    summary.files = [s.describe() for s in sinks]
    summary.seconds = time.perf_counter() - started
    return summary
