"""The constrained re-ask: a call olav could not read safely is asked for once more, with the
engine's own constrained decoding, instead of guessed at.

A finished message whose call was cut off, never closed, or whose arguments fail the tool's
schema runs nothing (:mod:`olav.runtime.rescue.salvage`). The model is then asked once more
with no tools bound and its output held to one JSON object, ``{"name": T, "arguments":
{...}}``, where T is one of the tools the message tried to call (every offered tool when it
named none) and the arguments are T's own schema:

- Ollama: ``format`` with the JSON schema;
- an OpenAI-compatible server: ``response_format`` of type ``json_schema``; a server that
  refuses it (llama-cpp-python's answers it with a 500) is asked with ``json_object`` and a
  ``schema`` beside it, which that server honours, and the answer is remembered for the
  server's address for the life of the process.

What comes back is read as JSON and checked against the tool's schema again; a valid call
goes back to the agent loop as any call does, so approvals apply to it. Every re-ask is
audited (``reask``): the tools, how the engine was constrained, whether the call came back
valid, and what it cost in tokens and milliseconds. An engine olav cannot constrain is said
so in the audit and nothing is guessed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Mapping
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from olav.llm.tokenize import engine_of, is_openai
from olav.runtime.rescue.lenient import LenientError, loads
from olav.runtime.rescue.response import Ask
from olav.runtime.rescue.schema import coerce

# the constraint an OpenAI-compatible server at a base URL was found to take
_TAKES: dict[str, str] = {}


def call_schema(tools: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``tools``."""
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [name]},
                "arguments": schema or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        for name, schema in sorted(tools.items())
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}


def constraint(model: Any, schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """How to hold ``model``'s next answer to ``schema``: (what, model settings), or None
    when its engine cannot be constrained."""
    engine = engine_of(model)
    kind = type(engine).__name__
    if kind in ("ChatOllama", "ScriptedChatModel"):
        return "ollama format", {"format": schema}
    if is_openai(engine):
        base = str(getattr(engine, "openai_api_base", "") or "")
        if _TAKES.get(base) == "json_object":
            return "json_object", {"response_format": {"type": "json_object", "schema": schema}}
        spec = {"name": "tool_call", "schema": schema, "strict": False}
        return "json_schema", {"response_format": {"type": "json_schema", "json_schema": spec}}
    return None


def refuses_json_schema(model: Any) -> bool:
    """Whether ``model``'s server was found to refuse ``json_schema`` (``json_object`` then)."""
    engine = engine_of(model)
    return _TAKES.get(str(getattr(engine, "openai_api_base", "") or "")) == "json_object"


def remember_refusal(model: Any) -> None:
    """The server refused ``json_schema``: ask it with ``json_object`` from now on."""
    engine = engine_of(model)
    _TAKES[str(getattr(engine, "openai_api_base", "") or "")] = "json_object"


def read_reply(text: str, tools: Mapping[str, dict[str, Any]]) -> tuple[str, dict[str, Any]] | str:
    """The call in a constrained answer, checked against its schema; or what is wrong."""
    try:
        value = loads(text.strip())
    except LenientError:
        return "the answer is not JSON"
    if not isinstance(value, dict) or value.get("name") not in tools:
        return "the answer names no offered tool"
    name = str(value["name"])
    args = value.get("arguments")
    if isinstance(args, str):
        try:
            args = loads(args) if args.strip() else {}
        except LenientError:
            return "its arguments are not JSON"
    checked = coerce(args if args is not None else {}, tools[name])
    if not checked.ok:
        return "; ".join(checked.problems)
    return name, checked.args


def _said(exc: BaseException) -> str:
    """An engine's error in one line for the audit (a run goes on without the call)."""
    first = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"the engine failed: {type(exc).__name__}: {first}"


def note(why: str) -> str:
    return (
        f"[olav] Your last message held a tool call olav could not read safely ({why}), so "
        'it did not run. Send that call again as one JSON object: {"name": <the tool>, '
        '"arguments": {<its arguments>}}, and nothing else.'
    )


def _held(request: Any, messages: list[Any], settings: dict[str, Any]) -> Any:
    """The request asked again: these messages, no tools, the constraint's settings."""
    base = getattr(request, "model_settings", None) or {}
    return request.override(messages=messages, tools=[], model_settings={**base, **settings})


def reask(
    request: Any,
    msg: AIMessage,
    tools: Mapping[str, dict[str, Any]],
    wanted: list[str],
    why: str,
    account: Any,
    audit: Any,
) -> Generator[Any, Any, dict[str, Any] | None]:
    """Ask once more, constrained; the call (``{"name", "args", "id"}``) or None. ``account``
    reads a model response into its message (and counts its tokens); ``audit`` records."""
    chosen = {n: tools[n] for n in wanted if n in tools} or dict(tools)
    schema = call_schema(chosen)
    how = constraint(request.model, schema)
    detail: dict[str, Any] = {"tools": sorted(chosen), "why": why}
    if how is None:
        audit(
            {**detail, "constrained": None, "valid": False, "note": "the engine cannot constrain"}
        )
        return None
    plain = AIMessage(content=str(msg.content or ""))
    messages = [*request.messages, plain, HumanMessage(content=note(why))]
    t0 = time.perf_counter()
    try:
        response = yield Ask(_held(request, messages, how[1]), tolerant=True)
    except Exception as exc:
        if how[0] != "json_schema":
            audit({**detail, "constrained": how[0], "valid": False, "problem": _said(exc)})
            return None
        remember_refusal(request.model)  # the server refused json_schema: json_object, once
        how = constraint(request.model, schema)
        assert how is not None
        try:
            response = yield Ask(_held(request, messages, how[1]), tolerant=True)
        except Exception as again_exc:
            audit({**detail, "constrained": how[0], "valid": False, "problem": _said(again_exc)})
            return None
    again = account(response)
    ms = round((time.perf_counter() - t0) * 1000, 1)
    usage = getattr(again, "usage_metadata", None) or {}
    got = read_reply(str(again.content or "") if again is not None else "", chosen)
    detail.update(
        constrained=how[0], ms=ms, tokens_in=usage.get("input_tokens"),
        tokens_out=usage.get("output_tokens"), valid=not isinstance(got, str),
    )  # fmt: skip
    if isinstance(got, str):
        audit({**detail, "problem": got})
        return None
    audit(detail)
    return {"name": got[0], "args": got[1], "id": f"reasked_{uuid.uuid4().hex[:12]}"}
