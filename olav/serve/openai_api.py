"""OpenAI-compatible: ``/v1/models`` and ``/v1/chat/completions``, streaming and not.

Each agent is a model named ``olav/<agent>`` (the bare name works too). The client sends the
whole conversation every time, as the OpenAI API does: its last user message is the request,
the turns before it are put into a new thread first, so the agent sees them, and the thread is
deleted when the run ends. AutoRecall, the rescue layer and the agent's tools run on the
server; the reply is the agent's answer. A client's ``system`` message and ``tools`` are not
used: the agent has its own. Errors have OpenAI's shape, ``{"error": {"message", "type",
"code"}}``, so every OpenAI client shows them.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import JsonValue
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from olav.serve import answers as A
from olav.serve import openai_tools
from olav.serve.follow import follow
from olav.serve.http import HTTPError, content_text, oai_error, shown
from olav.serve.openai_schema import ChatMessage, ChatRequest
from olav.serve.routing import Reply, Routes
from olav.serve.run import Run
from olav.serve.schema import RunRequest
from olav.serve.server import Server

V1 = Routes()
MODEL = Reply("the model", A.Model)

PREFIX = "olav/"
CREATED = int(time.time())


def _oai_error(status: int, message: str, param: str | None = None) -> JSONResponse:
    return oai_error(status, message, param=param)


# what a client may ask for that olav's agents do not do: refused with a 400 that names the
# field, never dropped without a word (docs/http-api.md has the whole table)
REFUSED = {
    "tools": "this server's serve.client_tools is refuse: the agent runs its own tools",
    "tool_choice": "the agent chooses among its own tools (send tools to run your own)",
    "functions": "functions is OpenAI's old name: send tools",
    "function_call": "function_call is OpenAI's old name: send tool_choice",
    "response_format": "this server's serve.client_tools is refuse, or the type is unknown: "
    "send json_object or json_schema",
    "logprobs": "olav does not return log probabilities",
    "top_logprobs": "olav does not return log probabilities",
    "logit_bias": "olav does not pass logit biases to the engine",
    "audio": "olav answers in text",
    "prediction": "olav does not take predicted outputs",
    "store": "olav keeps no completions for later retrieval (its audit is the operator's)",
}
UNSET: tuple[Any, ...] = (None, False, [], {}, "")


def _refused(body: dict[str, Any], *, client_loop: bool = False) -> None:
    """A 400 naming the first field olav would otherwise drop (``client_loop``: the request
    is for the client's own loop, which takes ``tools`` and ``tool_choice``)."""
    for field, why in REFUSED.items():
        if client_loop and field in ("tools", "tool_choice", "response_format"):
            continue
        if body.get(field) not in UNSET:
            raise _Refusal(field, f"{field} is not supported: {why}; leave it out")
    n = body.get("n")
    if n not in (None, 1):
        raise _Refusal("n", "n must be 1: olav answers with one choice")
    modalities = body.get("modalities")
    if modalities not in (None, ["text"]):
        raise _Refusal("modalities", 'modalities must be ["text"]: olav answers in text')


def _asked(chat: ChatRequest) -> dict[str, Any]:
    """The model settings a client asked for (olav.runtime.rescue.asked applies them; the
    model has checked their ranges): ``max_tokens``/``max_completion_tokens`` (the newer name
    wins), ``temperature``, ``top_p``, ``presence_penalty``, ``frequency_penalty``, ``stop``,
    ``seed``."""
    out: dict[str, Any] = {}
    most = chat.max_completion_tokens or chat.max_tokens
    if most is not None:
        out["max_tokens"] = most
    for field in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        value = getattr(chat, field)
        if value is not None:
            out[field] = float(value)
    if chat.stop is not None:
        out["stop"] = [chat.stop] if isinstance(chat.stop, str) else list(chat.stop)
    if chat.seed is not None:
        out["seed"] = chat.seed
    return out


def _finish(run: Run) -> str:
    """``length`` when the model stopped on its token limit (the client's ``max_tokens`` or
    the agent's own), else ``stop``."""
    return "length" if run.usage.get("cut_short") else "stop"


class _Refusal(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


@V1.get(
    "/v1/models", "every agent as a model olav/<agent>", Reply("the models", A.Models), openai=True
)
def models(server: Server, request: Request, operator: str) -> A.Models:
    return A.Models(object="list", data=[_model(name) for name in sorted(server.agents)])


def _model(name: str) -> A.Model:
    return A.Model(id=PREFIX + name, object="model", created=CREATED, owned_by="olav")


@V1.get(
    "/v1/models/{model}", "one agent as a model, by its name", MODEL, errors=(404, 422), openai=True
)
@V1.get(
    "/v1/models/olav/{model}",
    "one agent as a model, by its id olav/<agent>",
    MODEL,
    errors=(404, 422),
    openai=True,
)
def model_get(server: Server, request: Request, operator: str) -> A.Model | Response:
    """One agent as a model (``GET /v1/models/{id}``: the SDKs' ``models.retrieve``)."""
    name = str(request.path_params["model"])
    wanted = PREFIX + name if request.url.path.startswith("/v1/models/" + PREFIX) else name
    if name not in server.agents:
        return _oai_error(404, f"no model {shown(wanted, 80)!r}; the models are: {_names(server)}")
    return _model(name)


def _agent(server: Server, model: str) -> str:
    """The agent a model id names (``ChatRequest`` has checked it is an id)."""
    name = model[len(PREFIX) :] if model.startswith(PREFIX) else model
    if name not in server.agents:
        raise HTTPError(404, f"no model {model!r}; the models are: {_names(server)}")
    return name


def _names(server: Server) -> str:
    return ", ".join(PREFIX + n for n in sorted(server.agents))


def _conversation(messages: list[ChatMessage]) -> tuple[str, list[Any]]:
    """The request (the last user message) and the turns before it, as LangChain messages."""
    from langchain_core.messages import AIMessage, HumanMessage

    turns: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        try:
            turns.append((message.role, content_text(message.content)))
        except HTTPError:
            raise HTTPError(422, f"messages[{i}].content must be text") from None
    if turns[-1][0] != "user" or not turns[-1][1].strip():
        raise HTTPError(422, "the last message must be the user's, with text")
    history: list[Any] = []
    for role, text in turns[:-1]:
        if role == "user" and text.strip():
            history.append(HumanMessage(content=text))
        elif role == "assistant" and text.strip():
            history.append(AIMessage(content=text))
    return turns[-1][1], history


ANSWER = Reply(
    "the answer (server-sent events when stream is true)", A.ChatCompletion, events=A.ChatChunk
)


@V1.post(
    "/v1/chat/completions",
    "the agent's answer, streamed or not",
    {200: ANSWER},
    errors=(400, 404, 409, 413, 422, 502),
    body=ChatRequest,
    body_required=True,
    openai=True,
)
async def completions(
    server: Server, request: Request, operator: str, chat: ChatRequest
) -> A.ChatCompletion | Response:
    try:
        client_loop = openai_tools.wanted(server, chat)
        _refused(chat.model_dump(exclude_unset=True), client_loop=client_loop)
        agent = _agent(server, chat.model)
        if client_loop:
            return await openai_tools.complete(server, operator, agent, chat, _asked(chat))
        text, history = _conversation(chat.messages)
        run = server.start(
            server.new_run(
                operator,
                RunRequest(
                    assistant_id=agent,
                    input=text,
                    stream_mode=["messages-tuple"],  # "messages" events: the text as it comes
                    metadata={"end_user": chat.user} if chat.user else {},
                    history=history,
                    asked=_asked(chat),
                    interruptible=False,
                ),
                None,
            )
        )
    except HTTPError as exc:
        return _oai_error(exc.status, exc.detail)
    except _Refusal as exc:
        return _oai_error(400, exc.message, exc.field)
    if chat.stream:
        include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
        return StreamingResponse(
            _chunks(run, chat.model, include_usage),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )
    await run.ended()
    if run.status != "success":
        return _oai_error(502, f"the run failed: {run.error or run.status}")
    return A.ChatCompletion(
        id=f"chatcmpl-{run.run_id}",
        object="chat.completion",
        created=int(time.time()),
        model=chat.model,
        choices=[
            {
                "index": 0,
                "message": {"role": "assistant", "content": run.answer},
                "finish_reason": _finish(run),
            }
        ],
        usage=_usage(run),
    )


def _usage(run: Run) -> dict[str, JsonValue]:
    prompt = int(run.usage.get("tokens_in") or 0)
    completion = int(run.usage.get("tokens_out") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


async def _chunks(run: Run, model: str, include_usage: bool) -> AsyncIterator[bytes]:
    base = {
        "id": f"chatcmpl-{run.run_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    streamed = False
    async for events in follow(run):
        if not events:
            yield b": heartbeat\n\n"
        for _, event, data in events:
            if event == "messages":
                piece = str(data[0].get("content") or "")
                if piece:
                    streamed = True
                    yield chunk({"content": piece})
    if run.status != "success":
        error = {"error": {"message": f"the run failed: {run.error or run.status}"}}
        yield f"data: {json.dumps(error)}\n\n".encode()
        yield b"data: [DONE]\n\n"
        return
    rest = run.unshown if streamed else run.answer
    if rest:
        yield chunk({"content": rest})
    yield chunk({}, _finish(run))
    if include_usage:
        data = {**base, "choices": [], "usage": _usage(run)}
        yield f"data: {json.dumps(data)}\n\n".encode()
    yield b"data: [DONE]\n\n"
