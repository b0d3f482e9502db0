"""A local HTTP server that speaks the OpenAI chat-completions protocol, for tests.

It answers like llama.cpp's server, vLLM or LM Studio would: ``GET /v1/models``,
``POST /v1/embeddings`` and ``POST /v1/chat/completions``, streaming (server-sent events
over chunked HTTP/1.1, ending with ``data: [DONE]``) or not. Tool calls go out as
``tool_calls`` deltas whose ``function.arguments`` is a JSON string delivered in fragments,
so the client has to reassemble them. Replies come from a per-test script, as in
``ollama_stub``.
A test tool, not a product.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.stubs.ollama_stub import POLL_S, stub_vector

CREATED = 1_790_000_000  # a fixed timestamp keeps the replies deterministic


@dataclass
class OpenAIStubState:
    models: list[str] = field(default_factory=lambda: ["qwen3-8b-instruct"])
    embed_models: dict[str, int] = field(default_factory=lambda: {"bge-m3": 32})  # name: dim
    # turns: {"content": str, "tool_calls": [{"name": str, "args": dict}]}
    chat_script: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    api_key: str | None = None  # when set, chat requests must carry "Bearer <api_key>"
    drop_chat: bool = False  # break the connection after the first streamed chunk
    n_ctx: int | None = None  # when set, GET /props answers like llama.cpp's server with it
    # answer response_format json_schema with a 500, as llama-cpp-python's server does
    refuse_json_schema: bool = False
    refuse_formats: bool = False  # a 500 for any response_format at all
    # send no usage in the stream even when asked, as llama-cpp-python's server does
    no_stream_usage: bool = False
    # the tokenizer route it answers: "extras" (llama-cpp-python's /extras/tokenize/count),
    # "llama-server" (/tokenize), or None for neither; a token is a word or a punctuation mark
    tokenize: str | None = None
    # a window (in those tokens): a longer prompt gets llama-cpp-python's answers, a 400
    # context_length_exceeded unstreamed and an empty 200 stream when streamed
    window: int | None = None
    empty_stream: bool = False  # answer streamed requests with an empty 200 stream


def stub_tokens(text: str) -> int:
    """The stub's tokenizer: words and punctuation marks."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def _prompt_tokens(data: dict[str, Any]) -> int:
    return sum(stub_tokens(str(m.get("content") or "")) for m in data.get("messages") or [])


def _format_type(data: dict[str, Any]) -> str:
    fmt = data.get("response_format")
    return str(fmt.get("type")) if isinstance(fmt, dict) else ""


def _completion_id(state: OpenAIStubState) -> str:
    return f"chatcmpl-stub{len(state.requests)}"


def _tool_calls(turn: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{i}_{c['name']}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}))},
        }
        for i, c in enumerate(turn.get("tool_calls") or [])
    ]


def _stream_deltas(turn: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The deltas a server streams for one turn: role, words of content, tool-call pieces."""
    yield {"role": "assistant", "content": ""}
    for word in str(turn.get("content", "")).split(" "):
        if word:
            yield {"content": word + " "}
    for i, call in enumerate(_tool_calls(turn)):
        args = call["function"]["arguments"]
        half = len(args) // 2
        yield {
            "tool_calls": [
                {
                    "index": i,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": args[:half]},
                }
            ]
        }
        yield {"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]}


def _handler(state: OpenAIStubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 for chunked streaming, so that a cut-off body is detectable. Every reply
        # closes its connection: no pooled socket outlives a test or the stopped stub.
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes (no 40 ms stall)

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, code: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, message: str, kind: str, err_code: str) -> None:
            self._send(code, {"error": {"message": message, "type": kind, "code": err_code}})

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                data = [
                    {"id": m, "object": "model", "created": CREATED, "owned_by": "stub"}
                    for m in [*state.models, *state.embed_models]
                ]
                self._send(200, {"object": "list", "data": data})
            elif self.path == "/props" and state.n_ctx is not None:
                self._send(200, {"default_generation_settings": {"n_ctx": state.n_ctx}})
            else:
                self._error(404, f"no route {self.path}", "invalid_request_error", "not_found")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            data = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append((self.path, data))
            if self.path == "/v1/embeddings":
                self._embed(data)
            elif self.path in ("/extras/tokenize/count", "/tokenize"):
                self._tokenize(data)
            elif self.path != "/v1/chat/completions":
                self._error(404, f"no route {self.path}", "invalid_request_error", "not_found")
            elif state.api_key and self.headers.get("Authorization") != f"Bearer {state.api_key}":
                self._error(401, "Incorrect API key", "invalid_request_error", "invalid_api_key")
            elif data.get("model") not in state.models:
                message = f"The model `{data.get('model')}` does not exist"
                self._error(404, message, "invalid_request_error", "model_not_found")
            elif (state.refuse_json_schema and _format_type(data) == "json_schema") or (
                state.refuse_formats and _format_type(data)
            ):
                self._error(500, "Internal Server Error", "server_error", "internal")
            elif state.window is not None and _prompt_tokens(data) > state.window:
                self._overflow(data)
            elif state.empty_stream and data.get("stream"):
                state.chat_script.pop(0) if state.chat_script else None
                self._empty_stream()
            else:
                turn = state.chat_script.pop(0) if state.chat_script else {"content": "ok"}
                if data.get("stream"):
                    self._stream(data, turn)
                else:
                    self._complete(data, turn)

        def _tokenize(self, data: dict[str, Any]) -> None:
            if self.path == "/extras/tokenize/count" and state.tokenize == "extras":
                self._send(200, {"count": stub_tokens(str(data.get("input", "")))})
            elif self.path == "/tokenize" and state.tokenize == "llama-server":
                self._send(200, {"tokens": list(range(stub_tokens(str(data["content"]))))})
            else:
                self._error(404, f"no route {self.path}", "invalid_request_error", "not_found")

        def _empty_stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            self._chunk(b"")

        def _overflow(self, data: dict[str, Any]) -> None:
            if data.get("stream"):  # llama-cpp-python: 200, and a stream with nothing in it
                self._empty_stream()
                return
            asked = _prompt_tokens(data)
            message = (
                f"This model's maximum context length is {state.window} tokens. However, you "
                f"requested {asked + 16} tokens ({asked} in the messages, 16 in the completion)."
            )
            self._error(400, message, "invalid_request_error", "context_length_exceeded")

        def _embed(self, data: dict[str, Any]) -> None:
            dim = state.embed_models.get(data.get("model", ""))
            if not dim:
                message = f"The model `{data.get('model')}` does not exist"
                self._error(404, message, "invalid_request_error", "model_not_found")
                return
            inputs = data["input"] if isinstance(data["input"], list) else [data["input"]]
            rows = [
                {"object": "embedding", "index": i, "embedding": stub_vector(text, dim)}
                for i, text in enumerate(inputs)
            ]
            self._send(200, {"object": "list", "data": rows, "model": data["model"]})

        def _complete(self, data: dict[str, Any], turn: dict[str, Any]) -> None:
            message: dict[str, Any] = {"role": "assistant", "content": turn.get("content", "")}
            calls = _tool_calls(turn)
            if calls:
                message["tool_calls"] = calls
            choice = {
                "index": 0,
                "message": message,
                "finish_reason": turn.get("finish_reason") or ("tool_calls" if calls else "stop"),
            }
            self._send(
                200,
                {
                    "id": _completion_id(state),
                    "object": "chat.completion",
                    "created": CREATED,
                    "model": data["model"],
                    "choices": [choice],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                },
            )

        def _chunk(self, payload: bytes) -> None:
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def _event(self, data: dict[str, Any], delta: dict[str, Any], finish: Any) -> None:
            chunk = {
                "id": _completion_id(state),
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": data["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())

        def _stream(self, data: dict[str, Any], turn: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for n, delta in enumerate(_stream_deltas(turn)):
                self._event(data, delta, None)
                if state.drop_chat and n == 1:  # the server dies mid-answer
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
            finish = turn.get("finish_reason") or (
                "tool_calls" if turn.get("tool_calls") else "stop"
            )
            self._event(data, {}, finish)
            asked = (data.get("stream_options") or {}).get("include_usage")
            if asked and not state.no_stream_usage:
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                tail = {
                    "id": _completion_id(state),
                    "object": "chat.completion.chunk",
                    "created": CREATED,
                    "model": data["model"],
                    "choices": [],
                    "usage": usage,
                }
                self._chunk(f"data: {json.dumps(tail)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")  # the zero-length chunk that ends the body

    return Handler


@contextmanager
def openai_stub(
    state: OpenAIStubState | None = None,
) -> Iterator[tuple[str, OpenAIStubState]]:
    """Run the stub on 127.0.0.1 on a free port; yields (base_url ending in /v1, state)."""
    state = state or OpenAIStubState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        server.shutdown()
        server.server_close()
