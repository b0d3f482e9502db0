"""trace_learner: failed and cancelled runs become one-line reflection constraints.

Reads the failed runs (and their failed tool calls) from audit.duckdb, asks the model for
one-line lessons, and stores them as reflections (scope global, 30-day TTL, real embedding).
A lesson close to an existing one is skipped. Runs learned once are not learned again.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from olav.audit.db import connect
from olav.audit.recorder import AuditRecorder
from olav.learning.llm import ask_model, extract_json
from olav.log import get_logger
from olav.memory.calibration import dedup_distance
from olav.memory.lessons import add_reflection

log = get_logger("trace_learner")
_LOCK = threading.Lock()

PROMPT = """You review failed runs of an AI agent and write lessons for next time.
For each failure below, write ONE line of the form
"When <situation>, do not <action>; instead <better action>." Name the exact tool.
Skip failures that teach nothing (e.g. the user just cancelled). Answer with a JSON array
of strings and nothing else.

Failures:
{failures}
"""


@dataclass
class Lesson:
    text: str
    added: bool
    memory_id: str


def failed_runs(audit_db: Any, *, hours: float, limit: int) -> list[dict[str, Any]]:
    since = datetime.now(UTC) - timedelta(hours=hours)
    with connect(audit_db) as con:
        learned = {
            r[0]
            for r in con.execute(
                "SELECT json_extract_string(detail, '$.run_id') FROM events "
                "WHERE kind = 'trace_learned'"
            ).fetchall()
        }
        runs = con.execute(
            "SELECT id, agent, query, status, error FROM runs WHERE status IN "
            "('error', 'cancelled') AND started_at >= ? ORDER BY started_at DESC LIMIT ?",
            [since, limit * 3],
        ).fetchall()
        out = []
        for rid, agent, query, status, error in runs:
            if rid in learned:
                continue
            calls = con.execute(
                "SELECT tool, args, result FROM tool_calls WHERE run_id = ? AND status = 'error'"
                " ORDER BY created_at",
                [rid],
            ).fetchall()
            out.append(
                {
                    "run_id": rid,
                    "agent": agent,
                    "request": query,
                    "status": status,
                    "error": error,
                    "failed_tools": [
                        {"tool": t, "args": json.loads(a or "{}"), "result": (r or "")[:300]}
                        for t, a, r in calls
                    ],
                }
            )
            if len(out) >= limit:
                break
    return out


def learn_from_traces(
    ws: Any, store: Any, model: Any, *, hours: float = 24, limit: int = 10
) -> list[Lesson]:
    with _LOCK:  # one learner at a time per process
        runs = failed_runs(ws.audit_path, hours=hours, limit=limit)
        if not runs:
            return []
        failures = "\n".join(json.dumps(r, ensure_ascii=False) for r in runs)
        answer = extract_json(ask_model(model, PROMPT.format(failures=failures)))
        lines = answer if isinstance(answer, list) else answer.get("lessons", [])
        lessons: list[Lesson] = []
        threshold = dedup_distance(ws.config, store.embedder.name)
        for line in lines:
            if isinstance(line, str) and 10 <= len(line.strip()) <= 400:
                added, mid = add_reflection(
                    store, line, source="trace_learner", dedup_distance=threshold
                )
                lessons.append(Lesson(line.strip(), added, mid))
        audit = AuditRecorder(ws.audit_path)
        for r in runs:
            audit.event(
                r["run_id"], "trace_learned", {"run_id": r["run_id"], "lessons": len(lessons)}
            )
        return lessons


def start_trace_learning(ws: Any, store: Any) -> threading.Thread:
    """Learn in a background thread so the chat is not delayed."""
    from olav.runtime.models import make_chat_model

    def work() -> None:
        try:
            lessons = learn_from_traces(ws, store, make_chat_model(ws.config, root=ws.root))
            log.info("trace_learner stored %d lessons", sum(x.added for x in lessons))
        except Exception as exc:
            log.warning("trace_learner failed: %s", exc)

    thread = threading.Thread(target=work, name="olav-trace-learner", daemon=True)
    thread.start()
    return thread


def run_trace_learner(ws: Any) -> str:
    """The `trace-learn` cron job."""
    from olav.memory.store import MemoryStore
    from olav.runtime.models import make_chat_model

    store = MemoryStore.for_workspace(ws)
    lessons = learn_from_traces(ws, store, make_chat_model(ws.config, root=ws.root))
    return (
        f"{sum(x.added for x in lessons)} lessons stored, "
        f"{sum(not x.added for x in lessons)} duplicates skipped"
    )
