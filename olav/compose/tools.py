"""The learning tools, which the engine (olav.runtime) does not know: the two-turn
"remember that" (a draft, then a commit only after a person's yes) and, for the reflector,
the error histogram, guide drafts and code-fix proposals (each written for a person to
review; none changes memory). ``LEARNING_TOOLS`` is what a composer passes to a Session."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from olav.core.errors import OlavError
from olav.learning.curator import (
    DraftRequest,
    commit_draft,
    draft_for_consent,
    propose_draft,
    sanitise_intent,
)
from olav.learning.reflector import write_code_fix
from olav.learning.signatures import scan_error_signatures
from olav.memory.store.roles import Author
from olav.runtime.tools import (
    ConsentRequest,
    ToolArgs,
    ToolContext,
    ToolSpec,
    current_consent,
    tool_error,
)

# --------------------------------------------------------------------------- remember that


class DraftArgs(ToolArgs):
    intent: str = Field(description="snake_case name of the memory, e.g. r1_loopback")
    keywords: list[str] = Field(description="Words that should recall it (both languages).")
    body: str = Field(description="The memory itself, as the user stated it.")
    category: Literal[
        "usage_guide",
        "format_guide",
        "fact",
        "preference",
        "decision",
        "expert_knowledge",
        "document",
        "topology",
    ] = "fact"
    agent: str = Field(default="core", description="Agent the memory belongs to.")
    scope: str | None = Field(default=None, description="global, an agent, or team:<id>.")
    chunks: list[str] | None = Field(
        default=None,
        description="Only for category document: the pieces to store; leave empty to split "
        "automatically.",
    )


def _author(ctx: ToolContext) -> Author | None:
    """Who the run writes for: its operator and their role (None: the library's own context,
    which has no configuration, is the owner's)."""
    return None if ctx.config is None else Author.of(ctx.config)


def propose_memory_draft(
    ctx: ToolContext,
    intent: str,
    keywords: list[str],
    body: str,
    category: str = "fact",
    agent: str = "core",
    scope: str | None = None,
    chunks: list[str] | None = None,
) -> str:
    try:
        request = DraftRequest(
            intent=intent,
            keywords=keywords,
            body=body,
            category=category,
            agent=agent,
            scope=scope,
            chunks=chunks,
        )
        return propose_draft(ctx.root, request, run_id=ctx.run_id, author=_author(ctx))
    except OlavError as exc:
        return tool_error(str(exc))


class CommitArgs(ToolArgs):
    from_draft: bool = Field(default=True, description="Must be true: commit the draft.")
    intent: str | None = Field(default=None, description="Which draft; default the latest.")


def commit_to_memory(ctx: ToolContext, from_draft: bool = True, intent: str | None = None) -> str:
    if not from_draft:
        return tool_error("commit_to_memory only commits a draft the user has confirmed")
    consent = current_consent()
    if consent is None:  # the approval middleware did not ask a person, or they said no
        return tool_error("a person must confirm the draft at the chat's approval prompt first")
    try:
        return commit_draft(
            ctx.root,
            ctx.store,
            intent=consent.subject,  # the draft the person was shown, not a newer one
            audit_path=ctx.audit_db,
            run_id=ctx.run_id,
            confirmed_by=consent.by,
            author=_author(ctx),
        )
    except OlavError as exc:
        return tool_error(str(exc))


def describe_commit(ctx: ToolContext, args: dict[str, Any]) -> ConsentRequest:
    """The draft commit_to_memory would store, shown at the y/N prompt. Raises OlavError when
    there is nothing to confirm (no draft, or one proposed in this very turn)."""
    if args.get("from_draft") is False:
        raise OlavError("commit_to_memory only commits a draft the user has confirmed")
    draft, preview = draft_for_consent(
        ctx.root,
        args.get("intent"),
        run_id=ctx.run_id,
        audit_path=ctx.audit_db,
        author=_author(ctx),
    )
    refusal = (
        f"the person did not confirm the draft {draft.intent}; nothing was stored. The draft "
        f"stays: they can confirm it later with `olav kb drafts confirm {draft.intent}`. "
        "Do not retry; tell them that."
    )
    return ConsentRequest(subject=draft.intent, preview=preview, refusal=refusal)


# --------------------------------------------------------------------------- the reflector's


class ScanArgs(ToolArgs):
    days: int = Field(default=7, ge=1, le=90, description="How many days back to scan.")


def scan_error_signatures_tool(ctx: ToolContext, days: int = 7) -> str:
    sigs = scan_error_signatures(ctx.audit_db, ctx.logs, days=days, tier=ctx.tier)
    if not sigs:
        return f"No errors in the last {days} days."
    return json.dumps([s.to_json() for s in sigs], ensure_ascii=False, indent=1)


class GuideDraftArgs(ToolArgs):
    intent: str = Field(description="snake_case name of the convention.")
    keywords: list[str] = Field(description="Words that should recall it (both languages).")
    body: str = Field(description="The directive, imperative and specific.")
    agent: str = Field(default="core", description="Agent the guide belongs to.")


def propose_guide_draft(
    ctx: ToolContext, intent: str, keywords: list[str], body: str, agent: str = "core"
) -> str:
    try:
        request = DraftRequest(
            intent=intent, keywords=keywords, body=body, category="usage_guide", agent=agent
        )
        preview = propose_draft(ctx.root, request, run_id=ctx.run_id, author=_author(ctx))
    except OlavError as exc:
        return tool_error(str(exc))
    name = sanitise_intent(intent)
    return (
        "Guide draft saved for a human to review; it is NOT in memory. They see it with "
        f"`olav kb drafts show {name}`.\n" + preview
    )


class CodeFixArgs(ToolArgs):
    title: str = Field(description="Short title of the problem.")
    root_cause: str = Field(description="What causes the error, from the evidence.")
    suggested_fix: str = Field(description="What a developer should change.")
    patch: str = Field(default="", description="Optional unified diff; never applied.")


def draft_code_fix(
    ctx: ToolContext, title: str, root_cause: str, suggested_fix: str, patch: str = ""
) -> str:
    path = write_code_fix(
        ctx.root,
        ctx.exports,
        title=title,
        root_cause=root_cause,
        suggested_fix=suggested_fix,
        patch=patch,
    )
    return (
        f"Proposal written to {path.relative_to(ctx.root)} (not applied). A person reviews it "
        f"with `olav kb drafts show {path.stem}`."
    )


LEARNING_TOOLS: dict[str, ToolSpec] = {
    "scan_error_signatures": ToolSpec(
        scan_error_signatures_tool,
        ScanArgs,
        "Histogram of normalised recent errors from the audit log.",
    ),
    "propose_memory_draft": ToolSpec(
        propose_memory_draft,
        DraftArgs,
        "Turn 1 of 'remember that': write a draft and return a preview to quote. Stores nothing.",
    ),
    "commit_to_memory": ToolSpec(
        commit_to_memory,
        CommitArgs,
        "Turn 2: commit the draft after the user confirmed it.",
        describe=describe_commit,
    ),
    "propose_guide_draft": ToolSpec(
        propose_guide_draft,
        GuideDraftArgs,
        "Draft a new guide for a human to confirm (KB lane). Stores nothing in memory.",
    ),
    "draft_code_fix": ToolSpec(
        draft_code_fix,
        CodeFixArgs,
        "Write a fix proposal to exports/reflections/ (code lane; never applied).",
    ),
}


def known_tools() -> list[str]:
    """Every tool an agent may list in SKILL.md: the engine's registry (with any tool a
    plugin registered) and the learning tools composed here."""
    from olav.runtime.tools.registry import tool_names

    return sorted({*tool_names(), *LEARNING_TOOLS})


def unknown_tools(names: list[str]) -> list[str]:
    """The names in ``names`` that are no tool (in their order)."""
    known = set(known_tools())
    return [n for n in names if n not in known]
