"""trace_learner: runs that went wrong become one-line reflection constraints.

Reads the runs worth a lesson from audit.duckdb (outcome failed, cancelled, tool_error, or
narrated: the agent described the steps instead of calling a tool; or nudged: it did so until
the rescue layer reminded it), with their failed tool
calls, and for a narrated run what it said and the tools it had. Asks the model for one-line
lessons and stores them as reflections (30-day TTL, real embedding), one model call per
operator: the lessons from an operator's runs land in their ``user:`` scope. A lesson
close to an existing one is skipped. Runs learned once are not learned again.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from olav.audit.events import TRACE_LEARNED_EVENT
from olav.audit.queries import runs_to_learn
from olav.audit.recorder import AuditRecorder
from olav.core.log import get_logger
from olav.llm.answers import ask_model, extract_json
from olav.memory.policy import policy_for
from olav.memory.recall.lessons import add_reflection
from olav.memory.store.scopes import USER_PREFIX, private_scope, user_name

log = get_logger("trace_learner")
_LOCK = threading.Lock()

PROMPT = """You review runs of an AI agent that went wrong and write lessons for next time.
Each run has an outcome:
- failed: an error ended it; cancelled: the user stopped it;
- tool_error: it finished, but tool calls failed (see failed_tools);
- narrated: it was asked to act but called no tool; it only described the steps (see answer).
- nudged: it first only described the steps (see answer) and called the tool only after a
  reminder; write its lesson as for a narrated run.
For each run write ONE line that names the exact tool. For a failed or tool_error run:
"When <situation>, do not <action>; instead <better action>."
For a narrated or nudged run pick the tool from tools_named_by_memory, else from tools_available:
"When asked to <the request in general words>, call <tool>; do not describe the steps."
Skip runs that teach nothing (e.g. the user just cancelled). Answer with a JSON array
of strings and nothing else.

Runs:
{failures}
"""


@dataclass
class Lesson:
    text: str
    added: bool
    memory_id: str


def failed_runs(audit_db: Any, *, hours: float, limit: int) -> list[dict[str, Any]]:
    """The runs of the last ``hours`` to learn from (see olav.audit.queries.runs_to_learn)."""
    since = datetime.now(UTC) - timedelta(hours=hours)
    return runs_to_learn(audit_db, since=since, limit=limit)


def learn_from_traces(
    ws: Any, store: Any, model: Any, *, hours: float = 24, limit: int = 10
) -> list[Lesson]:
    """One model call over the recent runs worth a lesson; stores the lessons it writes."""
    with _LOCK:  # one learner at a time per process
        runs = failed_runs(ws.audit_path, hours=hours, limit=limit)
        lessons: list[Lesson] = []
        # one call per operator: a lesson quotes its runs, so it is that operator's alone and
        # the model never sees two operators' requests side by side
        for operator, theirs in _by_operator(ws, runs).items():
            failures = "\n".join(json.dumps(r, ensure_ascii=False, default=str) for r in theirs)
            answer = extract_json(ask_model(model, PROMPT.format(failures=failures)))
            lines = answer if isinstance(answer, list) else answer.get("lessons", [])
            ids = [str(r["run_id"]) for r in theirs]
            learned = store_lessons(ws, store, lines, runs=ids, operator=operator)
            audit = AuditRecorder(ws.audit_path)
            for rid in ids:
                audit.event(rid, TRACE_LEARNED_EVENT, {"run_id": rid, "lessons": len(learned)})
            lessons += learned
        return lessons


def _by_operator(ws: Any, runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The runs grouped by their operator (a run recorded before runs named one is the
    workspace's own operator's), without the operator in what the model reads."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        operator = run.pop("operator", None) or user_name(ws.config)
        groups.setdefault(operator, []).append(run)
    return groups


def store_lessons(
    ws: Any,
    store: Any,
    lines: list[Any],
    runs: list[str] | None = None,
    operator: str | None = None,
) -> list[Lesson]:
    """Each well-formed line becomes a reflection unless a near-duplicate exists; ``runs``
    are the failed runs it was learned from (in its metadata; its decision's run when one)."""
    lessons: list[Lesson] = []
    policy = policy_for(ws.config)
    audit = AuditRecorder(ws.audit_path)
    for line in lines:
        if isinstance(line, str) and 10 <= len(line.strip()) <= 400:
            added, mid = add_reflection(
                store,
                line,
                source="trace_learner",
                scope=USER_PREFIX + operator if operator else private_scope(ws.config),
                policy=policy,
                log=audit,
                run_id=runs[0] if runs and len(runs) == 1 else None,
                runs=runs or (),
            )
            lessons.append(Lesson(line.strip(), added, mid))
    return lessons


def start_trace_learning(ws: Any, store: Any) -> threading.Thread:
    """Learn in a background thread so the chat is not delayed."""
    from olav.llm.models import workspace_chat_model

    def work() -> None:
        try:
            lessons = learn_from_traces(ws, store, workspace_chat_model(ws))
            log.info("trace_learner stored %d lessons", sum(x.added for x in lessons))
        except Exception as exc:
            log.warning("trace_learner failed: %s", exc)

    thread = threading.Thread(target=work, name="olav-trace-learner", daemon=True)
    thread.start()
    return thread


def run_trace_learner(ws: Any) -> str:
    """The `trace-learn` cron job."""
    from olav.llm.models import workspace_chat_model
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(ws)
    lessons = learn_from_traces(ws, store, workspace_chat_model(ws))
    return (
        f"{sum(x.added for x in lessons)} lessons stored, "
        f"{sum(not x.added for x in lessons)} duplicates skipped"
    )
