"""Episodic memory: what happened in a chat session, stored as an ``episode``.

At the end of a session (or every N turns) a short structured summary is written from the
audit log: what was asked, what was done, what is still open. No model call is needed, so it
is cheap and cannot be invented. "Last time / 上次 / yesterday" queries then get the most
recent episodes, ranked by time as well as by similarity.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from olav.memory.decisions import Decision, DecisionLog, record
from olav.memory.lifecycle.archive import enforce_capacity
from olav.memory.policy import DEFAULTS, MemoryPolicy
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import scoped_id
from olav.memory.store.sql import sql_str
from olav.memory.store.table import MemoryStore

# Explicit cues that a request is about an earlier session. Words common in ordinary
# requests ("earlier", "previous", 之前, 继续) are left out: they would pull episodes into
# requests that never asked for them.
TEMPORAL = re.compile(
    r"\b(last time|last session|yesterday|pick up where (we|you|i) left off|"
    r"what did (we|i|you) do)\b|上次|上一次|上回|昨天",
    re.I,
)
MAX_ASKED = 6  # requests listed in an episode; the rest are counted
EPISODE_MAX_CHARS = 900  # an episode's text in a block (about a quarter of the budget)


@dataclass(frozen=True)
class SessionLog:
    """What the audit log holds about one session (see olav.audit.queries): its runs as
    (id, agent, status, query, started_at) and their tool calls as (tool, status, args, result),
    oldest first."""

    session_id: str
    runs: Sequence[tuple[Any, ...]]
    calls: Sequence[tuple[Any, ...]]


def summarise_session(log: SessionLog) -> dict[str, Any] | None:
    runs, calls = log.runs, log.calls
    if not runs:
        return None
    did = []
    for tool, status, args, _result in calls:
        if status == "success" and tool != "task":
            short = ", ".join(
                f"{k}={str(v)[:30]}" for k, v in json.loads(args or "{}").items() if k != "data"
            )
            did.append(f"{tool}({short})")
    open_items = [
        f"{q[:80]} ({status})" for _, _, status, q, _ in runs if status in ("error", "cancelled")
    ]
    return {
        "asked": [r[3][:120] for r in runs],
        "did": did[:12],
        "open": open_items[:6],
        "agents": sorted({r[1] for r in runs}),
        "started": runs[0][4].isoformat(),
        "turns": len(runs),
    }


def render_episode(summary: dict[str, Any], when: datetime) -> str:
    lines = [f"Session on {when:%Y-%m-%d %H:%M} UTC ({summary['turns']} turns)."]
    asked = [a[:80] for a in summary["asked"][:MAX_ASKED]]
    more = len(summary["asked"]) - len(asked)
    lines.append("Asked: " + "; ".join(asked) + (f"; and {more} more" if more > 0 else ""))
    if summary["did"]:
        lines.append("Done: " + "; ".join(summary["did"]))
    if summary["open"]:
        lines.append("Open: " + "; ".join(summary["open"]))
    return "\n".join(lines)


def write_episode(
    store: MemoryStore,
    log: SessionLog,
    agent: str,
    *,
    scope: str | None = None,
    policy: MemoryPolicy = DEFAULTS,
    decisions: DecisionLog | None = None,
) -> str | None:
    """Store the session's summary as its ``episode`` row (one per session, rewritten as
    the session goes on) in ``scope``: its operator's ``user:`` scope, since it quotes their
    requests (the agent's scope when none is named: the library's own tests and benchmarks);
    the write decision goes to ``decisions``."""
    summary = summarise_session(log)
    session_id = log.session_id
    if summary is None:
        return None
    now = datetime.now(UTC)
    text = render_episode(summary, now)
    rec = MemoryRecord(
        id=scoped_id(f"episode_{session_id}", scope or agent),
        text=text,
        category="episode",
        scope=scope or agent,
        origin="agent",
        confidence=policy.confidence_of("episode"),
        tags=["episode"],
        metadata={"session_id": session_id, "summary": summary, "body": text},
    )
    store.upsert([rec])
    enforce_capacity(store, policy, categories=["episode"], log=decisions)
    why = f"the summary of session {session_id} after {summary['turns']} turn(s)"
    record(decisions, None, [Decision("write", "captured", rec.id, why, "episode")])
    return rec.id


def recent_episodes(
    store: MemoryStore, scopes: list[str], limit: int = DEFAULTS.recent_episodes
) -> list[MemoryRecord]:
    where = (
        "category = 'episode' AND invalidated_at IS NULL AND scope IN ("
        + ", ".join(sql_str(s) for s in scopes)
        + ")"
    )
    rows = store.list_rows(where)
    epoch = datetime.min.replace(tzinfo=UTC)
    rows.sort(key=lambda r: r.updated_at or r.created_at or epoch, reverse=True)
    return rows[:limit]
