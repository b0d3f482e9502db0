"""What both turns of the curator share: the drafts folder, names, categories, and reading
pending drafts back."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text
from olav.memory.store.roles import Author
from olav.memory.store.schema import GUIDE_CATEGORIES

DRAFTS = ".curator_drafts"
DRAFT_VERSION = 1
CONFIRM_PROMPT = "Confirm? (yes / ok / 可以 / 确认 / 入库)"
NOT_CONFIRMED = "the user has not confirmed yet: show the preview and wait for their reply"
# who may confirm a commit: the chat's approval prompt, `olav kb drafts confirm`, the
# person's yes in an MCP client's elicitation dialog (olav mcp), or the Confirm button of the
# web console (olav serve: a logged-in person's form, never an API token)
CONFIRMERS = ("chat", "cli", "mcp", "console")
ACTOR = "memory_curator"

ROW_CATEGORIES = ("fact", "preference", "decision", "expert_knowledge")
CATEGORIES = (*GUIDE_CATEGORIES, *ROW_CATEGORIES, "document", "topology")
PREVIEW_CHARS = 1500


def sanitise_intent(intent: str) -> str:
    """A safe snake_case file stem: ``../../x`` becomes ``x``; nothing can leave the folder."""
    clean = re.sub(r"[^a-z0-9_]+", "_", intent.lower()).strip("_")[:64].strip("_")
    if not clean:
        raise OlavError(
            f"intent {intent!r} has no usable characters",
            hint="Use a snake_case name such as r1_loopback",
        )
    return clean


def sanitise_agent(agent: str) -> str:
    clean = re.sub(r"[^a-z0-9_-]+", "_", agent.strip().lower()).strip("_-")[:64]
    if not clean:
        raise OlavError(
            f"agent {agent!r} is not a name", hint="Use an agent folder name, e.g. core"
        )
    return clean


def clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n… ({len(text) - limit} more characters)"


def now() -> datetime:
    return datetime.now(UTC)


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1))


@dataclass
class Draft:
    path: Path
    data: dict[str, Any]

    @property
    def intent(self) -> str:
        return str(self.data["intent"])

    @property
    def created_at(self) -> datetime:
        return datetime.fromisoformat(str(self.data["created_at"]))

    @property
    def seen(self) -> bool:
        return bool(self.data.get("seen_at"))


def load_draft(path: Path) -> Draft:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        draft = Draft(path, data)
        _ = draft.created_at, data["intent"], data["category"], data["body"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OlavError(
            f"draft {path.name} is unreadable ({type(exc).__name__})",
            hint="Propose it again with propose_memory_draft",
        ) from None
    return draft


def list_drafts(root: Path) -> list[Draft]:
    """Pending drafts, oldest first. Unreadable files are skipped."""
    out = []
    for path in (root / DRAFTS).glob("*.draft.json"):
        try:
            out.append(load_draft(path))
        except OlavError:
            continue
    return sorted(out, key=lambda d: d.created_at)


def no_draft() -> OlavError:
    return OlavError(
        "no draft found",
        hint="Call propose_memory_draft first, show the preview to the user and wait for "
        "their confirmation",
    )


def pick_draft(root: Path, intent: str | None = None, *, author: Author | None = None) -> Draft:
    """The named draft, or the newest one, of those ``author`` may see (None: the workspace's
    owner at its terminal, who sees every draft). Raises "no draft found" when there is none:
    another operator's draft is missing, the same as one that never was."""
    if intent:
        path = root / DRAFTS / f"{sanitise_intent(intent)}.draft.json"
        if not path.is_file():
            raise no_draft()
        draft = load_draft(path)
        if author is not None and not author.sees_draft(draft.data):
            raise no_draft()
        return draft
    drafts = [d for d in list_drafts(root) if author is None or author.sees_draft(d.data)]
    if not drafts:
        raise no_draft()
    return drafts[-1]


def mark_seen(draft: Draft) -> None:
    """Record the first time a person was shown the draft (kept on later showings)."""
    if draft.seen or not draft.path.is_file():
        return
    draft.data["seen_at"] = now().isoformat()
    write_json(draft.path, draft.data)
