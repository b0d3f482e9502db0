"""The ``sharegpt`` format: LLaMA-Factory's sharegpt with tools, and its validator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from olav.audit.export.common import ExportOptions, Skip, call_args, clean, user_text
from olav.audit.export.runs import AuditedRun
from olav.audit.export.tools import run_tools


def sharegpt_line(
    run: AuditedRun, catalog: Mapping[str, Any], opts: ExportOptions = ExportOptions()
) -> dict[str, Any]:
    """``{"conversations": [{"from", "value"}], "tools": "<JSON list>"}``: LLaMA-Factory's
    sharegpt with tools. An assistant's tool calls are one ``function_call`` turn (one
    ``{"name", "arguments"}`` object, or a list of them for parallel calls), their results
    one ``observation`` (the result, or a JSON list of them in call order); the text an
    assistant wrote next to its calls is not kept. With reasoning, a ``gpt`` turn starts
    with ``<think>...</think>``."""
    conv: list[dict[str, str]] = []
    if opts.system:
        conv.append({"from": "system", "value": opts.system})
    first = True
    steps = run.steps
    i = 0
    while i < len(steps):
        step = steps[i]
        i += 1
        if step.role == "user":
            conv.append({"from": "human", "value": user_text(run, step, first, opts.memories)})
            first = False
        elif step.role == "assistant" and step.tool_calls:
            calls = [
                {"name": str(c.get("name") or ""), "arguments": call_args(c)}
                for c in step.tool_calls
            ]
            value: Any = calls[0] if len(calls) == 1 else calls
            conv.append(
                {
                    "from": "function_call",
                    "value": json.dumps(value, ensure_ascii=False, default=str),
                }
            )
            ids = [str(c.get("id") or "") for c in step.tool_calls]
            results: dict[str, str] = {}
            while i < len(steps) and steps[i].role == "tool":
                call_id = str(steps[i].tool_call_id or "")
                if call_id not in ids or call_id in results:
                    raise Skip("tool_without_call")
                results[call_id] = clean(steps[i].content)
                i += 1
            if len(results) < len(ids):
                raise Skip("unanswered_tool_call")
            shown = [results[c] for c in ids]
            value = shown[0] if len(shown) == 1 else json.dumps(shown, ensure_ascii=False)
            conv.append({"from": "observation", "value": value})
        elif step.role == "assistant":
            text = clean(step.content)
            if opts.reasoning and step.reasoning:
                text = f"<think>\n{clean(step.reasoning)}\n</think>\n\n{text}"
            conv.append({"from": "gpt", "value": text})
        elif step.role == "tool":
            conv.append({"from": "observation", "value": clean(step.content)})
    tools = run_tools(run.steps, catalog)
    return {"conversations": conv, "tools": json.dumps(tools, ensure_ascii=False)}


def validate_sharegpt(line: Mapping[str, Any]) -> str | None:
    """Why ``line`` is not a valid sharegpt-with-tools example, or None: an optional system
    turn, then human/observation and gpt/function_call turns alternating from a human one;
    an observation right after each function_call; every called tool in ``tools`` (a JSON
    string of a list); the last turn gpt."""
    conv = line.get("conversations")
    if not isinstance(conv, list) or not conv:
        return "no_messages"
    try:
        tools = json.loads(line.get("tools") or "")
    except (TypeError, ValueError):
        return "bad_tools"
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
    ):
        return "bad_tools"
    names = {t["name"] for t in tools}
    if not all(isinstance(t, dict) and isinstance(t.get("value"), str) for t in conv):
        return "bad_content"
    body = conv[1:] if conv[0].get("from") == "system" else conv
    if not body or body[0].get("from") != "human":
        return "no_user_message"
    for n, turn in enumerate(body):
        who = turn.get("from")
        if who not in ("human", "observation", "gpt", "function_call"):
            return "bad_role"
        if (who in ("human", "observation")) != (n % 2 == 0):
            if who == "observation":
                return "tool_without_call"
            if body[n - 1].get("from") == "function_call":
                return "unanswered_tool_call"
            return "bad_order"
        if who == "observation" and body[n - 1].get("from") != "function_call":
            return "tool_without_call"
        if who == "human" and n and body[n - 1].get("from") != "gpt":
            return (
                "unanswered_tool_call"
                if body[n - 1].get("from") == "function_call"
                else "bad_order"
            )
        if who == "function_call":
            reason = _check_function_call(turn["value"], names)
            if reason:
                return reason
    last = body[-1].get("from")
    if last == "function_call":
        return "unanswered_tool_call"
    if last != "gpt":
        return "last_not_assistant"
    if not body[-1]["value"].strip():
        return "empty_answer"
    return None


def _check_function_call(value: str, names: set[str]) -> str | None:
    try:
        data = json.loads(value)
    except ValueError:
        return "bad_arguments"
    calls = data if isinstance(data, list) else [data]
    if not calls:
        return "bad_tool_calls"
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return "bad_tool_calls"
        if call["name"] not in names:
            return "tool_not_declared"
        if not isinstance(call.get("arguments"), dict):
            return "bad_arguments"
    return None
