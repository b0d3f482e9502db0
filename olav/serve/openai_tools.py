"""``/v1/chat/completions`` with the client's ``tools``: olav as the model of the client's loop.

The client (the Agents SDK, LiteLLM, Continue, opencode…) runs its own agent loop and its own
tools; olav answers each call with the next assistant message, as the engine would, with what
olav adds to every model call of its own agents (olav.runtime.client_turn): the agent's recall
block, the rescue layer (a call written as text comes back as a structured ``tool_calls``
entry, its arguments checked against the client's schema), the audit, and the client's
reported write-type calls captured pending. ``serve.client_tools: refuse`` turns this off (a
request with tools is then a 400).

The request is read strictly: the tools' names and schemas, ``tool_choice`` (``auto``,
``none``, ``required`` or one named function, which must be offered), and every message,
``assistant`` tool calls and ``tool`` results included. A bad one is a 422 that names it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.responses import StreamingResponse

from olav.serve.http import HTTPError, content_text, oai_error, shown
from olav.serve.server import Server

MAX_TOOLS = 128
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def wanted(server: Server, body: dict[str, Any]) -> bool:
    """Whether this request goes to the client's loop: it carries tools or asks for JSON
    (``response_format``: a model call for the client's program, not a conversation with
    the agent), and the workspace lets it (``serve.client_tools``)."""
    fmt = body.get("response_format")
    json_asked = isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")
    if body.get("tools") in (None, []) and not json_asked:
        return False
    return str(server.ws.config["serve.client_tools"]) != "refuse"


def end_user(body: dict[str, Any]) -> str:
    """OpenAI's ``user``: the end user the client names (recorded in the run's audit)."""
    user = body.get("user")
    if user is None:
        return ""
    if not isinstance(user, str) or len(user) > 256:
        raise HTTPError(422, "user must be a string of at most 256 characters")
    return user


def read_format(raw: Any) -> dict[str, Any] | None:
    """``response_format``, checked: ``text``, ``json_object``, or ``json_schema`` with a
    ``schema`` object."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("type") not in ("text", "json_object", "json_schema"):
        raise HTTPError(422, 'response_format.type must be "text", "json_object" or "json_schema"')
    if raw["type"] == "json_schema":
        spec = raw.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
            raise HTTPError(
                422, "response_format.json_schema must be an object with a schema object"
            )
    return raw


def read_tools(raw: Any) -> list[dict[str, Any]]:
    """The client's tools in OpenAI's shape, checked: a function each, with a unique name."""
    if not isinstance(raw, list) or len(raw) > MAX_TOOLS:
        raise HTTPError(422, f"tools must be a list of at most {MAX_TOOLS} tools")
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise HTTPError(422, f'tools[{i}] must be {{"type": "function", "function": {{…}}}}')
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise HTTPError(
                422, f"tools[{i}].function.name must be 1 to 64 letters, digits, '_', '-' or '.'"
            )
        if name in names:
            raise HTTPError(422, f"tools[{i}].function.name {name!r} is offered twice")
        names.add(name)
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise HTTPError(422, f"tools[{i}].function.parameters must be a JSON schema object")
        description = fn.get("description") or ""
        if not isinstance(description, str):
            raise HTTPError(422, f"tools[{i}].function.description must be text")
        made = {"name": name, "description": description, "parameters": params}
        out.append({"type": "function", "function": made})
    return out


def read_tool_choice(raw: Any, tools: list[dict[str, Any]]) -> Any:
    """``tool_choice`` as LangChain's ``bind_tools`` takes it (None: the engine decides)."""
    if raw in (None, "auto"):
        return None if raw is None else "auto"
    if raw in ("none", "required"):
        return raw
    if isinstance(raw, dict) and raw.get("type") == "function":
        name = (raw.get("function") or {}).get("name")
        offered = [t["function"]["name"] for t in tools]
        if name not in offered:
            raise HTTPError(
                422, f"tool_choice names {shown(str(name), 64)!r}, which tools does not offer"
            )
        return {"type": "function", "function": {"name": name}}
    raise HTTPError(
        422, 'tool_choice must be "auto", "none", "required" or {"type": "function", …}'
    )


def read_messages(raw: Any) -> tuple[list[Any], str]:
    """The client's conversation as LangChain messages (system and developer messages as
    system ones), and the person's last request (for recall's audit)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    if not isinstance(raw, list) or not raw:
        raise HTTPError(422, "messages must be a non-empty list")
    out: list[Any] = []
    query = ""
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise HTTPError(422, f"messages[{i}] must be an object with a role")
        role = m["role"]
        try:
            text = content_text(m.get("content"))
        except HTTPError:
            raise HTTPError(422, f"messages[{i}].content must be text") from None
        if role in ("system", "developer"):
            out.append(SystemMessage(content=text))
        elif role == "user":
            out.append(HumanMessage(content=text))
            query = text
        elif role == "assistant":
            out.append(AIMessage(content=text, tool_calls=_calls(m.get("tool_calls"), i)))
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise HTTPError(422, f"messages[{i}].tool_call_id is required for a tool message")
            out.append(ToolMessage(content=text, tool_call_id=call_id))
        else:
            raise HTTPError(422, f"messages[{i}].role {shown(role, 40)!r} is not a chat role")
    if not query.strip():
        raise HTTPError(422, "the conversation needs a user message with text")
    return out, query


def _calls(raw: Any, i: int) -> list[dict[str, Any]]:
    if raw in (None, []):
        return []
    if not isinstance(raw, list):
        raise HTTPError(422, f"messages[{i}].tool_calls must be a list")
    calls = []
    for j, call in enumerate(raw):
        where = f"messages[{i}].tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise HTTPError(422, f"{where} must have a function with a name")
        args = fn.get("arguments") or "{}"
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            raise HTTPError(422, f"{where}.function.arguments must be a JSON object") from None
        if not isinstance(parsed, dict):
            raise HTTPError(422, f"{where}.function.arguments must be a JSON object")
        calls.append({"name": fn["name"], "args": parsed, "id": str(call.get("id") or f"c{j}")})
    return calls


async def complete(
    server: Server, operator: str, agent: str, body: dict[str, Any], asked: dict[str, Any]
) -> Any:
    """One model call for the client's loop: the chat completion, or its stream."""
    from olav.runtime.answer_format import FormatError, FormatUnsupported
    from olav.runtime.client_turn import client_turn

    fmt = read_format(body.get("response_format"))
    user = end_user(body)
    tools = read_tools(body.get("tools") or [])
    choice = read_tool_choice(body.get("tool_choice"), tools)
    messages, query = read_messages(body.get("messages"))
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise HTTPError(422, "parallel_tool_calls must be true or false")
    offered = tools if choice != "none" else []

    def turn() -> Any:
        with server.pool.session(operator, agent) as pooled:
            return client_turn(
                pooled.session,
                messages,
                offered,
                tool_choice=None if choice == "none" else choice,
                asked=asked,
                query=query,
                response_format=fmt,
                end_user=user,
            )

    try:
        done = await anyio.to_thread.run_sync(turn)
    except FormatUnsupported as exc:
        return oai_error(400, exc.one_line(), param="response_format")
    except FormatError as exc:
        return oai_error(502, exc.one_line(), param="response_format")
    message = _message(done.message, single=parallel is False)
    finish = "tool_calls" if message.get("tool_calls") else "length" if done.cut_short else "stop"
    usage = {
        "prompt_tokens": done.tokens_in,
        "completion_tokens": done.tokens_out,
        "total_tokens": done.tokens_in + done.tokens_out,
    }
    base = {"id": f"chatcmpl-{done.run_id}", "created": int(time.time()), "model": body["model"]}
    if body.get("stream"):
        include = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(
            _stream(base, message, finish, usage if include else None),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )
    choice_out = {"index": 0, "message": message, "finish_reason": finish}
    return {**base, "object": "chat.completion", "choices": [choice_out], "usage": usage}


def _message(ai: Any, *, single: bool) -> dict[str, Any]:
    """The assistant message in OpenAI's shape (``single``: at most one call, as
    ``parallel_tool_calls: false`` asks)."""
    from olav.runtime.client_turn import new_call_id

    calls = list(ai.tool_calls)[: 1 if single else None]
    text = ai.content if isinstance(ai.content, str) else content_text(ai.content)
    out: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        out["tool_calls"] = [
            {
                "id": c.get("id") or new_call_id(),
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c.get("args") or {}, ensure_ascii=False),
                },
            }
            for c in calls
        ]
    return out


async def _stream(
    base: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, int] | None
) -> AsyncIterator[bytes]:
    """The message as OpenAI's chunks: the text, then each call as a tool-call delta."""
    head = {**base, "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], end: str | None = None) -> bytes:
        data = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": end}]}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        yield chunk({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fn["arguments"]}}]})
    yield chunk({}, finish)
    if usage is not None:
        yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode()
    yield b"data: [DONE]\n\n"
