"""Import a conversation transcript (an incident channel, a team chat, an interview) as memory.

One memory per message, written the way olav stores sequential memories
(:func:`olav.memory.ingest.context.conversation_records`): the text carries its date, the context
holds the two messages before and after it from the same session, and ``event_at`` is when it
was said. A question such as "what did Lin say about the uplink in May?" then finds a message
by its own words, by the talk around it and by its date.

The file is JSON Lines (or a JSON list) of objects::

    {"speaker": "lin", "text": "uplink flapped again", "time": "2024-05-08T09:12:00Z"}

``time`` (ISO 8601) and ``session`` are optional. Without ``session``, a gap of more than
``session_gap_hours`` between two messages starts a new one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from olav.core.errors import OlavError
from olav.memory.ingest.context import Utterance, conversation_records
from olav.memory.ingest.documents import slug
from olav.memory.lifecycle.ops import Actor
from olav.memory.policy import DEFAULTS
from olav.memory.store.sql import sql_str
from olav.memory.store.table import MemoryStore
from olav.memory.store.textvectors import embed_missing

HINT = 'Each line needs {"speaker": ..., "text": ...}, optionally "time" (ISO 8601) and "session"'


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    speaker: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1)
    time: str | None = None
    session: str | int | None = None

    @field_validator("time")
    @classmethod
    def _iso(cls, v: str | None) -> str | None:
        if v is not None:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
        return v

    def when(self) -> datetime | None:
        if self.time is None:
            return None
        t = datetime.fromisoformat(self.time.replace("Z", "+00:00"))
        return t if t.tzinfo else t.replace(tzinfo=UTC)


@dataclass
class ChatImport:
    key: str
    messages: int
    sessions: int
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "messages": self.messages,
            "sessions": self.sessions,
            "added": len(self.added),
            "updated": len(self.updated),
            "removed": self.removed,
        }


def read_messages(path: Path) -> list[Message]:
    """Parse and validate the whole file; the first bad line is a one-line error."""
    if not path.is_file():
        raise OlavError(f"{path} does not exist", hint="Pass a .jsonl or .json transcript")
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise OlavError(f"{path} is not UTF-8 text", hint="Save the transcript as UTF-8") from None
    items: list[tuple[int, Any]] = []
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise OlavError(f"{path} is not valid JSON: {exc}", hint=HINT) from None
        if not isinstance(data, list):
            raise OlavError(f"{path}: expected a JSON list of messages", hint=HINT)
        items = [(i, m) for i, m in enumerate(data, start=1)]
        where = "message"
    else:
        for n, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append((n, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise OlavError(f"{path}: line {n} is not JSON ({exc.msg})", hint=HINT) from None
        where = "line"
    messages = []
    for n, item in items:
        try:
            messages.append(Message.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(message)"
            msg = f"{path}: {where} {n}: field '{loc}': {err['msg']}"
            raise OlavError(msg, hint=HINT) from None
    if not messages:
        raise OlavError(f"{path} holds no messages", hint=HINT)
    return messages


def sessions_of(messages: list[Message], gap_hours: float) -> list[str]:
    """The session of each message: given, or numbered by gaps in time."""
    out: list[str] = []
    number, last = 1, None
    for m in messages:
        if m.session is not None:
            out.append(str(m.session))
            continue
        when = m.when()
        if when and last and when - last > timedelta(hours=gap_hours):
            number += 1
        last = when or last
        out.append(str(number))
    return out


def import_chat(
    store: MemoryStore,
    path: Path,
    *,
    base: Path,
    scope: str = "global",
    session_gap_hours: float = 4.0,
    progress: Callable[[int, int], None] | None = None,
    actor: Actor | None = None,
) -> ChatImport:
    """Write one memory per message, replacing an earlier import of the same file.
    ``progress(done, total)`` follows the embedding of the messages; ``actor``: who imports
    it, and where its ``import`` event goes (olav.memory.lifecycle.ops.Actor)."""
    messages = read_messages(path)
    try:
        key = str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        key = path.name
    prefix = f"chat_{slug(str(Path(key).with_suffix('')))}_"
    sessions = sessions_of(messages, session_gap_hours)
    turns = [
        Utterance(f"{prefix}{i:05d}", m.speaker, m.text, s, m.when())
        for i, (m, s) in enumerate(zip(messages, sessions, strict=True))
    ]
    records = conversation_records(
        turns,
        category="document",
        scope=scope,
        origin="document",
        metadata={"doc_id": prefix.rstrip("_"), "source": key, "kind": "chat"},
    )
    for rec in records:
        rec.confidence = DEFAULTS.confidence_of("document")
        rec.metadata["intent"] = f"{key} · {rec.metadata['speaker']}"
    done = [0]

    def advance(n: int) -> None:
        done[0] += n
        if progress:
            progress(done[0], len(records))

    embed_missing(store.embedder, records, progress=advance)
    result = store.upsert(records)
    ids = {r.id for r in records}
    stale = [
        r.id
        for r in store.list_rows(f"id LIKE {sql_str(prefix + '%')}")
        if r.id not in ids and r.id.startswith(prefix)
    ]
    removed = store.delete(ids=stale) if stale else 0
    imported = ChatImport(
        key, len(records), len(set(sessions)), result.added, result.updated, removed
    )
    if actor is not None:
        actor.record(f"chat:{key}", "import", {"file": str(path), **imported.to_json()})
    return imported
