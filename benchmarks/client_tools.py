"""``python -m benchmarks client-tools``: olav as the model of a client's own agent loop, on
an engine that writes its calls as text in the shapes of a public suite (issue 56, item 3).

The engine is a small OpenAI-compatible server in this process that answers every chat call
with one CanIToolCall fixture's raw model output (the fixture is named in the request, so a
re-ask gets the same output). ``olav serve`` runs as the user runs it, and the ``openai``
package sends each fixture's request with the fixture's tools, as a client's loop would. A
fixture that expects calls scores when the client receives exactly those calls, structured
(``tool_calls``), with arguments valid under the client's schema; a fixture that expects
none scores when no call comes back. The deterministic held-out quarter of the suite (by a
hash of the id, as ``olav bench toolcalls --suite canitoolcall`` splits it) is reported
apart.

Latency: the same requests sent straight to the engine, and through olav (recall, rescue,
HTTP; the audit and captures are written after the reply), interleaved; the added p50 is the
difference of the medians, and recall's own p50 (the audit's) is reported beside it.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.serve import _start

_ID = re.compile(r"\[fixture (\d+)\]")


class Engine:
    """The fixtures' outputs behind ``/v1/chat/completions`` (and ``/v1/models``); asked to
    stream, the output comes a word at a time, ``word_delay`` seconds apart."""

    def __init__(self, outputs: list[str], word_delay: float = 0.0) -> None:
        self.outputs = outputs
        self.word_delay = word_delay
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"object": "list", "data": [{"id": "engine", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                found = _ID.search(json.dumps(body.get("messages")))
                text = engine.outputs[int(found.group(1))] if found else engine.outputs[-1]
                if body.get("stream"):
                    self._stream(text)
                    return
                message = {"role": "assistant", "content": text}
                usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
                choice = {"index": 0, "message": message, "finish_reason": "stop"}
                self._send(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "engine",
                        "choices": [choice],
                        "usage": usage,
                    }
                )

            def _stream(self, text: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                words = re.findall(r"\S+\s*", text)
                for word in words:
                    delta = {"choices": [{"index": 0, "delta": {"content": word}}]}
                    self.wfile.write(f"data: {json.dumps({'id': 'x', **delta})}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(engine.word_delay)  # the model's pace, not a synchronisation
                end = {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def workspace(root: Path, engine_url: str, model: str = "engine", more: str = "") -> Any:
    """A workspace on the hash embedder and the OpenAI-compatible engine at ``engine_url``;
    ``more``: olav.yaml lines after the ``llm`` section's own."""
    from olav.admin.setup import init_workspace
    from olav.core.config import Workspace

    (root / ".olav").mkdir(parents=True)
    (root / ".olav" / "olav.yaml").write_text(
        "embedder:\n  provider: hash\n  model: hash-64\n"
        f"llm:\n  provider: openai\n  base_url: {engine_url}\n  model: {model}\n"
        + (more or "  num_ctx: 32768\n")
    )
    init_workspace(root)
    return Workspace.open(root)


def _valid(args: dict[str, Any], schema: dict[str, Any]) -> bool:
    import jsonschema

    try:
        jsonschema.validate(args, schema)
    except jsonschema.ValidationError:
        return False
    return True


def _expected(fixture: Any) -> list[tuple[str, dict[str, Any]]]:
    if fixture.expected is None:
        return []
    return [(tc.name, dict(tc.arguments)) for tc in fixture.expected.tool_calls]


@dataclass(frozen=True)
class Item:
    id: str
    family: str
    held_out: bool
    output: str  # what the engine writes
    tools: list[dict[str, Any]]  # OpenAI's shape
    expected: list[tuple[str, dict[str, Any]]]
    request: str = "please go ahead"  # the person's words (a corpus case has its own)


def suite_items() -> list[Item]:
    """CanIToolCall's fixtures with a right answer (not the truncated or malformed ones)."""
    from olav.bench.toolcall_suite import _kind, fixtures, held_out

    return [
        Item(
            f.id,
            f.family,
            held_out(f.id),
            f.raw_output,
            [t if "function" in t else {"type": "function", "function": t} for t in f.tools],
            _expected(f),
        )
        for f in fixtures("all")[0]
        if _kind(f) != "error"
    ]


def corpus_items(path: Path) -> list[Item]:
    """A corpus of ``olav bench toolcalls`` (the held-out one: shapes gathered apart from the
    suite), every case held out."""
    from olav.bench.toolcalls import load_cases

    return [
        Item(
            c.id,
            c.family,
            True,
            c.raw_text,
            [
                {"type": "function", "function": {"name": n, "parameters": schema}}
                for n, schema in c.tools.items()
            ],
            [(e["name"], dict(e["arguments"])) for e in c.expect] if c.kind == "call" else [],
            c.request or "please go ahead",
        )
        for c in load_cases(path)
    ]


def run_client_tools(limit: int | None = None, corpus: Path | None = None) -> dict[str, Any]:
    import openai

    from olav.access.tokens import TokenStore

    every = (corpus_items(corpus) if corpus else suite_items())[:limit]
    engine = Engine([f.output for f in every])
    rows: list[dict[str, Any]] = []
    direct_ms: list[float] = []
    served_ms: list[float] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp) / "ws", engine.url)
        _, token = TokenStore.for_workspace(ws).create("bench")
        proc, url = _start(ws.root)
        try:
            olav = openai.OpenAI(base_url=url + "/v1", api_key=token, max_retries=0, timeout=120)
            straight = openai.OpenAI(base_url=engine.url, api_key="x", max_retries=0)
            for i, f in enumerate(every):
                tools = [
                    t if "function" in t else {"type": "function", "function": t} for t in f.tools
                ] or None
                messages = [{"role": "user", "content": f"[fixture {i}] {f.request}"}]
                t0 = time.perf_counter()
                straight.chat.completions.create(model="engine", messages=messages, tools=tools)
                direct_ms.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                done = olav.chat.completions.create(
                    model="olav/core",
                    messages=messages,
                    tools=tools,
                )
                served_ms.append((time.perf_counter() - t0) * 1000)
                got = [
                    (c.function.name, json.loads(c.function.arguments or "{}"))
                    for c in done.choices[0].message.tool_calls or []
                ]
                schemas = {
                    t["function"]["name"]: t["function"].get("parameters") or {} for t in f.tools
                }
                want = f.expected
                exact = [g[0] for g in got] == [w[0] for w in want] and all(
                    _valid(args, schemas.get(name, {})) for name, args in got
                )
                exact = exact and all(
                    _same(g[1], w[1], schemas.get(w[0], {}))
                    for g, w in zip(got, want, strict=False)
                )
                rows.append(
                    {
                        "id": f.id,
                        "family": f.family,
                        "held_out": f.held_out,
                        "calls": bool(want),
                        "ok": exact,
                    }
                )
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
            engine.close()
        from olav.audit.recorder import AuditRecorder

        (recall_ms,) = AuditRecorder(ws.audit_path).query("SELECT median(latency_ms) FROM recalls")[
            0
        ]

    def part(sel: list[dict[str, Any]]) -> dict[str, Any]:
        calls = [r for r in sel if r["calls"]]
        none = [r for r in sel if not r["calls"]]
        return {
            "fixtures": len(sel),
            "calls": len(calls),
            "calls_structured_and_valid": round(sum(r["ok"] for r in calls) / len(calls), 3)
            if calls
            else None,
            "no_call_where_none": round(sum(r["ok"] for r in none) / len(none), 3)
            if none
            else None,
        }

    return {
        "all": part(rows),
        "dev": part([r for r in rows if not r["held_out"]]),
        "held_out": part([r for r in rows if r["held_out"]]),
        "failed": [r["id"] for r in rows if not r["ok"]][:40],
        "direct_p50_ms": round(statistics.median(direct_ms), 2),
        "through_olav_p50_ms": round(statistics.median(served_ms), 2),
        "added_p50_ms": round(statistics.median(served_ms) - statistics.median(direct_ms), 2),
        "recall_p50_ms": round(float(recall_ms or 0.0), 2),  # its own, from the audit
        "added_beyond_recall_p50_ms": round(
            statistics.median(served_ms) - statistics.median(direct_ms) - float(recall_ms or 0.0), 2
        ),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _same(got: dict[str, Any], want: dict[str, Any], schema: dict[str, Any]) -> bool:
    """The same arguments once both are read by the schema (``9000`` and ``"9000"`` for an
    integer field are the same)."""
    from olav.runtime.rescue import coerce

    def norm(args: dict[str, Any]) -> str:
        checked = coerce(args, schema) if schema else None
        return json.dumps(checked.args if checked and checked.ok else args, sort_keys=True)

    return norm(got) == norm(want)
