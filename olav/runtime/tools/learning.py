"""Learning tools for the reflector: the error histogram, guide drafts and code-fix
proposals. Each writes for a person to review; none changes memory."""

from __future__ import annotations

import json

from pydantic import Field

from olav.core.errors import OlavError
from olav.runtime.tools.base import ToolArgs, ToolContext, tool_error


class ScanArgs(ToolArgs):
    days: int = Field(default=7, ge=1, le=90, description="How many days back to scan.")


def scan_error_signatures_tool(ctx: ToolContext, days: int = 7) -> str:
    from olav.learning.signatures import scan_error_signatures

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
    from olav.learning.curator import propose_draft, sanitise_intent

    try:
        preview = propose_draft(
            ctx.root,
            intent=intent,
            keywords=keywords,
            body=body,
            category="usage_guide",
            agent=agent,
            run_id=ctx.run_id,
        )
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
    from olav.learning.reflector import write_code_fix

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
