"""L1 capture: successful write-type tool calls become operational_event memories, and
successful SQL becomes query_pattern memories.

A tool is write-type when its agent's SKILL.md declares ``capture: true`` for it, or, when
undeclared, when a segment of its name is a write verb. Expiry follows the category
(:data:`olav.memory.schema.CATEGORY_TTL`), never words in the result.

One embedding per event and one write per run, both on the background writer
(olav.memory.writer) in a chat session. Secrets are redacted before anything is stored;
the id is the SHA-256 of the canonical call, so replaying an operation stores nothing new.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from olav.core.redact import redact, redact_text
from olav.memory.injection import quarantine_if_needed
from olav.memory.schema import MemoryRecord, expiry_for
from olav.memory.scopes import scoped_id
from olav.memory.sql import sql_in, sql_str
from olav.memory.store import MemoryStore

WRITE_VERBS = frozenset(
    {
        "register",
        "deploy",
        "push",
        "save",
        "destroy",
        "write",
        "record",
        "emit",
        "export",
        "ingest",
        "stop",
        "create",
        "update",
        "delete",
        "exec",
    }
)
# olav's own memory tools write memory themselves; capturing them would only echo it
SELF_WRITING = frozenset(
    {
        "record_reflection",
        "commit_to_memory",
        "propose_memory_draft",
        "propose_guide_draft",
        "draft_code_fix",
    }
)
MAX_TEXT = 1200
CORRECTION = re.compile(
    r"^\s*(no[,.!]|wrong|incorrect|that'?s (not|wrong)|not right|不对|错了|不是这样|不正确)",
    re.I,
)


@dataclass
class ToolEvent:
    agent: str
    tool: str
    args: dict[str, Any]
    result: str
    status: str  # success | error


def is_write_tool(name: str) -> bool:
    if name in SELF_WRITING:
        return False
    return any(part in WRITE_VERBS for part in name.lower().split("_"))


def should_capture(ev: ToolEvent, declared: Mapping[tuple[str, str], bool]) -> bool:
    """A successful call of a tool its agent declares ``capture: true`` for, or else of a
    tool whose name has a write verb. olav's own memory tools are never captured."""
    if ev.tool in SELF_WRITING or failed(ev):
        return False
    choice = declared.get((ev.agent, ev.tool))
    return is_write_tool(ev.tool) if choice is None else choice


def failed(event: ToolEvent) -> bool:
    return event.status == "error"


def event_id(tool: str, args: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"tool": tool, "args": args}, sort_keys=True, ensure_ascii=False, default=str
    )
    return "op_" + hashlib.sha256(canonical.encode()).hexdigest()


def event_record(ev: ToolEvent, run_id: str | None) -> MemoryRecord:
    args = redact(ev.args)
    result = redact_text(ev.result)
    text = (
        f"Action: {ev.tool}\nArgs: {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
        f"\nResult: {result}"
    )[:MAX_TEXT]
    return MemoryRecord(
        id=event_id(ev.tool, ev.args),
        text=text,
        category="operational_event",
        scope=ev.agent,
        origin="agent",
        confidence=0.5,
        tags=[ev.tool],
        expires_at=expiry_for("operational_event"),
        metadata={"tool": ev.tool, "run_id": run_id, "agent": ev.agent, "args": args},
    )


def _sql_key(sql: str) -> str:
    return hashlib.sha256(" ".join(sql.split()).lower().encode()).hexdigest()[:16]


def pattern_record(question: str, sql: str, agent: str, run_id: str | None) -> MemoryRecord:
    q = " ".join(redact_text(question).split())
    sql = redact_text(sql)
    norm_q = re.sub(r"\W+", " ", q.lower()).strip()
    key = hashlib.sha256(f"{norm_q}\n{' '.join(sql.split()).lower()}".encode()).hexdigest()
    return MemoryRecord(
        id="qp_" + key[:32],
        text=f"Q: {q}\nSQL: {sql.strip()}",
        category="query_pattern",
        scope=agent,
        origin="agent",
        confidence=0.6,
        tags=["db_query"],
        expires_at=expiry_for("query_pattern"),
        metadata={
            "question": q,
            "sql": sql.strip(),
            "sql_key": _sql_key(sql),
            "run_id": run_id,
            "agent": agent,
            "tool": "db_query",
        },
    )


@dataclass
class CapturePlan:
    """What a run's capture will write: built on the answering thread (redaction and
    hashing only), written by :func:`apply_capture`, usually on the background writer."""

    records: list[MemoryRecord]
    failed_sql: list[str]

    def __bool__(self) -> bool:
        return bool(self.records or self.failed_sql)

    @property
    def pattern_ids(self) -> list[str]:
        return [r.id for r in self.records if r.category == "query_pattern"]


def plan_capture(
    events: list[ToolEvent],
    *,
    question: str,
    run_id: str | None,
    declared: Mapping[tuple[str, str], bool] | None = None,
    scope: str | None = None,
) -> CapturePlan:
    """The records this run's events produce, and the SQL whose patterns must go.
    ``scope`` (an operator's ``user:`` scope on a team table) replaces the agent's scope."""
    records: dict[str, MemoryRecord] = {}
    failed_sql: list[str] = []
    for ev in events:
        if ev.tool == "db_query":
            sql = str(ev.args.get("sql", ""))
            if failed(ev):
                failed_sql.append(sql)
            elif sql and question:
                rec = pattern_record(question, sql, ev.agent, run_id)
                records[rec.id] = rec
            continue
        if not should_capture(ev, declared or {}):
            continue
        rec = event_record(ev, run_id)
        records[rec.id] = rec
    if scope is not None:
        for rec in records.values():
            rec.scope, rec.id = scope, scoped_id(rec.id, scope)
    return CapturePlan([quarantine_if_needed(r) for r in records.values()], failed_sql)


def apply_capture(store: MemoryStore, plan: CapturePlan) -> list[str]:
    """Write a plan: invalidate the failed SQL's patterns, embed and store the new records
    (ids already stored are skipped). Returns the new ids."""
    for sql in plan.failed_sql:
        invalidate_sql(store, sql)
    return store.insert_new(plan.records) if plan.records else []


def capture(
    store: MemoryStore,
    events: list[ToolEvent],
    *,
    question: str,
    run_id: str | None,
    declared: Mapping[tuple[str, str], bool] | None = None,
    scope: str | None = None,
) -> list[str]:
    """Store what this run taught, now: write events and SQL patterns. Returns new ids.

    ``declared`` maps ``(agent, tool)`` to the ``capture`` choice of the agent's SKILL.md.
    A chat session plans on its own thread and writes on the background writer instead."""
    plan = plan_capture(events, question=question, run_id=run_id, declared=declared, scope=scope)
    return apply_capture(store, plan)


def invalidate_sql(store: MemoryStore, sql: str) -> int:
    """A pattern whose SQL later fails is never recalled again."""
    where = (
        f"category = 'query_pattern' AND invalidated_at IS NULL AND metadata LIKE "
        f"{sql_str('%' + _sql_key(sql) + '%')}"
    )
    rows = store.list_rows(where)
    for r in rows:
        store.update(r.id, invalidated_at=datetime.now(UTC))
    return len(rows)


def invalidate_ids(store: MemoryStore, ids: list[str]) -> int:
    rows = store.list_rows(sql_in("id", ids) + " AND invalidated_at IS NULL") if ids else []
    for r in rows:
        store.update(r.id, invalidated_at=datetime.now(UTC))
    return len(rows)
