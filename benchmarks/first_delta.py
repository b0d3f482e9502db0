"""``python -m benchmarks first-delta``: how soon the first piece of the answer reaches a
client of ``/v1/chat/completions`` and one of the Agent Protocol, in the same run, and in how
many deltas the answer comes (issue 56's streaming target).

The engine is an OpenAI-compatible server in this process that streams a 1,800-character
answer a word at a time, 5 ms apart (benchmarks.client_tools.Engine), so both paths get the
same answer at the same pace; ``--real`` uses llama.cpp's server with SmolLM2 instead
(``make engine``), whose 135M model answers differently each time and sometimes with a call
the rescue layer holds, so its rows are noisier.

``olav serve --port 0`` runs in its own process on the hash embedder; the two requests
alternate, ``rounds`` times each, with the same question on fresh threads. The first delta is
the first chunk with text: ``choices[0].delta.content`` on ``/v1``, a ``messages`` event with
content on ``POST /threads/{id}/runs/stream`` (``stream_mode: messages-tuple``).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.serve import _start

QUESTION = "Write a long story about a lighthouse keeper and a storm, in many paragraphs."
PORT = 8799


def _v1(client: Any, started: float) -> tuple[float | None, int, int]:
    first, deltas, chars = None, 0, 0
    body = {
        "model": "olav/core",
        "stream": True,
        "messages": [{"role": "user", "content": QUESTION}],
    }
    with client.stream("POST", "/v1/chat/completions", json=body) as res:
        for line in res.iter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or []
            piece = (choices[0].get("delta") or {}).get("content") if choices else None
            if piece:
                first = first if first is not None else time.perf_counter() - started
                deltas += 1
                chars += len(piece)
    return first, deltas, chars


def _protocol(client: Any, started: float) -> tuple[float | None, int, int]:
    tid = client.post("/threads", json={}).json()["thread_id"]
    body = {
        "assistant_id": "core",
        "stream_mode": ["messages-tuple"],
        "input": {"messages": [{"role": "user", "content": QUESTION}]},
    }
    first, deltas, chars, event = None, 0, 0, ""
    started = time.perf_counter()
    with client.stream("POST", f"/threads/{tid}/runs/stream", json=body) as res:
        for line in res.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "messages":
                data = json.loads(line[6:])
                piece = data[0].get("content") if isinstance(data, list) and data else None
                if piece and data[0].get("type") in ("AIMessageChunk", "ai"):
                    first = first if first is not None else time.perf_counter() - started
                    deltas += 1
                    chars += len(piece)
    return first, deltas, chars


ANSWER = " ".join(
    f"The keeper climbed the {i}th stair of the lighthouse and trimmed the wick again."
    for i in range(24)
)[:1800]


def run_first_delta(home: Path, rounds: int = 5, *, real: bool = False) -> dict[str, Any]:
    import httpx

    from benchmarks.client_tools import Engine, workspace
    from olav.access.tokens import TokenStore
    from olav.admin import engine

    stub = None if real else Engine([ANSWER], word_delay=0.005)
    found = engine.start(home, port=PORT) if real else None
    url_of, model = (found.url, engine.MODEL) if found else (stub.url, "engine")  # type: ignore[union-attr]
    out: dict[str, list[tuple[float | None, int, int]]] = {"v1": [], "protocol": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            more = "  num_ctx: 8192\n  num_predict: 512\nruntime:\n  nudge: false\n"
            ws = workspace(Path(tmp) / "ws", url_of, model, more)
            _, token = TokenStore.for_workspace(ws).create("bench")
            proc, url = _start(ws.root)
            headers = {"Authorization": f"Bearer {token}"}
            try:
                with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
                    _v1(client, time.perf_counter())  # warm: the session and the engine
                    for _ in range(rounds):
                        out["v1"].append(_v1(client, time.perf_counter()))
                        out["protocol"].append(_protocol(client, time.perf_counter()))
            finally:
                proc.terminate()
                proc.communicate(timeout=30)
    finally:
        if found is not None and found.started:
            engine.stop(home)
        if stub is not None:
            stub.close()

    def summary(rows: list[tuple[float | None, int, int]]) -> dict[str, Any]:
        firsts = [r[0] * 1000 for r in rows if r[0] is not None]
        return {
            "first_delta_p50_ms": round(statistics.median(firsts), 1) if firsts else None,
            "deltas_p50": statistics.median(r[1] for r in rows),
            "chars_p50": statistics.median(r[2] for r in rows),
            "rows": [[round((r[0] or 0) * 1000, 1), r[1], r[2]] for r in rows],
        }

    v1, ap = summary(out["v1"]), summary(out["protocol"])
    gap = None
    if v1["first_delta_p50_ms"] is not None and ap["first_delta_p50_ms"] is not None:
        gap = round(v1["first_delta_p50_ms"] - ap["first_delta_p50_ms"], 1)
    engine_name = "llama.cpp + SmolLM2-135M" if real else "streaming stub, 5 ms a word"
    return {
        "engine": engine_name,
        "v1": v1,
        "agent_protocol": ap,
        "v1_minus_protocol_first_delta_ms": gap,
    }
