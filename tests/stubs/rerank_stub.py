"""A local HTTP server that answers rerank requests the way the real servers do, for tests.

- ``/v1/rerank`` and ``/rerank`` in the Jina/Cohere shape (llama.cpp ``--reranking``, vLLM,
  Infinity): ``{"model"?, "query", "documents", "top_n"?, "return_documents"?}`` in,
  ``{"results": [{"index", "relevance_score"}]}`` out, best first;
- ``/tei/rerank`` like text-embeddings-inference: ``{"query", "texts", ...}`` in, a bare list of
  ``{"index", "score"}`` out;
- ``/score`` like vLLM: ``{"model", "text_1", "text_2"}`` in, ``{"data": [{"index", "score"}]}``.

A request with a field its dialect does not know, or without one it needs, gets 422 (as a
strict server would), so the client is held to each shape. The scores come from ``score_fn``
(query, document) -> float. ``mode`` breaks it on purpose: ``slow`` holds the answer until the
test's ``release`` event (or ``hold_s``), ``garbage`` answers text, ``wrong`` answers an index
out of range, ``nan`` a non-finite score, ``short`` one result too few, ``error`` a 500.
A test tool, not a product.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.stubs.ollama_stub import POLL_S

FIELDS = {
    "rerank": ({"query", "documents"}, {"model", "top_n", "return_documents"}),
    "tei": ({"query", "texts"}, {"raw_scores", "return_text", "truncate"}),
    "score": ({"text_1", "text_2"}, {"model"}),
}
ROUTES = {"/v1/rerank": "rerank", "/rerank": "rerank", "/tei/rerank": "tei", "/score": "score"}


def overlap_score(query: str, document: str) -> float:
    """Share of the request's words the document has: a crude reranker, but a real signal."""
    q = {w for w in query.lower().split() if len(w) > 2}
    d = set(document.lower().split())
    return len(q & d) / len(q) if q else 0.0


@dataclass
class RerankStubState:
    score_fn: Callable[[str, str], float] = overlap_score
    mode: str = ""
    logits: bool = False  # answer raw logits (outside [0, 1]) as TEI's raw_scores would
    hold_s: float = 30.0
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    api_key: str | None = None


def _answer(state: RerankStubState, dialect: str, body: dict[str, Any]) -> tuple[int, Any]:
    need, may = FIELDS[dialect]
    missing, unknown = need - body.keys(), body.keys() - need - may
    if missing or unknown:
        return 422, {"error": f"missing {sorted(missing)}, unknown {sorted(unknown)}"}
    query = body["text_1"] if dialect == "score" else body["query"]
    docs = body.get("documents") or body.get("texts") or body.get("text_2") or []
    scores = [float(state.score_fn(query, d)) for d in docs]
    if state.logits:
        scores = [8.0 * s - 4.0 for s in scores]
    order = sorted(range(len(docs)), key=lambda i: -scores[i])
    if state.mode == "short":
        order = order[:-1]
    key = "relevance_score" if dialect == "rerank" else "score"
    items: list[dict[str, Any]] = [{"index": i, key: scores[i]} for i in order]
    if state.mode == "wrong" and items:
        items[0]["index"] = len(docs) + 3
    if state.mode == "nan" and items:
        items[0][key] = "NaN"
    if dialect == "rerank":
        return 200, {"model": body.get("model", ""), "results": items}
    if dialect == "tei":
        return 200, items
    return 200, {"object": "list", "data": items}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # the headers and the body are two writes: with Nagle on, the body waits for the
    # client's delayed ACK (40 ms a request on a kept-alive connection, as no real server does)
    disable_nagle_algorithm = True
    state: RerankStubState

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (the slow mode outlasts its timeout)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send(400, {"error": "not JSON"})
            return
        self.state.requests.append((self.path, body))
        dialect = ROUTES.get(self.path)
        if dialect is None:
            self._send(404, {"error": f"no route {self.path}"})
            return
        if self.state.api_key and self.headers.get("Authorization") != (
            f"Bearer {self.state.api_key}"
        ):
            self._send(401, {"error": "bad key"})
            return
        if self.state.mode == "slow":
            self.state.release.wait(self.state.hold_s)
        if self.state.mode == "error":
            self._send(500, {"error": "model not loaded"})
            return
        if self.state.mode == "garbage":
            self._send(200, None, raw=b"<html>proxy error</html>")
            return
        status, payload = _answer(self.state, dialect, body)
        self._send(status, payload)


@contextmanager
def rerank_stub(state: RerankStubState) -> Iterator[str]:
    """Serve ``state`` on 127.0.0.1; yields the base URL."""
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
