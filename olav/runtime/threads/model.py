"""What a thread store holds: threads, their turns, search hits, and the errors of claiming and
making one."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from olav.core.errors import OlavError

PREVIEW_CHARS = 80
TOOL_TEXT_CHARS = 2000  # a tool result in the index (search and show); the checkpoint has all


class ThreadBusyError(OlavError):
    pass


class ThreadNotFoundError(OlavError):
    pass


def busy_error(thread_id: str, pid: int | None, since: float | None) -> ThreadBusyError:
    when = time.strftime("%H:%M:%S", time.localtime(since)) if since else "now"
    who = f"pid {pid}, since {when}" if pid is not None else "just claimed"
    return ThreadBusyError(
        f"thread {thread_id} is running in another process ({who})",
        hint="One run per thread: wait for it to finish, or start a new thread (/new)",
    )


@dataclass(frozen=True)
class ThreadInfo:
    # the key its checkpoints, turns and runs are stored under: the id its owner gave it,
    # unless another owner's thread had that key first (then a key of its own)
    id: str
    agent: str
    owner: str  # the operator whose conversation it is ('' for one indexed from checkpoints)
    name: str
    created_at: float
    updated_at: float
    turns: int  # the person's messages
    preview: str  # the first of them
    running: str  # the run that holds the thread now ("" when none)
    metadata: dict[str, Any] = field(default_factory=dict)  # a client's (olav serve)
    # the id its owner knows it by (olav serve's thread_id): thread ids are per owner
    known_as: str = ""

    def __post_init__(self) -> None:
        if not self.known_as:
            object.__setattr__(self, "known_as", self.id)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent": self.agent,
            "owner": self.owner,
            "name": self.name,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "turns": self.turns,
            "preview": self.preview,
            "running": self.running,
            "metadata": self.metadata,
            "known_as": self.known_as,
        }


# a thread's row as the store reads it (thread_of), and an owner's thread by the id they gave it
THREAD_COLUMNS = (
    "id, agent, owner, name, created_at, updated_at, turns, preview, run_id, metadata, "
    "COALESCE(known_as, id)"
)
OWNED = f"SELECT {THREAD_COLUMNS} FROM olav_threads WHERE owner = ? AND COALESCE(known_as, id) = ?"


def thread_of(row: Sequence[Any]) -> ThreadInfo:
    return ThreadInfo(
        id=row[0],
        agent=row[1],
        owner=row[2],
        name=row[3],
        created_at=row[4],
        updated_at=row[5],
        turns=row[6],
        preview=row[7],
        running=row[8] or "",
        metadata=load_object(row[9]),
        known_as=row[10],
    )


@dataclass(frozen=True)
class Turn:
    seq: int
    role: str  # user | assistant | tool
    content: str
    name: str = ""  # the tool's name, for tool messages and calls
    created_at: float = 0.0


@dataclass(frozen=True)
class ThreadHit:
    thread: ThreadInfo
    turn: Turn
    before: Turn | None
    after: Turn | None


def new_thread_id() -> str:
    return uuid.uuid4().hex[:12]


def dump_object(value: dict[str, Any]) -> str:
    """A JSON column's text."""
    return json.dumps(value, ensure_ascii=False, default=str)


def load_object(raw: Any) -> dict[str, Any]:
    """A JSON column read back: an object, or ``{}`` for anything else."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def marks(values: Any) -> str:
    """The placeholders of an ``IN (…)`` list."""
    return ", ".join("?" for _ in values)


def turn_of(seq: int, message: Any) -> Turn | None:
    """A graph message as a turn of the index (system messages and empty ones are not)."""
    kind = getattr(message, "type", "")
    text = content_text(getattr(message, "content", ""))
    if kind == "human":
        return Turn(seq, "user", text)
    if kind == "ai":
        calls = getattr(message, "tool_calls", None) or []
        if calls:
            shown = "; ".join(
                f"{c['name']}({json.dumps(c.get('args') or {}, ensure_ascii=False)[:300]})"
                for c in calls
            )
            text = (text + "\n" if text else "") + "→ " + shown
            return Turn(seq, "assistant", text, name=",".join(c["name"] for c in calls))
        return Turn(seq, "assistant", text) if text else None
    if kind == "tool":
        return Turn(seq, "tool", text[:TOOL_TEXT_CHARS], name=str(getattr(message, "name", "")))
    return None


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content or "")
