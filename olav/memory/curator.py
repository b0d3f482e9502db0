"""The two-turn, human-confirmed path from "remember that ..." to memory.

Turn 1 (:func:`propose_draft`) only writes ``.curator_drafts/<intent>.draft.json`` and returns
a preview. Turn 2 (:func:`commit_draft`) commits the latest (or named) draft; without a draft
it fails with "no draft found". Drafts expire after 24 hours.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from olav.errors import OlavError
from olav.memory.schema import MemoryRecord

DRAFTS = ".curator_drafts"
DRAFT_TTL = timedelta(hours=24)
CONFIRM_PROMPT = "Confirm? (yes / ok / 可以 / 确认 / 入库)"


def sanitise_intent(intent: str) -> str:
    clean = re.sub(r"[^a-z0-9_]+", "_", intent.lower()).strip("_")[:64]
    if not clean:
        raise OlavError(
            f"intent {intent!r} has no usable characters",
            hint="Use a snake_case name such as r1_loopback",
        )
    return clean


def propose_draft(
    root: Path,
    *,
    intent: str,
    keywords: list[str],
    body: str,
    category: str,
    agent: str = "core",
    scope: str | None = None,
) -> str:
    name = sanitise_intent(intent)
    if not body.strip():
        raise OlavError("the draft has an empty body", hint="Say what should be remembered")
    draft = {
        "intent": name,
        "keywords": keywords,
        "body": body.strip(),
        "category": category,
        "agent": sanitise_intent(agent),
        "scope": scope or ("global" if agent == "core" else agent),
        "created_at": datetime.now(UTC).isoformat(),
    }
    folder = root / DRAFTS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.draft.json").write_text(json.dumps(draft, ensure_ascii=False, indent=1))
    preview = yaml.safe_dump(
        {k: draft[k] for k in ("intent", "category", "scope", "keywords", "body")},
        allow_unicode=True,
        sort_keys=False,
    )
    return (
        f"Draft saved (nothing stored yet). Quote this preview to the user:\n\n{preview}\n"
        f"{CONFIRM_PROMPT}"
    )


def _latest_draft(root: Path, intent: str | None) -> Path:
    folder = root / DRAFTS
    if intent:
        path = folder / f"{sanitise_intent(intent)}.draft.json"
        candidates = [path] if path.is_file() else []
    else:
        candidates = sorted(folder.glob("*.draft.json"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise OlavError(
            "no draft found",
            hint="Call propose_memory_draft first and show the preview to the user",
        )
    return candidates[-1]


def commit_draft(
    root: Path, store: Any, *, intent: str | None = None, audit_path: Path | None = None
) -> str:
    path = _latest_draft(root, intent)
    draft = json.loads(path.read_text(encoding="utf-8"))
    created = datetime.fromisoformat(draft["created_at"])
    if datetime.now(UTC) - created > DRAFT_TTL:
        raise OlavError(
            f"draft {draft['intent']} expired (older than 24 h)",
            hint="Propose it again and ask the user to confirm",
        )
    if draft["category"] == "usage_guide":
        guide_dir = root / draft["agent"] / "guides"
        guide_dir.mkdir(parents=True, exist_ok=True)
        guide = {
            "intent": draft["intent"],
            "agent": draft["agent"],
            "source_tier": "user",
            "keywords": draft["keywords"] or [draft["intent"]],
            "body": draft["body"],
        }
        gpath = guide_dir / f"{draft['intent']}.guide.yaml"
        gpath.write_text(yaml.safe_dump(guide, allow_unicode=True, sort_keys=False))
        from olav.memory.guides import import_guides

        import_guides(store, [gpath], base=root)
        mem_id = f"guide_{draft['agent']}_{draft['intent']}"
    else:
        mem_id = f"{draft['category']}_{draft['intent']}"
        text = f"{draft['intent'].replace('_', ' ')}: {draft['body']}\n" + ", ".join(
            draft["keywords"]
        )
        store.upsert(
            [
                MemoryRecord(
                    id=mem_id,
                    text=text,
                    category=draft["category"],
                    scope=draft["scope"],
                    origin="user",
                    confidence=1.0,
                    tags=draft["keywords"][:8],
                    metadata={"intent": draft["intent"], "body": draft["body"], "curator": True},
                )
            ]
        )
    archive = root / DRAFTS / "committed"
    archive.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    path.replace(archive / f"{draft['intent']}_{stamp}.json")
    if audit_path is not None:
        from olav.audit.recorder import AuditRecorder

        AuditRecorder(audit_path).memory_event(mem_id, "commit", "memory_curator", draft)
    return f"Committed to memory as {mem_id}."
