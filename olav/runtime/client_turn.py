"""One model call for a client's own agent loop: olav as the model, the client's tools offered.

A client that runs its own loop (the OpenAI Agents SDK, LiteLLM-based tools, Continue,
opencode) sends the whole conversation and its tools; olav answers with the next assistant
message, text or tool calls, and the client runs the tools. What olav adds is what it adds to
its own agents' calls, through the same middleware:

- **recall**: the agent's AutoRecall puts the relevant memories before the person's last
  message, or nothing when nothing is relevant;
- **the rescue layer**: a call the model wrote as text becomes a structured call, its
  arguments repaired by the client's own JSON schema, a call it could not read is asked for
  again under the schema, a cut-short call is asked for once more; the client's ``tool_choice``
  goes to the engine;
- **the audit**: the call is a run of the operator's, with its messages and tool calls,
  written after the reply (on the process's background writer) so that it costs the client
  nothing;
- **captures**: a write-type call the client ran and reported back (an assistant call followed
  by its ``tool`` result) is captured as a precedent in the operator's private scope,
  *pending*: a person confirms it before it reaches any prompt, as with MCP's
  ``record_outcome``.

No tool runs here and the conversation is not kept: the client holds its state.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from olav.audit.events import CLIENT_TURN_EVENT
from olav.core.log import get_logger

log = get_logger("runtime.client_turn")


@dataclass
class ClientTurn:
    """The assistant message for the client, and what olav did to make it."""

    message: AIMessage
    run_id: str
    injected: list[str] = field(default_factory=list)
    salvaged: bool = False
    cut_short: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    captured: int = 0  # counted after the reply, for the audit


def reported_calls(messages: Sequence[BaseMessage]) -> list[tuple[str, dict[str, Any], str, bool]]:
    """The calls the client says it ran: (tool, arguments, result, failed) for each assistant
    tool call answered by a ``tool`` message, in order."""
    asked: dict[str, tuple[str, dict[str, Any]]] = {}
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call.get("id"):
                    asked[str(call["id"])] = (call["name"], dict(call.get("args") or {}))
        elif isinstance(m, ToolMessage) and m.tool_call_id in asked:
            name, args = asked.pop(m.tool_call_id)
            text = m.content if isinstance(m.content, str) else str(m.content)
            out.append((name, args, text, getattr(m, "status", "success") == "error"))
    return out


def client_turn(
    session: Any,
    messages: list[BaseMessage],
    tools: list[dict[str, Any]],
    *,
    tool_choice: Any = None,
    asked: dict[str, Any] | None = None,
    query: str = "",
    response_format: dict[str, Any] | None = None,
    end_user: str = "",
) -> ClientTurn:
    """The agent's model answers ``messages`` (system messages first, then the conversation)
    with ``tools`` offered, through the agent's AutoRecall and rescue layer (``session``: an
    olav Session, built on first use). ``query``: the person's request, for the audit.
    ``response_format`` (``json_object``/``json_schema``) holds the answer to JSON
    (olav.runtime.answer_format); :class:`FormatError` when the engine could not."""
    from langchain.agents.middleware.types import ModelRequest, ModelResponse

    from olav.runtime.answer_format import refused
    from olav.runtime.middleware.autorecall import AutoRecallMiddleware
    from olav.runtime.rescue.middleware import RescueMiddleware, RescuePolicy

    built = session.built
    cfg = session.ws.config
    agent = built.agent.name
    run = session.run
    audit = session.audit
    run_id = audit.start_run(agent, session.session_id, query, built.model_name)
    deferred = _Deferred(audit)
    run.begin(run_id)
    run.asked = dict(asked or {})
    first_recall = len(run.recalls)
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    prompt = "\n\n".join(str(m.content) for m in system if str(m.content).strip())
    recaller = built.recallers.get(agent)
    recall = AutoRecallMiddleware(recaller, run) if recaller is not None else None
    rescue = RescueMiddleware(agent, run, RescuePolicy.for_config(cfg, window=built.window))

    fmt: dict[str, Any] = dict(response_format or {})

    def call_engine(request: Any) -> Any:
        head = [request.system_message] if request.system_message is not None else []
        said = [*head, *request.messages]
        settings = dict(request.model_settings or {})
        try:
            return ModelResponse(result=[bound(request, settings).invoke(said)])
        except Exception:
            other = refused(request.model, fmt) if fmt and "response_format" in settings else None
            if other is None:
                raise
            # the server refused json_schema (llama-cpp-python's 500): json_object and the schema
            settings.update(other)
            return ModelResponse(result=[bound(request, settings).invoke(said)])

    held = _held_by(built.model, response_format)
    request = ModelRequest(
        model=built.model,
        model_settings=dict(held or {}),
        messages=cast(Any, rest),
        system_message=SystemMessage(content=prompt) if prompt else None,
        tools=list(tools),
        tool_choice=tool_choice,
        state=cast(Any, {"messages": rest}),
    )

    def rescued(req: Any) -> Any:
        return rescue.wrap_model_call(req, call_engine)

    def answer(req: Any) -> Any:
        return recall.wrap_model_call(req, rescued) if recall else rescued(req)

    run.audit = deferred  # the middleware's writes wait until the client has its answer
    try:
        response = answer(request)
        if response_format and held is not None:
            response = _formatted(request, response, response_format, answer)
    except Exception as exc:
        deferred.end_run(run_id, "error", f"{type(exc).__name__}: {exc}")
        _after(deferred.flush)
        raise
    finally:
        run.audit = audit
    found = [m for m in getattr(response, "result", [response]) if isinstance(m, AIMessage)]
    message = found[-1] if found else AIMessage(content="")
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    turn = ClientTurn(
        message=message,
        run_id=run_id,
        injected=[h for r in run.recalls[first_recall:] for h in r.injected_ids],
        salvaged=bool(run.rescue.salvaged),
        cut_short=bool(run.rescue.cut_short),
        tokens_in=int(usage.get("input_tokens") or 0),
        tokens_out=int(usage.get("output_tokens") or 0),
    )

    def settle() -> None:  # after the reply, on the process's background writer
        turn.captured = _capture(session, recaller, messages, run_id, query)
        _audit(deferred, run_id, agent, rest, message, tools, turn, end_user)
        deferred.flush()

    _after(settle)
    return turn


def bound(request: Any, settings: dict[str, Any]) -> Any:
    """The request's model with its tools (and ``tool_choice``) and ``settings`` bound."""
    model = request.model
    if request.tools:
        return model.bind_tools(request.tools, tool_choice=request.tool_choice, **settings)
    return model.bind(**settings) if settings else model


def _held_by(model: Any, response_format: dict[str, Any] | None) -> dict[str, Any] | None:
    from olav.runtime.answer_format import FormatUnsupported, settings_for

    if not response_format or response_format.get("type") == "text":
        return None
    held = settings_for(model, response_format)
    if held is None:
        raise FormatUnsupported(
            "response_format: this engine has no constrained decoding olav can use",
            hint="Use Ollama or an OpenAI-compatible server, or leave response_format out",
        )
    return held


def _formatted(request: Any, response: Any, response_format: dict[str, Any], answer: Any) -> Any:
    """``response`` if its answer holds to ``response_format``; else the answer asked for
    once more, the problem named; a second miss is a :class:`FormatError`."""
    from langchain_core.messages import HumanMessage

    from olav.runtime.answer_format import FormatError, problem

    def text_of(resp: Any) -> tuple[AIMessage, str]:
        found = [m for m in getattr(resp, "result", [resp]) if isinstance(m, AIMessage)]
        msg = found[-1] if found else AIMessage(content="")
        return msg, msg.content if isinstance(msg.content, str) else str(msg.content)

    msg, text = text_of(response)
    if msg.tool_calls:
        return response  # a call answers the turn; the format is the final answer's
    why = problem(text, response_format)
    if why is None:
        return response
    again = [*request.messages, AIMessage(content=text), HumanMessage(content=(
        f"That answer cannot be used: {why}. Answer again with the JSON object only."
    ))]  # fmt: skip
    response = answer(request.override(messages=again))
    msg, text = text_of(response)
    why = problem(text, response_format)
    if why is not None:
        raise FormatError(
            f"response_format: {why}, twice",
            hint="A larger model, or a simpler schema, holds to it more often",
        )
    return response


def _after(job: Any) -> None:
    from olav.memory.store.writer import shared_writer

    shared_writer().submit("client turn's audit and captures", job)


class _Deferred:
    """The session's audit, its writes kept in order and made later in one opening of the
    database (about 35 ms a call otherwise, on the client's reply path)."""

    WRITES = frozenset(
        ("event", "recall", "steps", "end_run", "message", "tool_call", "decisions", "memory_event")
    )

    def __init__(self, audit: Any) -> None:
        self._audit = audit
        self._calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in self.WRITES:
            return getattr(self._audit, name)

        def later(*args: Any, **kwargs: Any) -> None:
            self._calls.append((name, args, kwargs))

        return later

    def flush(self) -> None:
        calls, self._calls = self._calls, []
        with self._audit.batch():
            for name, args, kwargs in calls:
                getattr(self._audit, name)(*args, **kwargs)


def _capture(
    session: Any, recaller: Any, messages: Sequence[BaseMessage], run_id: str, query: str
) -> int:
    """The client's reported write-type calls, captured pending in the operator's scope."""
    reported = reported_calls(messages)
    if not reported or recaller is None:
        return 0
    from olav.memory.ingest.capture import ToolEvent, capture
    from olav.memory.store.schema import PENDING_EXTERNAL
    from olav.memory.store.scopes import private_scope

    agent = session.built.agent.name
    events = [
        ToolEvent(agent, name, args, result, "error" if bad else "success")
        for name, args, result, bad in reported
    ]
    try:
        made = capture(
            recaller.store,
            events,
            question=query,
            run_id=run_id,
            scope=private_scope(session.ws.config),
            policy=recaller.policy,
            log=session.audit,
            held=PENDING_EXTERNAL,  # what a client reports waits for a person's yes
        )
    except Exception as exc:  # a capture that fails never fails the client's call
        log.warning("capturing a client's reported calls failed: %s", exc)
        return 0
    return len(made)


def _audit(
    audit: Any,
    run_id: str,
    agent: str,
    rest: list[BaseMessage],
    message: AIMessage,
    tools: list[dict[str, Any]],
    turn: ClientTurn,
    end_user: str = "",
) -> None:
    offered = [str((t.get("function") or t).get("name") or "") for t in tools]
    audit.steps(run_id, [*rest, message])
    audit.event(
        run_id,
        CLIENT_TURN_EVENT,
        {
            "agent": agent,
            "tools_offered": offered,
            "tool_calls": [c["name"] for c in message.tool_calls],
            "salvaged": turn.salvaged,
            "injected": turn.injected,
            "captured": turn.captured,
            **({"end_user": end_user} if end_user else {}),
        },
    )
    audit.end_run(run_id, "completed", outcome="completed")


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]
