"""Memory tools: search it, summarise it, record a lesson. (The two-turn "remember that", a
draft and then a commit after a person's yes, belongs to learning: olav.compose.tools.)"""

from __future__ import annotations

from pydantic import Field

from olav.core.errors import OlavError
from olav.memory.store.filters import SearchFilter
from olav.runtime.tools.base import ToolArgs, ToolContext, tool_error


class RecallArgs(ToolArgs):
    query: str = Field(description="What to look for in memory.")
    category: str | None = Field(default=None, description="Optional category filter.")
    scope: str | None = Field(default=None, description="Optional scope (an agent or global).")


def recall_memory(
    ctx: ToolContext, query: str, category: str | None = None, scope: str | None = None
) -> str:
    from olav.memory.store.scopes import Reader, personal_scopes, readable

    if scope and ctx.config and not readable(ctx.config, scope):
        return tool_error(f"scope {scope} is another operator's private memory")
    mine = personal_scopes(ctx.config) if ctx.config else ()
    scopes = [scope] if scope else [ctx.agent, "global", *mine]
    try:
        hits = ctx.store.search(
            query,
            k=5,
            filter=SearchFilter(
                scopes=scopes,
                categories=[category] if category else None,
                reader=Reader.of(ctx.config) if ctx.config else Reader.owning(scopes),
            ),
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
    from olav.memory.store.scopes import EVERYONE, Reader

    # the agent's operator's view: other operators' private scopes are not named
    s = ctx.store.stats(Reader.of(ctx.config) if ctx.config else EVERYONE)
    cats = ", ".join(f"{k} {v}" for k, v in s["by_category"].items())
    scopes = ", ".join(f"{k} {v}" for k, v in s["by_scope"].items())
    return f"{s['rows']} rows ({s['embedder']}, {s['dim']}-d). Categories: {cats}. Scopes: {scopes}"


class LessonArgs(ToolArgs):
    lesson: str = Field(description="One-line constraint learned from a failure.")


def record_reflection(ctx: ToolContext, lesson: str) -> str:
    from olav.audit.recorder import AuditRecorder
    from olav.memory.policy import policy_for
    from olav.memory.recall.lessons import add_reflection
    from olav.memory.store.scopes import private_scope

    scope = private_scope(ctx.config)
    added, rid = add_reflection(
        ctx.store,
        lesson,
        source="reflector",
        scope=scope,
        policy=policy_for(ctx.config),
        log=AuditRecorder(ctx.audit_db),
        run_id=ctx.run_id,
    )
    return f"Recorded lesson {rid}" if added else f"Skipped: a near-identical lesson exists ({rid})"
