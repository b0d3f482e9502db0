"""The ``openai`` format: OpenAI chat fine-tuning lines with tools, and their validator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from olav.audit.export.common import ExportOptions, call_args, clean, user_text
from olav.audit.export.runs import AuditedRun
from olav.audit.export.tools import run_tools


def openai_line(
    run: AuditedRun, catalog: Mapping[str, Any], opts: ExportOptions = ExportOptions()
) -> dict[str, Any]:
    """``{"messages": [...], "tools": [...]}`` (OpenAI chat fine-tuning with tools)."""
    messages: list[dict[str, Any]] = []
    if opts.system:
        messages.append({"role": "system", "content": opts.system})
    first = True
    for step in run.steps:
        if step.role == "user":
            messages.append({"role": "user", "content": user_text(run, step, first, opts.memories)})
            first = False
        elif step.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": clean(step.content)}
            if step.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": str(c.get("id") or ""),
                        "type": "function",
                        "function": {
                            "name": str(c.get("name") or ""),
                            "arguments": json.dumps(call_args(c), ensure_ascii=False, default=str),
                        },
                    }
                    for c in step.tool_calls
                ]
            if opts.reasoning and step.reasoning:
                msg["reasoning_content"] = clean(step.reasoning)
            messages.append(msg)
        elif step.role == "tool":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(step.tool_call_id or ""),
                    "content": clean(step.content),
                }
            )
    tools = [{"type": "function", "function": f} for f in run_tools(run.steps, catalog)]
    return {"messages": messages, "tools": tools}


def validate_openai(line: Mapping[str, Any]) -> str | None:
    """Why ``line`` is not a valid chat fine-tuning example, or None. The rules: an optional
    system message first, then the person's; tool messages only right after the assistant
    message whose calls they answer, each call answered exactly once; every called tool in
    ``tools``; arguments a JSON string of an object; the last message the assistant's."""
    messages = line.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no_messages"
    tools = line.get("tools")
    if not isinstance(tools, list):
        return "bad_tools"
    names = set()
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not (isinstance(tool, dict) and tool.get("type") == "function" and isinstance(fn, dict)):
            return "bad_tools"
        if not isinstance(fn.get("name"), str) or not isinstance(fn.get("parameters"), dict):
            return "bad_tools"
        names.add(fn["name"])
    body = messages[1:] if messages[0].get("role") == "system" else messages
    if not body or body[0].get("role") != "user":
        return "no_user_message"
    seen_ids: set[str] = set()
    pending: set[str] = set()
    prev = ""
    for msg in body:
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ("user", "assistant", "tool"):
            return "bad_role"
        content = msg.get("content")
        if not isinstance(content, str):
            return "bad_content"
        if role == "tool":
            call_id = msg.get("tool_call_id")
            if prev not in ("assistant_calls", "tool") or call_id not in pending:
                return "tool_without_call"
            pending.discard(call_id)
            prev = "tool"
            continue
        if pending:
            return "unanswered_tool_call"
        if role == "user":
            if prev not in ("", "assistant"):
                return "bad_order"
            prev = "user"
            continue
        calls = msg.get("tool_calls")
        if calls is None:
            prev = "assistant"
            continue
        if not isinstance(calls, list) or not calls:
            return "bad_tool_calls"
        for call in calls:
            reason = _check_call(call, names, seen_ids)
            if reason:
                return reason
            pending.add(call["id"])
        prev = "assistant_calls"
    if pending:
        return "unanswered_tool_call"
    last = body[-1]
    if last.get("role") != "assistant":
        return "last_not_assistant"
    if not str(last.get("content") or "").strip():
        return "empty_answer"
    return None


def _check_call(call: Any, names: set[str], seen: set[str]) -> str | None:
    if not isinstance(call, dict) or call.get("type") != "function":
        return "bad_tool_calls"
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        return "missing_tool_call_id"
    if call_id in seen:
        return "duplicate_tool_call_id"
    seen.add(call_id)
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return "bad_tool_calls"
    if fn["name"] not in names:
        return "tool_not_declared"
    args = fn.get("arguments")
    if not isinstance(args, str):
        return "bad_arguments"
    try:
        parsed = json.loads(args)
    except ValueError:
        return "bad_arguments"
    return None if isinstance(parsed, dict) else "bad_arguments"
