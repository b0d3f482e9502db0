"""What a person does to one memory: pin, quarantine, release, edit and forget.

Each operation is made by an :class:`Actor`: who (``name``), through what (``via``: ``cli``,
``console``, ``store``, ...), as which reader (a row the actor may not read is "no memory with
id ...", so an id never reveals another operator's private row), and where its audit event goes
(``audit``: anything with ``memory_event(memory_id, action, actor, detail)``, such as
olav.audit.recorder.AuditRecorder; memory does not import the audit package). Every operation is
audited the same way, its detail naming ``via`` as ``by``, whichever client asked.

The clients (``olav memory``, the console, the store API) check what is theirs to check (who may
change which row on a shared server, a form's fields) and render; the change itself, its rule and
its audit event are here, written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from olav.core.errors import MemoryStoreError, NotFoundError
from olav.memory.store.schema import GUIDE_CATEGORIES, QUARANTINE, MemoryRecord
from olav.memory.store.scopes import EVERYONE, Reader
from olav.memory.store.table import MemoryStore

TEXT_KEPT = 2000  # characters of the old or deleted text the audit event keeps
HELD_BY_HAND = "console"  # the reason a row quarantined by a person carries (quarantine:console)


class NotApplicable(MemoryStoreError):
    """The row may be read, but the operation does not apply to it as it is (retired already,
    not in quarantine); the message says why."""


@dataclass(frozen=True)
class Actor:
    """Who changes a memory: ``name`` (the audit's actor: ``user`` in the terminal, the
    operator on a server), ``via`` (the client), ``reader`` (the rows they may touch) and
    ``audit`` (where the event goes; None: not audited, the library's own callers)."""

    name: str = "user"
    via: str = "library"
    reader: Reader = EVERYONE
    audit: Any = None

    def record(self, memory_id: str, action: str, detail: dict[str, Any] | None = None) -> None:
        if self.audit is not None:
            detail = {**(detail or {}), "by": self.via}
            self.audit.memory_event(memory_id, action, self.name, detail)


def readable_row(store: MemoryStore, memory_id: str, actor: Actor) -> MemoryRecord:
    """The row ``memory_id`` if ``actor`` may read it; else "no memory with id ..." (the same
    answer for a row that is not there)."""
    rec = store.read(memory_id, actor.reader)
    if rec is None:
        raise NotFoundError(f"no memory with id {memory_id!r}", hint="See `olav memory list`")
    return rec


def pin(store: MemoryStore, memory_id: str, actor: Actor) -> MemoryRecord:
    """It never decays, never expires, and its confidence is 1.0 (audited ``pin``)."""
    rec = readable_row(store, memory_id, actor)
    meta = dict(rec.metadata, pinned=True)
    out = store.update(memory_id, metadata=meta, confidence=1.0, expires_at=None)
    actor.record(memory_id, "pin")
    return out


def edit_refusal(rec: MemoryRecord) -> str | None:
    """Why ``rec``'s text cannot be edited (a guide comes from its file; a retired row is
    history), or None: :func:`edit` refuses with it, and a client may ask first."""
    if rec.category in GUIDE_CATEGORIES:
        source = rec.metadata.get("source")
        where = f"its file {source}" if source else "the file or draft it came from"
        return (
            f"{rec.id} is a guide: it is edited in {where}, not here. Change the YAML, then "
            "run `olav kb import-guides`"
        )
    if rec.invalidated_at is not None:
        return f"memory {rec.id} is retired: it can no longer be edited"
    return None


def edit(store: MemoryStore, memory_id: str, text: str, actor: Actor) -> MemoryRecord:
    """The new text, re-embedded; a curator row's body follows it; the old text goes to the
    audit (``edit``, ``old_text``). A guide or a retired row is refused
    (:func:`edit_refusal`)."""
    rec = readable_row(store, memory_id, actor)
    refused = edit_refusal(rec)
    if refused is not None:
        raise NotApplicable(refused)
    meta = dict(rec.metadata)
    if "body" in meta:
        meta["body"] = text
    out = store.update(memory_id, text=text, metadata=meta)
    actor.record(memory_id, "edit", {"old_text": rec.text[:TEXT_KEPT]})
    return out


def forget(
    store: MemoryStore, memory_id: str, actor: Actor, *, purge: bool = False
) -> MemoryRecord:
    """Retire the row: kept for history (``deleted_by``), never recalled again (audited
    ``delete``); with ``purge``, remove it from the table for good (audited ``purge``). Either
    way the event keeps its text. Returns the row as it was before a purge, as retired else."""
    rec = readable_row(store, memory_id, actor)
    if purge:
        store.delete(ids=[memory_id])
        actor.record(memory_id, "purge", {"text": rec.text[:TEXT_KEPT]})
        return rec
    meta = dict(rec.metadata, deleted_by=actor.name)
    out = store.update(memory_id, invalidated_at=datetime.now(UTC), metadata=meta)
    actor.record(memory_id, "delete", {"text": rec.text[:TEXT_KEPT]})
    return out


def quarantine(
    store: MemoryStore, memory_id: str, actor: Actor, *, reason: str = HELD_BY_HAND
) -> MemoryRecord:
    """Hold a live row back from recall without deleting it, as the injection scanner does:
    retired, ``superseded_by = "quarantine:<reason>"`` (audited ``quarantine``, with its text).
    :func:`release` returns it. A retired row is refused: recall never reads it already."""
    rec = readable_row(store, memory_id, actor)
    if rec.invalidated_at is not None:
        raise NotApplicable(f"memory {rec.id} is retired already: recall never reads it")
    out = store.update(
        memory_id, invalidated_at=datetime.now(UTC), superseded_by=QUARANTINE + reason
    )
    actor.record(memory_id, "quarantine", {"text": rec.text[:TEXT_KEPT]})
    return out


def release(store: MemoryStore, memory_id: str, actor: Actor) -> MemoryRecord:
    """Return a quarantined row into recall (audited ``release``). A row that is not in
    quarantine, or that the actor may not read, is "not in quarantine" (one answer for both)."""
    rec = store.read(memory_id, actor.reader)
    if rec is None or not rec.quarantined:
        raise NotApplicable(
            f"memory {memory_id} is not in quarantine", hint="See `olav memory quarantine`"
        )
    out = store.update(memory_id, invalidated_at=None, superseded_by=None)
    actor.record(memory_id, "release")
    return out


def confirm_pending(store: MemoryStore, memory_id: str, actor: Actor) -> MemoryRecord:
    """A person's yes to a row written without one (a capture, a client's report): it enters
    recall (audited ``confirm``). A row that is not pending, or that the actor may not read,
    is "not pending" (one answer for both)."""
    rec = store.read(memory_id, actor.reader)
    if rec is None or not rec.pending:
        raise NotApplicable(f"memory {memory_id} is not pending", hint="See `olav kb drafts`")
    meta = dict(rec.metadata, confirmed_by=actor.name)
    out = store.update(memory_id, invalidated_at=None, superseded_by=None, metadata=meta)
    actor.record(memory_id, "confirm", {"text": rec.text[:TEXT_KEPT], "was": rec.superseded_by})
    return out


def reject_pending(store: MemoryStore, memory_id: str, actor: Actor) -> MemoryRecord:
    """A person's no to a pending row: it stays out of recall, retired (audited ``reject``);
    the same action captured again is not stored again (its id is taken)."""
    rec = store.read(memory_id, actor.reader)
    if rec is None or not rec.pending:
        raise NotApplicable(f"memory {memory_id} is not pending", hint="See `olav kb drafts`")
    meta = dict(rec.metadata, rejected_by=actor.name)
    out = store.update(memory_id, superseded_by=None, metadata=meta)
    actor.record(memory_id, "reject", {"text": rec.text[:TEXT_KEPT], "was": rec.superseded_by})
    return out
