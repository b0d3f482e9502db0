"""Turn 2: ``commit_draft`` stores a draft a person confirmed where its category belongs,
archives it and records the commit in the audit log; ``reject_draft`` archives a refused one."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from olav.audit.events import DRAFT_REJECTED_EVENT
from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text
from olav.learning.curator.common import (
    ACTOR,
    CONFIRMERS,
    GUIDE_CATEGORIES,
    NOT_CONFIRMED,
    Draft,
    clip,
    now,
    pick_draft,
    write_json,
)
from olav.learning.curator.propose import draft_preview, prepare
from olav.memory.store.roles import Author, WriteRefused
from olav.memory.store.schema import MemoryRecord
from olav.memory.store.scopes import EVERYONE


def draft_for_consent(
    root: Path,
    intent: str | None,
    *,
    run_id: str | None = None,
    audit_path: Path | None = None,
    author: Author | None = None,
) -> tuple[Draft, str]:
    """The draft a chat commit would store and its preview, for the person's y/N prompt
    (``author``: whose drafts it picks from, None for the owner's terminal). Refuses (like the
    commit would) a draft proposed in the current run."""
    draft = pick_draft(root, intent, author=author)
    _check_confirmed(draft, run_id, audit_path)
    return draft, draft_preview(root, draft)


def _run_start(audit_path: Path | None, run_id: str | None) -> tuple[str, float] | None:
    """(id, start) of ``run_id`` or of the newest running run; None when the log cannot tell."""
    if audit_path is None or not Path(audit_path).is_file():
        return None
    from olav.audit.queries import run_start

    return run_start(Path(audit_path), run_id)


def _check_confirmed(draft: Draft, run_id: str | None, audit_path: Path | None) -> None:
    """Refuse a draft proposed in the current run: the user has not replied to it yet.

    The draft's own run id decides when both are known. Otherwise the draft must be older than
    the start of the current run (``run_id``, or the newest running run in the audit log).
    """
    proposed_in = draft.data.get("run_id")
    if run_id is not None and proposed_in is not None:
        if proposed_in == run_id:
            raise OlavError(NOT_CONFIRMED)
        return
    current = _run_start(audit_path, run_id)
    if current is None:
        return
    if proposed_in == current[0] or draft.created_at.timestamp() >= current[1]:
        raise OlavError(NOT_CONFIRMED)


def _commit_guide(root: Path, store: Any, d: dict[str, Any]) -> tuple[str, list[str]]:
    from pydantic import ValidationError

    from olav.memory.ingest.guides import Guide, import_guides

    guide = {
        "schema_version": 1,
        "intent": d["intent"],
        "agent": d["agent"],
        "category": d["category"],
        "source_tier": "user",
        "keywords": d["keywords"],
        "body": d["body"] + "\n",
    }
    if d["scope"] != ("global" if d["agent"] == "core" else d["agent"]):
        guide["scope"] = d["scope"]
    try:
        Guide.model_validate(guide)
    except ValidationError as exc:
        raise OlavError(f"the guide is not valid: {exc.errors()[0]['msg']}") from None
    guide_dir = root / d["agent"] / "guides"
    guide_dir.mkdir(parents=True, exist_ok=True)
    gpath = guide_dir / f"{d['intent']}.guide.yaml"
    atomic_write_text(gpath, yaml.safe_dump(guide, allow_unicode=True, sort_keys=False, width=100))
    summary = import_guides(store, [gpath], base=root)
    if summary.errors:
        raise OlavError(summary.errors[0].one_line())
    mem_id = f"guide_{d['agent']}_{d['intent']}"
    return mem_id, [mem_id]


def _commit_row(store: Any, d: dict[str, Any], root: Path) -> tuple[str, list[str]]:
    """A fact/preference/decision: the intent is its subject, so a new value for the same
    subject (or a near-duplicate) conflicts with the old row; the workspace's policy says
    what that does (by default the old row is superseded and stays for history)."""
    from olav.memory.lifecycle.conflicts import remember

    mem_id = f"{d['category']}_{d['intent']}"
    existing = store.read(mem_id, EVERYONE)
    if existing is not None and existing.metadata.get("body", "").strip() != d["body"].strip():
        # a new value for the same subject: a new row, so the old one stays as history
        digest = hashlib.sha256(d["body"].strip().lower().encode()).hexdigest()[:8]
        mem_id = f"{mem_id}_{digest}"
    words = d["intent"].replace("_", " ")
    rec = MemoryRecord(
        id=mem_id,
        text=f"{words}: {d['body']}\n" + ", ".join(d["keywords"]),
        category=d["category"],
        scope=d["scope"],
        origin="user",
        confidence=1.0,
        tags=d["keywords"][:8],
        metadata={
            "intent": d["intent"],
            "subject": d["intent"],
            "agent": d["agent"],
            "body": d["body"],
            "keywords": d["keywords"],
            "curator": True,
        },
    )
    policy, log = _control_plane(root)
    result = remember(store, rec, policy=policy, log=log)
    return result.memory_id, [result.memory_id, *result.replaced]


def _commit_topology(store: Any, d: dict[str, Any], fmt: str) -> tuple[str, list[str]]:
    from olav.memory.ingest.diagrams import diagram_labels

    mem_id = f"topology_{d['intent']}"
    labels = diagram_labels(d["body"], fmt)
    words = d["intent"].replace("_", " ")
    head = f"{words} ({d['intent']}) {fmt} topology\n{', '.join(d['keywords'])}"
    # raw SVG markup is noise to an embedder: embed its labels; diagram sources embed as they are
    content = "\n".join(labels) if fmt == "svg" else d["body"][:8000]
    store.upsert(
        [
            MemoryRecord(
                id=mem_id,
                text=f"{head}\n{'nodes: ' + ', '.join(labels) if labels else ''}\n\n{content}",
                category="topology",
                scope=d["scope"],
                origin="user",
                confidence=1.0,
                tags=[*d["keywords"][:7], fmt],
                metadata={
                    "intent": d["intent"],
                    "agent": d["agent"],
                    "format": fmt,
                    "body": d["body"],
                    "labels": labels,
                    "keywords": d["keywords"],
                    "source": d.get("source"),
                    "curator": True,
                },
            )
        ]
    )
    return mem_id, [mem_id]


def _archive(draft: Draft, outcome: str, at: datetime, extra: dict[str, Any]) -> Path:
    """Move the draft to ``committed/`` or ``rejected/`` with what became of it."""
    folder = draft.path.parent / outcome
    folder.mkdir(parents=True, exist_ok=True)
    stamp = at.strftime("%Y%m%dT%H%M%S")
    target = folder / f"{draft.intent}_{stamp}.json"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{draft.intent}_{stamp}_{n}.json"
    write_json(target, {**draft.data, f"{outcome}_at": at.isoformat(), **extra})
    draft.path.unlink()
    return target


def _require_confirmation(confirmed_by: str | None) -> None:
    if confirmed_by not in CONFIRMERS:
        raise OlavError(
            "a memory is committed only after a person confirms it",
            hint="Ask them to answer y at the chat's prompt, or to run "
            "`olav kb drafts confirm <intent>`",
        )


def _store_draft(root: Path, store: Any, d: dict[str, Any]) -> tuple[str, list[str], str]:
    """Write the draft where its category belongs: (memory id, all ids, what was done)."""
    info = prepare(root, d)
    cat = d["category"]
    if d.get("amends"):  # keywords for a guide that exists, in its own file
        from olav.learning.curator.amend import commit_amendment

        return commit_amendment(root, store, d)
    if cat in GUIDE_CATEGORIES:
        mem_id, ids = _commit_guide(root, store, d)
        return mem_id, ids, f"Committed guide {mem_id} ({info['file']})."
    if cat == "document":
        from olav.memory.ingest.documents import write_document

        res = write_document(store, info["records"], info["summary"])
        done = (
            f'Committed document "{res.title}": {len(res.chunk_ids)} chunk(s) '
            f"({res.chunk_ids[0]}…) and the summary guide {res.summary_id}."
        )
        return res.summary_id, [res.summary_id, *res.chunk_ids], done
    if cat == "topology":
        mem_id, ids = _commit_topology(store, d, info["format"])
        return mem_id, ids, f"Committed {info['format']} topology as {mem_id}."
    mem_id, ids = _commit_row(store, d, root)
    return mem_id, ids, f"Committed to memory as {mem_id}."


def _control_plane(root: Path) -> tuple[Any, Any]:
    """The memory policy of the workspace at ``root`` and its decision log (the audit), or
    the default policy and no log outside a workspace."""
    from olav.core.config import OLAV_DIR, Workspace
    from olav.memory.policy import DEFAULTS, policy_for

    if not (root / OLAV_DIR).is_dir():
        return DEFAULTS, None
    from olav.audit.recorder import AuditRecorder

    ws = Workspace.open(root)
    log = AuditRecorder(ws.audit_path) if ws.audit_path.is_file() else None
    return policy_for(ws.config), log


def _audit_commit(audit_path: Path, mem_id: str, d: dict[str, Any], detail: dict[str, Any]) -> None:
    from olav.audit.recorder import AuditRecorder

    detail = {
        "intent": d["intent"],
        "category": d["category"],
        "agent": d["agent"],
        "scope": d["scope"],
        "keywords": d["keywords"],
        "format": d.get("format"),
        "source": d.get("source"),
        "body": clip(d["body"], 2000),
        "proposed_run_id": d.get("run_id"),
        # who asked for it: a run's author, or the remote operator of a store API put
        "proposed_by": d.get("author") or d.get("operator"),
        "draft_created_at": d["created_at"],
        **detail,
    }
    AuditRecorder(audit_path).memory_event(mem_id, "commit", ACTOR, detail)


def commit_draft(
    root: Path,
    store: Any,
    *,
    intent: str | None = None,
    audit_path: Path | None = None,
    run_id: str | None = None,
    confirmed_by: str | None = None,
    operator: str | None = None,
    author: Author | None = None,
) -> str:
    """Turn 2: commit the latest (or named) draft a person confirmed (``operator``: who, when
    it is known: the web console's logged-in operator). ``author``: who confirms, with their
    role (olav.memory.store.roles): an operator commits only into their own scope, never a
    guide; None is the workspace's owner (the terminal, MCP). See the module doc."""
    _require_confirmation(confirmed_by)
    draft = pick_draft(root, intent, author=author)
    if author is not None:
        why = author.refusal(str(draft.data.get("scope") or ""), str(draft.data["category"]))
        if why:
            raise WriteRefused(
                f"draft {draft.intent} cannot be committed by {author.name}: {why}",
                hint="An admin or the workspace's owner can confirm it "
                f"(`olav kb drafts confirm {draft.intent}`)",
            )
    if confirmed_by == "chat":  # the CLI is the person themselves: no turn to wait for
        _check_confirmed(draft, run_id, audit_path)
    mem_id, ids, done = _store_draft(root, store, draft.data)
    archive = _archive(draft, "committed", now(), {"memory_ids": ids, "confirmed_by": confirmed_by})
    if audit_path is not None:
        detail = {
            "memory_ids": ids[:50],
            "run_id": run_id,
            "confirmed_by": confirmed_by,
            "archive": archive.relative_to(root).as_posix(),
            **({"operator": operator} if operator else {}),
            **({"amends": draft.data["amends"]} if draft.data.get("amends") else {}),
        }
        _audit_commit(audit_path, mem_id, draft.data, detail)
    return done


def reject_draft(
    root: Path,
    intent: str,
    *,
    audit_path: Path | None = None,
    by: str = "cli",
    operator: str | None = None,
    author: Author | None = None,
) -> Path:
    """A person said no (``by``: where, as ``confirmed_by`` says it; ``operator``: who, when
    known; ``author``: whose drafts they may reject, None for the owner's terminal): archive
    the draft under ``rejected/``; nothing reaches memory."""
    draft = pick_draft(root, intent, author=author)
    archive = _archive(draft, "rejected", now(), {"rejected_by": by})
    if audit_path is not None:
        from olav.audit.recorder import AuditRecorder

        detail = {
            "id": draft.intent,
            "category": draft.data["category"],
            "archive": archive.relative_to(root).as_posix(),
            "by": by,
            **({"operator": operator} if operator else {}),
        }
        AuditRecorder(audit_path).event(None, DRAFT_REJECTED_EVENT, detail)
    return archive
