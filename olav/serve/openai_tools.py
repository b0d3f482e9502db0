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
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.responses import StreamingResponse

from olav.serve.http import HTTPError, content_text, oai_error, shown
from olav.serve.openai_schema import ChatMessage, ChatRequest, ChatTool, NamedChoice
from olav.serve.server import Server


def wanted(server: Server, chat: ChatRequest) -> bool:
    """Whether this request goes to the client's loop: it carries tools or asks for JSON
    (``response_format``: a model call for the client's program, not a conversation with
    the agent), and the workspace lets it (``serve.client_tools``)."""
    fmt = _format_of(chat)
    json_asked = isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")
    if not chat.tools and not json_asked:
        return False
    return str(server.ws.config["serve.client_tools"]) != "refuse"


def _format_of(chat: ChatRequest) -> Any:
    return (chat.model_extra or {}).get("response_format")


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


def read_tools(tools: list[ChatTool]) -> list[dict[str, Any]]:
    """The client's tools in OpenAI's shape (the model has checked each one's form), each
    name once."""
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, tool in enumerate(tools):
        fn = tool.function
        if fn.name in names:
            raise HTTPError(422, f"tools[{i}].function.name {fn.name!r} is offered twice")
        names.add(fn.name)
        params = fn.parameters or {"type": "object", "properties": {}}
        made = {"name": fn.name, "description": fn.description or "", "parameters": params}
        out.append({"type": "function", "function": made})
    return out


def read_tool_choice(raw: Any, tools: list[dict[str, Any]]) -> Any:
    """``tool_choice`` as LangChain's ``bind_tools`` takes it (None: the engine decides)."""
    if raw in (None, "auto"):
        return None if raw is None else "auto"
    if raw in ("none", "required"):
        return raw
    if isinstance(raw, NamedChoice):
        name = raw.function.get("name")
        offered = [t["function"]["name"] for t in tools]
        if name not in offered:
            raise HTTPError(
                422, f"tool_choice names {shown(str(name), 64)!r}, which tools does not offer"
            )
        return {"type": "function", "function": {"name": name}}
    raise HTTPError(
        422, 'tool_choice must be "auto", "none", "required" or {"type": "function", …}'
    )


def read_messages(messages: list[ChatMessage]) -> tuple[list[Any], str]:
    """The client's conversation as LangChain messages (system and developer messages as
    system ones), and the person's last request (for recall's audit)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    query = ""
    for i, m in enumerate(messages):
        try:
            text = content_text(m.content)
        except HTTPError:
            raise HTTPError(422, f"messages[{i}].content must be text") from None
        if m.role in ("system", "developer"):
            out.append(SystemMessage(content=text))
        elif m.role == "user":
            out.append(HumanMessage(content=text))
            query = text
        elif m.role == "assistant":
            out.append(AIMessage(content=text, tool_calls=_calls(m.tool_calls, i)))
        elif m.role == "tool":
            if not m.tool_call_id:
                raise HTTPError(422, f"messages[{i}].tool_call_id is required for a tool message")
            out.append(ToolMessage(content=text, tool_call_id=m.tool_call_id))
        else:  # OpenAI's old "function" role: a result without the call it answers
            raise HTTPError(422, f"messages[{i}].role 'function' is OpenAI's old name: send tool")
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
    server: Server, operator: str, agent: str, chat: ChatRequest, asked: dict[str, Any]
) -> Any:
    """One model call for the client's loop: the chat completion, or its stream."""
    from olav.runtime.answer_format import FormatError, FormatUnsupported
    from olav.runtime.client_turn import client_turn

    fmt = read_format(_format_of(chat))
    user = chat.user or ""
    tools = read_tools(chat.tools or [])
    choice = read_tool_choice(chat.tool_choice, tools)
    messages, query = read_messages(chat.messages)
    parallel = chat.parallel_tool_calls
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
    base = {"id": f"chatcmpl-{done.run_id}", "created": int(time.time()), "model": chat.model}
    if chat.stream:
        include = bool(chat.stream_options and chat.stream_options.include_usage)
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
