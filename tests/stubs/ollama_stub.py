"""A local HTTP server that speaks enough of Ollama's (and OpenAI's) protocol for tests.

It serves ``/api/tags``, ``/api/embed``, ``/api/chat`` (NDJSON, tool calls with JSON-object
arguments) and ``/v1/embeddings``. Embeddings are deterministic feature hashes, so the real
clients can be exercised end to end without any model weights. A test tool, not a product.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# how often the server loop looks for shutdown(): stopping a stub waits at most this long,
# not http.server's default half second
POLL_S = 0.02


def stub_vector(text: str, dim: int) -> list[float]:
    vec = [0.0] * dim
    for word in text.lower().split():
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
        vec[h % dim] += 1.0
    norm = sum(x * x for x in vec) ** 0.5 or 1.0
    return [x / norm for x in vec]


@dataclass
class StubState:
    models: dict[str, int] = field(default_factory=lambda: {"bge-m3": 32, "qwen3:8b": 0})
    chat_script: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    api_key: str | None = None
    drop_chat: bool = False  # close the connection mid-response
    # when set, computes each /api/chat reply (a chat_script turn) from the request body
    chat_reply: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # what /api/show reports as the model's trained window (None: the model_info has none)
    context_length: int | None = None
    # a slow model: the answer streamed a word at a time, this many seconds apart (0: at once)
    word_delay: float = 0.0
    words_sent: int = 0  # of the streamed answers
    break_after: int = 0  # a server that breaks off: reset the connection after this many words
    aborted: int = 0  # streamed answers whose client hung up before the end


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # headers and body are two writes (no 40 ms stall)

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, code: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/api/tags":
                models = [{"name": n if ":" in n else f"{n}:latest"} for n in state.models]
                self._send(200, {"models": models})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            data = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append((self.path, data))
            if self.path == "/api/embed":
                self._embed_ollama(data)
            elif self.path == "/v1/embeddings":
                self._embed_openai(data)
            elif self.path == "/api/show":
                self._show(data)
            elif self.path == "/api/chat":
                self._chat(data)
            elif self.path == "/api/generate" and not data.get("prompt"):  # a model load
                self._send(200, {"model": data.get("model"), "response": "", "done": True})
            else:
                self._send(404, {"error": "not found"})

        def _dim(self, model: str) -> int | None:
            return state.models.get(model) or state.models.get(model.removesuffix(":latest"))

        def _embed_ollama(self, data: dict[str, Any]) -> None:
            dim = self._dim(data.get("model", ""))
            if not dim:
                self._send(404, {"error": f"model '{data.get('model')}' not found"})
                return
            inputs = data["input"] if isinstance(data["input"], list) else [data["input"]]
            self._send(
                200, {"model": data["model"], "embeddings": [stub_vector(t, dim) for t in inputs]}
            )

        def _embed_openai(self, data: dict[str, Any]) -> None:
            if state.api_key and self.headers.get("Authorization") != f"Bearer {state.api_key}":
                self._send(401, {"error": {"message": "bad key"}})
                return
            dim = self._dim(data.get("model", ""))
            if not dim:
                self._send(404, {"error": {"message": "no such model"}})
                return
            inputs = data["input"] if isinstance(data["input"], list) else [data["input"]]
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {"object": "embedding", "index": i, "embedding": stub_vector(t, dim)}
                        for i, t in enumerate(inputs)
                    ],
                },
            )

        def _show(self, data: dict[str, Any]) -> None:
            if data.get("model") not in state.models:
                self._send(404, {"error": f"model '{data.get('model')}' not found"})
                return
            info: dict[str, Any] = {"general.architecture": "qwen3"}
            if state.context_length is not None:
                info["qwen3.context_length"] = state.context_length
            self._send(200, {"modelfile": "", "details": {"family": "qwen3"}, "model_info": info})

        def _chat(self, data: dict[str, Any]) -> None:
            model = data.get("model", "")
            if model not in state.models:
                self._send(404, {"error": f"model '{model}' not found, try pulling it first"})
                return
            if state.chat_reply is not None:
                turn = state.chat_reply(data)
            else:
                turn = state.chat_script.pop(0) if state.chat_script else {"content": "ok"}
            message = {"role": "assistant", "content": turn.get("content", "")}
            if turn.get("tool_calls"):
                message["tool_calls"] = [
                    {"function": {"name": c["name"], "arguments": c.get("args", {})}}
                    for c in turn["tool_calls"]
                ]
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            if state.word_delay and not turn.get("tool_calls"):
                self._stream_words(model, message["content"], turn.get("done_reason", "stop"))
                return
            if state.drop_chat:
                self.wfile.write(b'{"message": {"role": "assistant", "content": "par')
                self.wfile.flush()
                self.connection.close()
                return
            final = {
                "model": model,
                "created_at": "2026-01-01T00:00:00Z",
                "message": message,
                "done": True,
                "done_reason": turn.get("done_reason", "stop"),  # "length": the token limit
                "prompt_eval_count": 10,
                "eval_count": 5,
            }
            self.wfile.write((json.dumps(final) + "\n").encode())

        def _stream_words(self, model: str, content: str, reason: str = "stop") -> None:
            import time

            words = content.split(" ")
            try:
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    line = {"model": model, "message": {"role": "assistant", "content": piece}}
                    self.wfile.write((json.dumps({**line, "done": False}) + "\n").encode())
                    self.wfile.flush()
                    state.words_sent += 1
                    if state.break_after and i + 1 >= state.break_after:
                        import socket
                        import struct

                        # SO_LINGER 0: close with a reset, as a crashed server's kernel does
                        linger = struct.pack("ii", 1, 0)
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                        self.connection.close()
                        return
                    time.sleep(state.word_delay)  # the model's time per token
                final = {
                    "model": model,
                    "message": {"role": "assistant", "content": ""},
                    "done": True,
                    "done_reason": reason,
                    "prompt_eval_count": 10,
                    "eval_count": len(words),
                }
                self.wfile.write((json.dumps(final) + "\n").encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                state.aborted += 1

    return Handler


@contextmanager
def ollama_stub(state: StubState | None = None) -> Iterator[tuple[str, StubState]]:
    """Run the stub on 127.0.0.1 on a free port; yields (base_url, state)."""
    state = state or StubState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
