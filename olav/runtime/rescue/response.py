"""The pieces of a model call the rescue layer reads and rewrites: the AI message inside a
response (found, replaced, rebuilt with cleaned content and calls), a message cut on the token
limit, the nudge after a narrated action, and the schemas of the tools offered."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from olav.audit.events import REASONING_ROLE as REASONING_ROLE  # for the runner's import
from olav.audit.events import RUN_STATS_EVENT as RUN_STATS_EVENT  # for the runner's import
from olav.runtime.middleware import message_text


def tool_schemas(tools: list[Any], cache: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each offered tool's argument JSON schema by name (``cache`` keeps them per agent)."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        if isinstance(tool, dict):
            inner = tool.get("function")
            fn: dict[str, Any] = inner if isinstance(inner, dict) else tool
            name = fn.get("name")
            if name:
                out[name] = fn.get("parameters") or {}
            continue
        name = getattr(tool, "name", None)
        if not name:
            continue
        if name not in cache:
            cache[name] = schema_of(tool)
        out[name] = cache[name]
    return out


def schema_of(tool: Any) -> dict[str, Any]:
    schema = getattr(tool, "tool_call_schema", None) or getattr(tool, "args_schema", None)
    if isinstance(schema, dict):
        return schema
    if schema is not None and hasattr(schema, "model_json_schema"):
        return dict(schema.model_json_schema())
    return {"type": "object", "properties": {}}


def call_key(name: str, args: Any) -> str:
    return name + json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def cut_short(msg: AIMessage) -> bool:
    """The message stopped on the token limit: Ollama's ``done_reason``, an OpenAI-compatible
    server's ``finish_reason``."""
    meta = msg.response_metadata or {}
    return "length" in (meta.get("done_reason"), meta.get("finish_reason"))


def nudge_text(named: list[str], offered: list[str]) -> str:
    """The one-call directive that follows a narrated action."""
    if len(named) == 1:
        target = f"Call {named[0]} now"
    elif named:
        target = "Call " + ", ".join(named) + " now"
    else:
        target = "Call the tool that does it now (one of: " + ", ".join(offered) + ")"
    return (
        "[olav] You described the action but did not call a tool, so nothing has happened yet. "
        f"{target}, as a tool call with the arguments it needs. Do not describe it again."
    )


@dataclass(frozen=True)
class Ask:
    request: Any
    tolerant: bool = False  # an error of this request goes back into the steps, not out


@dataclass(frozen=True)
class Done:
    response: Any


def ai_of(response: Any) -> AIMessage | None:
    if isinstance(response, AIMessage):
        return response
    result = getattr(response, "result", None)
    if result is None:
        inner = getattr(response, "model_response", None)
        result = getattr(inner, "result", None)
    for msg in reversed(result or []):
        if isinstance(msg, AIMessage):
            return msg
    return None


def replace_ai(response: Any, msg: AIMessage) -> Any:
    """``response`` with its AI message replaced by ``msg``."""
    if isinstance(response, AIMessage):
        return msg
    inner = getattr(response, "model_response", None)
    target = inner if inner is not None else response
    result = list(getattr(target, "result", []) or [])
    for i in range(len(result) - 1, -1, -1):
        if isinstance(result[i], AIMessage):
            result[i] = msg
            break
    else:
        result.append(msg)
    fixed = dataclasses.replace(target, result=result)
    return dataclasses.replace(response, model_response=fixed) if inner is not None else fixed


def rebuilt(msg: AIMessage, content: str, reasoning: str, calls: list[dict[str, Any]]) -> AIMessage:
    """``msg`` with new content, its reasoning in ``additional_kwargs`` and ``calls``."""
    extra = dict(msg.additional_kwargs)
    if reasoning:
        extra["reasoning_content"] = reasoning
    same = (
        content == message_text(msg)
        and calls == list(msg.tool_calls)
        and (extra == msg.additional_kwargs)
    )
    if same:
        return msg
    return AIMessage(
        content=content,
        tool_calls=[{**c, "type": "tool_call"} for c in calls],
        additional_kwargs=extra,
        response_metadata=dict(msg.response_metadata),
        usage_metadata=msg.usage_metadata,
        id=msg.id,
        name=msg.name,
    )


def prompt_text(request: Any) -> str:
    """A model request's prompt as text: its system prompt and messages ("" for none)."""
    if request is None:
        return ""
    parts = [str(getattr(request, "system_prompt", "") or "")]
    return "\n".join(parts + [message_text(m) for m in request.messages])
