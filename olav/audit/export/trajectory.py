"""The ``trajectory`` format: every step of a run with what happened to it, for evaluation.
It has no validator: a run that broke off is a trajectory too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from olav.audit.export.common import ExportOptions, call_args, clean, redacted, user_text
from olav.audit.export.runs import AuditedRun


def trajectory_line(
    run: AuditedRun, catalog: Mapping[str, Any], opts: ExportOptions = ExportOptions()
) -> dict[str, Any]:
    """Every step with its tool results and statuses, and what happened to the run: for
    evaluation (never skipped: a run that broke off is a trajectory too)."""
    first = True
    steps: list[dict[str, Any]] = []
    for seq, step in enumerate(run.steps):
        item: dict[str, Any] = {"seq": seq, "role": step.role}
        if step.role == "user":
            item["content"] = user_text(run, step, first, opts.memories)
            first = False
        else:
            item["content"] = clean(step.content)
        if step.tool_calls:
            item["tool_calls"] = [
                {"id": str(c.get("id") or ""), "name": c.get("name"), "args": call_args(c)}
                for c in step.tool_calls
            ]
        if step.role == "tool":
            item.update(tool_call_id=step.tool_call_id, name=step.name, status=step.status)
        if opts.reasoning and step.reasoning:
            item["reasoning"] = clean(step.reasoning)
        steps.append(item)
    memories: dict[str, Any] = {"injected": run.injected}
    if opts.memories:
        memories["block"] = clean(run.memory_block) if run.memory_block else None
    out: dict[str, Any] = {
        "run_id": run.id,
        "thread_id": run.thread_id,
        "session_id": run.session_id,
        "agent": run.agent,
        "model": run.model,
        "started_at": run.started_at.isoformat(),
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
        "status": run.status,
        "outcome": run.outcome,
        "error": clean(run.error) or None,
        "query": clean(run.query),
        "turns": run.turns,
        "rescue": run.marks(),
        "stats": redacted(run.stats),
        "memories": memories,
        "source": run.source,
        "steps": steps,
    }
    if opts.reasoning:
        out["reasoning"] = [clean(t) for t in run.reasoning]
    if opts.system:
        out["system"] = opts.system
    return out
