"""L1 capture: successful write-type tool calls become operational_event memories, and
successful SQL becomes query_pattern memories.

A tool is write-type when its agent's SKILL.md declares ``capture: true`` for it, or, when
undeclared, when a segment of its name is a write verb (the policy's ``write_verbs``).
Expiry and confidence follow the category (olav.memory.policy), never words in the result.
Every event's decision (captured, skipped and why, deduplicated, quarantined) goes to the
decision log (olav.memory.decisions) when the plan is written.

One embedding per event and one write per run, both on the background writer
(olav.memory.store.writer) in a chat session. Secrets are redacted before anything is stored;
the id is the SHA-256 of the canonical call, so replaying an operation stores nothing new.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from olav.core.redact import redact, redact_text
from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.ingest.injection import QUARANTINE, quarantine_if_needed
from olav.memory.lifecycle.archive import enforce_capacity
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.schema import PENDING_RUN, MemoryRecord
from olav.memory.store.scopes import scoped_id
from olav.memory.store.sql import sql_in, sql_str
from olav.memory.store.table import MemoryStore

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


def is_write_tool(name: str, policy: MemoryPolicy = DEFAULTS) -> bool:
    return policy.is_write_tool(name)


def should_capture(
    ev: ToolEvent, declared: Mapping[tuple[str, str], bool], policy: MemoryPolicy = DEFAULTS
) -> bool:
    """A successful call of a tool its agent declares ``capture: true`` for, or else of a
    tool whose name has a write verb. olav's own memory tools are never captured."""
    return capture_reason(ev, declared, policy)[0]


def capture_reason(
    ev: ToolEvent, declared: Mapping[tuple[str, str], bool], policy: MemoryPolicy = DEFAULTS
) -> tuple[bool, str]:
    """:func:`should_capture` and why."""
    if ev.tool in policy.never_capture:
        return False, "olav's own memory tool (capture.never)"
    if failed(ev):
        return False, "the call failed"
    choice = declared.get((ev.agent, ev.tool))
    if choice is not None:
        return choice, f"its SKILL.md declares capture: {str(choice).lower()}"
    verbs = [p for p in ev.tool.lower().split("_") if p in policy.write_verbs]
    if verbs:
        return True, f"write verb {verbs[0]!r} in its name"
    return False, "no write verb in its name and no capture: true in its SKILL.md"


def failed(event: ToolEvent) -> bool:
    return event.status == "error"


def event_id(tool: str, args: dict[str, Any]) -> str:
    canonical = json.dumps(
        {"tool": tool, "args": args}, sort_keys=True, ensure_ascii=False, default=str
    )
    return "op_" + hashlib.sha256(canonical.encode()).hexdigest()


def event_record(
    ev: ToolEvent, run_id: str | None, policy: MemoryPolicy = DEFAULTS
) -> MemoryRecord:
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
        confidence=policy.confidence_of("operational_event"),
        tags=[ev.tool],
        expires_at=policy.expiry_for("operational_event"),
        metadata={"tool": ev.tool, "run_id": run_id, "agent": ev.agent, "args": args},
    )


def _sql_key(sql: str) -> str:
    return hashlib.sha256(" ".join(sql.split()).lower().encode()).hexdigest()[:16]


def pattern_record(
    question: str, sql: str, agent: str, run_id: str | None, policy: MemoryPolicy = DEFAULTS
) -> MemoryRecord:
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
        confidence=policy.confidence_of("query_pattern"),
        tags=["db_query"],
        expires_at=policy.expiry_for("query_pattern"),
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
    # the events that were not captured, as decisions; the captured ones are decided when
    # the plan is written (new, or already stored)
    skipped: list[Decision] = field(default_factory=list)
    run_id: str | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # record id -> why it was captured
    policy: MemoryPolicy = DEFAULTS
    # the run completed: a capture of the same action by an earlier, separate run that waits
    # for confirmation is confirmed by it (olav's own evidence; never an external report's)
    evidence: bool = False

    def __bool__(self) -> bool:
        return bool(self.records or self.failed_sql or self.skipped)

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
    policy: MemoryPolicy = DEFAULTS,
    held: str = PENDING_RUN,
    evidence: bool = False,
) -> CapturePlan:
    """The records this run's events produce, and the SQL whose patterns must go.
    ``scope`` (an operator's ``user:`` scope on a team table) replaces the agent's scope.

    Nothing a run captures reaches recall on its own say: each record is written pending
    (``held``: PENDING_RUN for olav's own runs, PENDING_EXTERNAL for a client's report), until
    a person confirms it, or (PENDING_RUN only) a later, separate run that completed
    (``evidence``) does the same thing. Text shaped like an instruction is quarantined
    instead, which only a person releases."""
    records: dict[str, MemoryRecord] = {}
    reasons: dict[str, str] = {}
    failed_sql: list[str] = []
    skipped: list[Decision] = []
    for ev in events:
        if ev.tool == "db_query":
            sql = str(ev.args.get("sql", ""))
            if failed(ev):
                failed_sql.append(sql)
            elif sql and question:
                rec = pattern_record(question, sql, ev.agent, run_id, policy)
                records[rec.id] = rec
                reasons[rec.id] = "a successful db_query with its question"
            else:
                why = "no SQL" if not sql else "the run left no completed question"
                skipped.append(_skip("query_pattern", why, ev))
            continue
        ok, why = capture_reason(ev, declared or {}, policy)
        if not ok:
            if ev.tool not in policy.never_capture:  # those log their own writes
                skipped.append(_skip("operational_event", why, ev))
            continue
        rec = event_record(ev, run_id, policy)
        records[rec.id] = rec
        reasons[rec.id] = why
    if scope is not None:
        for old_id, rec in list(records.items()):
            rec.scope, rec.id = scope, scoped_id(rec.id, scope)
            reasons[rec.id] = reasons.pop(old_id)
    plan = [_held(quarantine_if_needed(r), held) for r in records.values()]
    return CapturePlan(plan, failed_sql, skipped, run_id, reasons, policy, evidence)


def _held(rec: MemoryRecord, held: str) -> MemoryRecord:
    """``rec`` kept out of recall until confirmed (a quarantined one stays quarantined)."""
    if not rec.quarantined:
        rec.invalidated_at, rec.superseded_by = datetime.now(UTC), held
    return rec


def _skip(category: str, why: str, ev: ToolEvent) -> Decision:
    return Decision("write", "skipped", None, why, category, None, {"tool": ev.tool})


def apply_capture(
    store: MemoryStore, plan: CapturePlan, log: DecisionLog | None = None
) -> list[str]:
    """Write a plan: invalidate the failed SQL's patterns, embed and store the new records
    (ids already stored are skipped). Returns the new ids. Every decision goes to ``log``."""
    decisions = list(plan.skipped)
    for sql in plan.failed_sql:
        for rid in _invalidate_sql(store, sql):
            why = "its SQL failed in a later run"
            decisions.append(Decision("lifecycle", "invalidated", rid, why, "query_pattern"))
    new = store.insert_new(plan.records) if plan.records else []
    confirmed = _confirm_by_evidence(store, plan, set(new))
    if log is not None:
        fresh = set(new)
        for rec in plan.records:
            if rec.id in confirmed:
                why = f"the same action again in a later completed run ({plan.run_id})"
                tool = {"tool": rec.metadata.get("tool")}
                decisions.append(
                    Decision("write", "confirmed", rec.id, why, rec.category, None, tool)
                )
            else:
                decisions.append(_written(rec, rec.id in fresh, plan.reasons.get(rec.id, "")))
        record(log, plan.run_id, decisions)
    if new:  # over a category's capacity: the lowest-value rows go to the archive
        written = set(new)
        cats = sorted({r.category for r in plan.records if r.id in written})
        enforce_capacity(store, plan.policy, categories=cats, log=log, run_id=plan.run_id)
    return new


def _confirm_by_evidence(store: MemoryStore, plan: CapturePlan, fresh: set[str]) -> set[str]:
    """The stored captures this plan confirms: rows of its ids that wait as PENDING_RUN and
    were captured by another run, when this run completed. They enter recall."""
    again = [r.id for r in plan.records if r.id not in fresh and r.superseded_by == PENDING_RUN]
    if not plan.evidence or not again or plan.run_id is None:
        return set()
    done = set()
    for old in store.list_rows(sql_in("id", again)):
        if old.superseded_by != PENDING_RUN or old.metadata.get("run_id") in (None, plan.run_id):
            continue
        meta = dict(old.metadata, confirmed_by="evidence", confirmed_run=plan.run_id)
        store.update(old.id, invalidated_at=None, superseded_by=None, metadata=meta)
        done.add(old.id)
    return done


def _written(rec: MemoryRecord, fresh: bool, why: str) -> Decision:
    tool = {"tool": rec.metadata.get("tool")}
    if not fresh:
        same = (
            "the same call is stored already"
            if rec.category == "operational_event"
            else ("the same question and SQL are stored already")
        )
        return Decision("write", "deduplicated", None, same, rec.category, rec.id, tool)
    if (rec.superseded_by or "").startswith(QUARANTINE):
        why = f"held back as {rec.superseded_by} (instruction-shaped text)"
        return Decision("write", "quarantined", rec.id, why, rec.category, None, tool)
    if rec.pending:  # until a person, or a later completed run, confirms it
        tool["held"] = str(rec.superseded_by)
    return Decision("write", "captured", rec.id, why, rec.category, None, tool)


def capture(
    store: MemoryStore,
    events: list[ToolEvent],
    *,
    question: str,
    run_id: str | None,
    declared: Mapping[tuple[str, str], bool] | None = None,
    scope: str | None = None,
    policy: MemoryPolicy = DEFAULTS,
    log: DecisionLog | None = None,
    held: str = PENDING_RUN,
    evidence: bool = False,
) -> list[str]:
    """Store what this run taught, now: write events and SQL patterns, pending (``held``,
    ``evidence``: see :func:`plan_capture`). Returns new ids.

    ``declared`` maps ``(agent, tool)`` to the ``capture`` choice of the agent's SKILL.md.
    A chat session plans on its own thread and writes on the background writer instead."""
    plan = plan_capture(
        events,
        question=question,
        run_id=run_id,
        declared=declared,
        scope=scope,
        policy=policy,
        held=held,
        evidence=evidence,
    )
    return apply_capture(store, plan, log)


def invalidate_sql(store: MemoryStore, sql: str) -> int:
    """A pattern whose SQL later fails is never recalled again."""
    return len(_invalidate_sql(store, sql))


def _invalidate_sql(store: MemoryStore, sql: str) -> list[str]:
    # a pending pattern too: retired for good, no later run or person can confirm it now
    where = (
        f"category = 'query_pattern' AND (invalidated_at IS NULL OR superseded_by = "
        f"{sql_str(PENDING_RUN)}) AND metadata LIKE {sql_str('%' + _sql_key(sql) + '%')}"
    )
    rows = store.list_rows(where)
    for r in rows:
        store.update(r.id, invalidated_at=datetime.now(UTC), superseded_by=None)
    return [r.id for r in rows]


def invalidate_ids(
    store: MemoryStore, ids: list[str], log: DecisionLog | None = None, *, reason: str = ""
) -> int:
    """Retire the live rows among ``ids`` (the patterns a user's correction proved wrong), and
    the pending ones for good: no later run confirms a capture a person corrected."""
    live_or_pending = f" AND (invalidated_at IS NULL OR superseded_by = {sql_str(PENDING_RUN)})"
    rows = store.list_rows(sql_in("id", ids) + live_or_pending) if ids else []
    for r in rows:
        store.update(r.id, invalidated_at=datetime.now(UTC), superseded_by=None)
    why = reason or "invalidated"
    record(log, None, [Decision("lifecycle", "invalidated", r.id, why, r.category) for r in rows])
    return len(rows)
