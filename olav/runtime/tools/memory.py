"""Memory tools: search it, summarise it, record a lesson, and the two-turn "remember that"
(a draft, then a commit only after a person's yes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from olav.core.errors import OlavError
from olav.runtime.tools.base import (
    ConsentRequest,
    ToolArgs,
    ToolContext,
    current_consent,
    tool_error,
)


class RecallArgs(ToolArgs):
    query: str = Field(description="What to look for in memory.")
    category: str | None = Field(default=None, description="Optional category filter.")
    scope: str | None = Field(default=None, description="Optional scope (an agent or global).")


def recall_memory(
    ctx: ToolContext, query: str, category: str | None = None, scope: str | None = None
) -> str:
    from olav.memory.scopes import allowed_scope, personal_scopes

    if scope and ctx.config and not allowed_scope(ctx.config, scope):
        return tool_error(f"scope {scope} is another operator's private memory")
    mine = personal_scopes(ctx.config) if ctx.config else ()
    scopes = [scope] if scope else [ctx.agent, "global", *mine]
    try:
        hits = ctx.store.search(
            query, scopes=scopes, categories=[category] if category else None, k=5
        )
    except OlavError as exc:
        return tool_error(str(exc))
    if not hits:
        return "No memories match."
    out = []
    for h in hits:
        body = " ".join(str(h.record.metadata.get("body") or h.record.text).split())[:400]
        out.append(f"- [{h.record.category} {h.record.id}] {body}")
    return "\n".join(out)


class NoArgs(ToolArgs):
    pass


def memory_stats(ctx: ToolContext) -> str:
    s = ctx.store.stats()
    cats = ", ".join(f"{k} {v}" for k, v in s["by_category"].items())
    scopes = ", ".join(f"{k} {v}" for k, v in s["by_scope"].items())
    return f"{s['rows']} rows ({s['embedder']}, {s['dim']}-d). Categories: {cats}. Scopes: {scopes}"


class LessonArgs(ToolArgs):
    lesson: str = Field(description="One-line constraint learned from a failure.")


def record_reflection(ctx: ToolContext, lesson: str) -> str:
    from olav.memory.calibration import dedup_distance
    from olav.memory.lessons import add_reflection
    from olav.memory.scopes import private_scope

    threshold = dedup_distance(ctx.config, ctx.store.embedder.name) if ctx.config else 0.20
    scope = private_scope(ctx.config) or "global"
    added, rid = add_reflection(
        ctx.store, lesson, source="reflector", dedup_distance=threshold, scope=scope
    )
    return f"Recorded lesson {rid}" if added else f"Skipped: a near-identical lesson exists ({rid})"


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
    from olav.learning.curator import propose_draft

    try:
        return propose_draft(
            ctx.root,
            intent=intent,
            keywords=keywords,
            body=body,
            category=category,
            agent=agent,
            scope=scope,
            chunks=chunks,
            run_id=ctx.run_id,
        )
    except OlavError as exc:
        return tool_error(str(exc))


class CommitArgs(ToolArgs):
    from_draft: bool = Field(default=True, description="Must be true: commit the draft.")
    intent: str | None = Field(default=None, description="Which draft; default the latest.")


def commit_to_memory(ctx: ToolContext, from_draft: bool = True, intent: str | None = None) -> str:
    from olav.learning.curator import commit_draft

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
        )
    except OlavError as exc:
        return tool_error(str(exc))


def describe_commit(ctx: ToolContext, args: dict[str, Any]) -> ConsentRequest:
    """The draft commit_to_memory would store, shown at the y/N prompt. Raises OlavError when
    there is nothing to confirm (no draft, or one proposed in this very turn)."""
    from olav.learning.curator import draft_for_consent

    if args.get("from_draft") is False:
        raise OlavError("commit_to_memory only commits a draft the user has confirmed")
    draft, preview = draft_for_consent(
        ctx.root, args.get("intent"), run_id=ctx.run_id, audit_path=ctx.audit_db
    )
    refusal = (
        f"the person did not confirm the draft {draft.intent}; nothing was stored. The draft "
        f"stays: they can confirm it later with `olav kb drafts confirm {draft.intent}`. "
        "Do not retry; tell them that."
    )
    return ConsentRequest(subject=draft.intent, preview=preview, refusal=refusal)
