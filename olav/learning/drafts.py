"""Everything that waits for a person's decision, in one list (``olav kb drafts``).

- **memory** and **guide** drafts: ``.curator_drafts/<intent>.draft.json``, written by
  ``propose_memory_draft`` in the chat or by the reflector's ``propose_guide_draft``. Confirm
  commits one through the curator (``confirmed_by="cli"``); reject archives it under
  ``.curator_drafts/rejected/``. Its id is the intent.
- **fix** proposals: ``exports/reflections/<stamp>_<slug>.md``, written by the reflector's
  ``draft_code_fix``. Confirm moves one to ``accepted/`` and reject to ``rejected/``: neither
  edits code, olav never applies a fix. Its id is the file stem.

Nothing here expires: an item waits until a person decides. Every decision is audited.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.audit.events import FIX_EVENTS
from olav.core.errors import NotFoundError
from olav.learning.curator import (
    GUIDE_CATEGORIES,
    Draft,
    commit_draft,
    draft_preview,
    list_drafts,
    mark_seen,
    pick_draft,
    reject_draft,
)
from olav.memory.store.roles import Author, WriteRefused

REFLECTIONS = "reflections"
FIX_APPLIED_NOTE = "Nothing was applied: olav never edits code. Make the change yourself."


@dataclass(frozen=True)
class PendingItem:
    """One draft or proposal waiting for a decision."""

    id: str
    kind: str  # memory | guide | fix | capture (a row written without a person, olav.learning.held)
    summary: str
    created_at: datetime
    seen: bool  # a person has been shown it (always True for fixes: a file they can open)
    path: Path


class DraftNotFoundError(NotFoundError):
    def __init__(self, item_id: str) -> None:
        super().__init__(
            f"no pending draft or fix proposal with id {item_id!r}",
            hint="List them with `olav kb drafts`",
        )


def _one_line(text: str, limit: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _draft_item(draft: Draft) -> PendingItem:
    category = str(draft.data["category"])
    kind = "guide" if category in GUIDE_CATEGORIES else "memory"
    summary = f"{category}: {_one_line(str(draft.data['body']))}"
    amends = draft.data.get("amends")
    if amends:  # keywords for a guide that exists (olav.learning.curator.amend)
        words = ", ".join(amends.get("add_keywords") or [])
        summary = f"{category}: add keyword(s) {_one_line(words, 40)} to {amends.get('guide')}"
    return PendingItem(draft.intent, kind, summary, draft.created_at, draft.seen, draft.path)


def _fix_created(path: Path) -> datetime:
    """The stamp the reflector put in the file name, else the file's modification time."""
    try:
        return datetime.strptime(path.stem[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _fix_item(path: Path) -> PendingItem:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    title = first.removeprefix("# ").removeprefix("Fix proposal: ").strip() or path.stem
    return PendingItem(path.stem, "fix", _one_line(title), _fix_created(path), True, path)


def _fix_folder(ws: Any) -> Path:
    return Path(ws.exports) / REFLECTIONS


def pending(ws: Any, *, store: Any = None, reader: Any = None) -> list[PendingItem]:
    """Every item waiting for a decision, oldest first; with a ``store``, also the captures
    waiting for a person that ``reader`` may read (olav.learning.held)."""
    items = [_draft_item(d) for d in list_drafts(ws.root)]
    folder = _fix_folder(ws)
    if folder.is_dir():
        items += [_fix_item(p) for p in folder.glob("*.md") if p.is_file()]
    if store is not None and reader is not None:
        from olav.learning.held import held_item, held_rows

        items += [held_item(r, PendingItem) for r in held_rows(store, reader)]
    return sorted(items, key=lambda item: item.created_at)


def find(ws: Any, item_id: str, *, store: Any = None, reader: Any = None) -> PendingItem:
    """The pending item with this exact id; ids come from :func:`pending`, never from a path."""
    for item in pending(ws, store=store, reader=reader):
        if item.id == item_id.strip():
            return item
    raise DraftNotFoundError(item_id)


def _held(ws: Any, item: PendingItem, store: Any, reader: Any, by: str, who: str | None) -> Any:
    """(the pending row, the actor deciding on it) for a capture item."""
    from olav.audit.recorder import AuditRecorder
    from olav.memory.lifecycle.ops import Actor

    actor = Actor(who or "user", by, reader, AuditRecorder(ws.audit_path))
    return store.read(item.id, reader), actor


def show(
    ws: Any, item_id: str, *, author: Author | None = None, store: Any = None, reader: Any = None
) -> tuple[PendingItem, str]:
    """The item and its full text (a draft's preview, when ``author`` may see it: None is the
    workspace's owner); marks a draft as seen."""
    item = find(ws, item_id, store=store, reader=reader)
    if item.kind == "capture":
        from olav.learning.held import held_text

        return item, held_text(store.read(item.id, reader))
    if item.kind == "fix":
        return item, item.path.read_text(encoding="utf-8")
    draft = pick_draft(ws.root, item.id, author=author)
    text = draft_preview(ws.root, draft)
    mark_seen(draft)
    return item, text


def confirm(
    ws: Any,
    item_id: str,
    *,
    store: Any = None,
    by: str = "cli",
    operator: str | None = None,
    author: Author | None = None,
    reader: Any = None,
) -> str:
    """Commit a memory/guide draft, or mark a fix proposal accepted. Returns what was done.
    ``by`` is where the person said yes (a curator confirmer: cli, console); ``operator`` who,
    when known; both are audited. ``author``: who confirms, with their role (None: the
    workspace's owner); a fix proposal is the owner's or an admin's to accept. A capture
    (with ``store`` and ``reader``) enters recall, if ``author`` may write its scope."""
    item = find(ws, item_id, store=store, reader=reader)
    if item.kind == "capture":
        from olav.memory.lifecycle.ops import confirm_pending

        rec, actor = _held(ws, item, store, reader, by, operator)
        if author is not None:
            author.check(rec.scope, rec.category, f"capture {rec.id}")
        confirm_pending(store, item.id, actor)
        return f"Confirmed {rec.category} {rec.id}: recall may use it now."
    if item.kind == "fix" and author is not None and not author.shares:
        raise WriteRefused(
            f"fix proposal {item.id} is the workspace's: {author.name} cannot accept it",
            hint="An admin or the workspace's owner decides on fix proposals",
        )
    if item.kind == "fix":
        target = _move_fix(ws, item, "accepted", by, operator)
        return f"Marked fix proposal {item.id} accepted ({target.name} in {target.parent}). " + (
            FIX_APPLIED_NOTE
        )
    if store is None:
        from olav.memory.store.table import MemoryStore

        store = MemoryStore.for_workspace(ws)
    return commit_draft(
        ws.root,
        store,
        intent=item.id,
        audit_path=ws.audit_path,
        confirmed_by=by,
        operator=operator,
        author=author,
    )


def reject(
    ws: Any,
    item_id: str,
    *,
    by: str = "cli",
    operator: str | None = None,
    author: Author | None = None,
    store: Any = None,
    reader: Any = None,
) -> str:
    """Archive the item unused: nothing reaches memory, no code changes. ``author``: who
    rejects (None: the workspace's owner); a fix proposal is the owner's or an admin's. A
    capture (with ``store`` and ``reader``) stays out of recall, retired."""
    item = find(ws, item_id, store=store, reader=reader)
    if item.kind == "capture":
        from olav.memory.lifecycle.ops import reject_pending

        rec, actor = _held(ws, item, store, reader, by, operator)
        if author is not None:
            author.check(rec.scope, rec.category, f"capture {rec.id}")
        reject_pending(store, item.id, actor)
        return f"Rejected {rec.category} {rec.id}: recall never uses it. Nothing was stored."
    if item.kind == "fix":
        if author is not None and not author.shares:
            raise WriteRefused(
                f"fix proposal {item.id} is the workspace's: {author.name} cannot reject it",
                hint="An admin or the workspace's owner decides on fix proposals",
            )
        target = _move_fix(ws, item, "rejected", by, operator)
    else:
        target = reject_draft(
            ws.root, item.id, audit_path=ws.audit_path, by=by, operator=operator, author=author
        )
    return f"Rejected {item.kind} {item.id}; archived as {target}. Nothing was stored."


def _move_fix(ws: Any, item: PendingItem, outcome: str, by: str, operator: str | None) -> Path:
    """Move a fix proposal to ``accepted/`` or ``rejected/`` (one rename) and audit it."""
    from olav.audit.recorder import AuditRecorder

    folder = item.path.parent / outcome
    folder.mkdir(exist_ok=True)
    target = folder / item.path.name
    os.replace(item.path, target)
    detail = {"id": item.id, "archive": target.relative_to(ws.root).as_posix(), "by": by}
    if operator:
        detail["operator"] = operator
    AuditRecorder(ws.audit_path).event(None, FIX_EVENTS[outcome], detail)
    return target.relative_to(ws.root)


def waiting_line(ws: Any) -> str | None:
    """The chat banner's reminder, or None when nothing waits."""
    count = len(pending(ws))
    if not count:
        return None
    noun = "draft is" if count == 1 else "drafts are"
    return f"{count} {noun} waiting for you: olav kb drafts"
