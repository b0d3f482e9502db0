"""AuditRecorder: what every run did, in audit.duckdb.

Each write opens a short-lived connection (see :mod:`olav.audit.db`), so the chat and a
scheduler process can both write without "Conflicting lock" errors reaching the user. A
failed audit write never breaks a run: it is reported once on stderr and dropped.

A run row names its operator and the process that runs it. A process killed mid-run leaves
its row ``running``; :func:`settle_orphans` (when olav serve or a chat session opens the
workspace, and when the console lists runs) makes it ``error``, with why, once that process is
gone.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.audit.db import connect, insert_rows
from olav.audit.events import LEARNABLE_OUTCOMES as LEARNABLE_OUTCOMES  # for older importers
from olav.audit.events import OUTCOMES
from olav.core.procs import process_gone, this_process
from olav.core.redact import redact, redact_text

MAX_TEXT = 20000
_OUTCOME_OF_STATUS = {"completed": "completed", "error": "failed", "cancelled": "cancelled"}


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """One tool call as the audit log records it (``args`` and ``result`` are redacted when
    written)."""

    tool: str
    args: dict[str, Any]
    result: str
    status: str  # success or error
    duration_ms: float = 0.0


def _step(run_id: str, seq: int, message: Any) -> list[Any] | None:
    """One graph message as a ``steps`` row (None for system messages)."""
    kind = getattr(message, "type", "")
    role = {"human": "user", "ai": "assistant", "tool": "tool"}.get(kind)
    if role is None:
        return None
    content = getattr(message, "content", "")
    if isinstance(content, list):
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    calls = None
    if role == "assistant" and getattr(message, "tool_calls", None):
        calls = json.dumps(
            [
                {"id": c.get("id") or "", "name": c["name"], "args": redact(c.get("args") or {})}
                for c in message.tool_calls
            ],
            ensure_ascii=False,
            default=str,
        )
    return [
        run_id,
        seq,
        role,
        redact_text(str(content or ""))[:MAX_TEXT],
        calls,
        getattr(message, "tool_call_id", None) if role == "tool" else None,
        getattr(message, "name", None) if role == "tool" else None,
        getattr(message, "status", None) if role == "tool" else None,
        _reasoning_of(message) if role == "assistant" else None,
        _now(),
    ]


def _reasoning_of(message: Any) -> str | None:
    """The reasoning the rescue layer kept apart from an answer (redacted), if any."""
    extra = getattr(message, "additional_kwargs", None) or {}
    text = str(extra.get("reasoning_content") or "")
    return redact_text(text)[:MAX_TEXT] if text else None


def _now() -> datetime:
    return datetime.now(UTC)


def _id() -> str:
    return uuid.uuid4().hex


def settle_orphans(path: Path) -> int:
    """Make every run that a process left ``running`` when it ended (``kill -9``, a crash)
    ``error``, with why; how many were. A run of a live process, of another machine, or from
    before runs named their process is left as it is. Never raises: the audit must not stop
    whatever opens the workspace."""
    try:
        if not Path(path).is_file():
            return 0
        with connect(Path(path)) as con:
            return _settle(con)
    except Exception as exc:
        print(f"olav: audit runs not settled ({exc}); continuing", file=sys.stderr)
        return 0


def prepare_audit(path: Path) -> bool:
    """The workspace's audit made ready for a session in one opening (each costs about
    12 ms): an older olav's database gains the new tables and columns, and the runs a killed
    process left ``running`` are settled (:func:`settle_orphans`). False when it could not be
    (said on stderr): auditing never stops a chat."""
    from olav.audit.db import apply_migrations

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with connect(Path(path)) as con:
            apply_migrations(con)
            _settle(con)
    except Exception as exc:
        print(f"olav: audit not prepared ({exc}); continuing", file=sys.stderr)
        return False
    return True


def _settle(con: Any) -> int:
    rows = con.execute(
        "SELECT id, pid, host, process FROM runs WHERE status = 'running' AND pid IS NOT NULL"
    ).fetchall()
    gone = [(rid, pid, host) for rid, pid, host, mark in rows if process_gone(pid, host, mark)]
    for rid, pid, host in gone:
        why = f"the process that ran it (pid {pid} on {host}) stopped before it ended"
        con.execute(
            "UPDATE runs SET status = 'error', outcome = 'failed', error = ? "
            "WHERE id = ? AND status = 'running'",
            [why, rid],
        )
    return len(gone)


class AuditRecorder:
    def __init__(self, path: Path, *, operator: str = "", migrated: bool = False) -> None:
        """``operator``: whose runs this recorder records (memory.user; "" for olav's own
        jobs, which only the workspace's own operator sees). ``migrated``: the caller has
        just applied the migrations (:func:`prepare_audit`), so no write needs to first."""
        self.path = Path(path)
        self.operator = operator
        self._warned = False
        self._migrated = migrated
        self._local = threading.local()  # this thread's connection inside batch()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """This thread's writes inside the block share one connection. Opening audit.duckdb
        costs about 12 ms, and a run writes its start and its end as several rows each (a
        run was 11 openings). Another process waits for the block as it waits for any
        write, so a block holds writes that follow each other, never a model call."""
        if getattr(self._local, "con", None) is not None:
            yield
            return
        with ExitStack() as stack:
            try:
                self._local.con = stack.enter_context(connect(self.path))
            except Exception as exc:  # auditing must never take a run down
                self._warn(exc)
            try:
                yield
            finally:
                self._local.con = None

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        con = getattr(self._local, "con", None)
        if con is not None:
            yield con
            return
        with connect(self.path) as con:
            yield con

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            print(f"olav: audit write failed ({exc}); continuing", file=sys.stderr)

    def _write(self, sql: str, params: list[Any]) -> None:
        try:
            with self._connection() as con:
                con.execute(sql, params)
        except Exception as exc:  # auditing must never take a run down
            self._warn(exc)

    def start_run(
        self, agent: str, session_id: str, query: str, model: str, thread_id: str | None = None
    ) -> str:
        run_id = _id()
        self._write(
            "INSERT INTO runs (id, agent, session_id, status, query, model, started_at, "
            "thread_id, operator, pid, host, process) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                run_id,
                agent,
                session_id,
                redact_text(query)[:MAX_TEXT],
                model,
                _now(),
                thread_id,
                self.operator or None,
                os.getpid(),
                socket.gethostname(),
                this_process(),
            ],
        )
        return run_id

    def steps(self, run_id: str, messages: list[Any]) -> None:
        """A run's messages in order (the graph's, from the person's message on): content and
        arguments redacted, tool calls with the ids their results answer."""
        made = [_step(run_id, seq, m) for seq, m in enumerate(messages)]
        rows = [r for r in made if r is not None]
        if not rows:
            return
        try:
            with self._connection() as con:
                insert_rows(
                    con,
                    "INSERT OR REPLACE INTO steps (run_id, seq, role, content, tool_calls, "
                    "tool_call_id, name, status, reasoning, created_at)",
                    rows,
                )
        except Exception as exc:  # auditing must never take a run down
            self._warn(exc)

    def end_run(
        self, run_id: str, status: str, error: str | None = None, *, outcome: str | None = None
    ) -> None:
        """``status`` is completed, error or cancelled; ``outcome`` defaults to what the
        status implies (completed, failed, cancelled)."""
        outcome = outcome or _OUTCOME_OF_STATUS.get(status, status)
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown run outcome {outcome!r}; use one of {', '.join(OUTCOMES)}")
        self._write(
            "UPDATE runs SET status = ?, outcome = ?, error = ?, ended_at = ? WHERE id = ?",
            [status, outcome, redact_text(error)[:MAX_TEXT] if error else None, _now(), run_id],
        )

    def tool_call(self, run_id: str | None, agent: str, call: ToolCallEntry) -> None:
        self._write(
            "INSERT INTO tool_calls (id, run_id, agent, tool, args, result, status, duration_ms, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                _id(),
                run_id or "",
                agent,
                call.tool,
                json.dumps(redact(call.args), ensure_ascii=False, default=str),
                redact_text(call.result)[:MAX_TEXT],
                call.status,
                call.duration_ms,
                _now(),
            ],
        )

    def message(self, run_id: str, role: str, content: str) -> None:
        self._write(
            "INSERT INTO messages (id, run_id, role, content, created_at) VALUES (?, ?, ?, ?, ?)",
            [_id(), run_id, role, redact_text(content)[:MAX_TEXT], _now()],
        )

    def event(self, run_id: str | None, kind: str, detail: dict[str, Any]) -> None:
        self._write(
            "INSERT INTO events (id, run_id, kind, detail, created_at) VALUES (?, ?, ?, ?, ?)",
            [
                _id(),
                run_id,
                kind,
                json.dumps(redact(detail), ensure_ascii=False, default=str),
                _now(),
            ],
        )

    def recall(self, run_id: str | None, agent: str, result: Any) -> None:
        self._write(
            "INSERT INTO recalls (id, run_id, agent, query, candidates, injected, latency_ms, "
            "created_at, block) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                _id(),
                run_id,
                agent,
                redact_text(result.query)[:MAX_TEXT],
                json.dumps([c.to_json() for c in result.candidates], ensure_ascii=False),
                json.dumps(result.injected_ids),
                result.latency_ms,
                _now(),
                redact_text(getattr(result, "block", "") or "")[:MAX_TEXT] or None,
            ],
        )

    def memory_event(self, memory_id: str, action: str, actor: str, detail: dict[str, Any]) -> None:
        self._write(
            "INSERT INTO memory_events (id, memory_id, action, actor, detail, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [_id(), memory_id, action, actor, json.dumps(redact(detail), default=str), _now()],
        )

    def decisions(self, run_id: str | None, items: Sequence[Any]) -> None:
        """Memory's write, conflict and lifecycle decisions (olav.memory.decisions.Decision:
        kind, action, memory_id, category, other_id, reason, detail), in one write."""
        now = _now()
        rows = [
            [
                _id(),
                run_id,
                d.kind,
                d.action,
                d.memory_id,
                d.category,
                d.other_id,
                redact_text(d.reason)[:MAX_TEXT],
                json.dumps(redact(dict(d.detail)), ensure_ascii=False, default=str),
                now,
                seq,
            ]
            for seq, d in enumerate(items)
        ]
        if not rows or not self.path.is_file():
            return
        try:
            if not self._migrated:  # a workspace audited before the table existed
                from olav.audit.db import migrate

                migrate(self.path)
                self._migrated = True
            with self._connection() as con:
                insert_rows(
                    con,
                    "INSERT INTO memory_decisions (id, run_id, kind, action, memory_id, "
                    "category, other_id, reason, detail, created_at, seq)",
                    rows,
                )
        except Exception as exc:  # auditing must never take a run down
            self._warn(exc)

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with connect(self.path) as con:
            return list(con.execute(sql, params or []).fetchall())
