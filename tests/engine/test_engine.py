"""olav against a real engine and a real model: llama-cpp-python's server with SmolLM2-135M.
The model is too small to judge answers; what is judged is what olav does with a real
tokenizer, template, stream and constrained decoding."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.helpers import HASH_CONFIG, olav_entry, olav_here, workspace_from_template


def workspace(root: Path, url: str, extra: str = "") -> Path:
    llm = f"llm:\n  provider: openai\n  base_url: {url}\n  model: smollm2\n  temperature: 0\n"
    return workspace_from_template(root, "hash", HASH_CONFIG.split("llm:")[0] + llm + extra)


def ask(ws: Path, question: str) -> dict:  # type: ignore[type-arg]
    res = olav_here(ws, "ask", question, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_olav_ask_answers_from_the_real_engine(engine: str, tmp_path: Path) -> None:
    # one model call, so that the run's count is the answer's: the 135M model's greeting names
    # a tool often enough that the nudge would ask again, and the count then holds both calls
    ws = workspace(tmp_path / "ws", engine, "runtime:\n  nudge: false\n")
    out = ask(ws, "Say hello in one short sentence.")
    assert out["rescue"]["model_calls"] == 1, out["rescue"]
    assert out["status"] == "completed" and out["answer"].strip()
    rescue = out["rescue"]
    # llama-cpp-python's stream carries no usage even when asked: its tokenizer counts
    # (/extras/tokenize/count), never a silent 0 and not a guess
    assert rescue["counted_by"] == "tokenizer" and rescue["tokens_estimated"] is False
    said = httpx.post(
        engine.removesuffix("/v1") + "/extras/tokenize/count", json={"input": out["answer"]}
    ).json()["count"]
    assert abs(rescue["tokens_out"] - said) <= 2  # the answer as the engine splits it
    assert rescue["tokens_in"] > 200  # the system prompt, the tools' guides, the block


def test_a_prompt_longer_than_the_engines_window_is_one_line_naming_it(
    engine: str, tmp_path: Path
) -> None:
    ws = workspace(tmp_path / "ws", engine)
    res = olav_entry(ws, "ask", "Summarise: " + "the link flapped again " * 1200)
    assert res.returncode == 1
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "longer than the model's window" in lines[0]
    assert "(4096 tokens, as the server says)" in lines[0] and "--n_ctx" in lines[0]


def test_num_predict_caps_the_answer_on_an_engine_that_honours_only_max_tokens(
    engine: str, tmp_path: Path
) -> None:
    ws = workspace(tmp_path / "ws", engine, "  num_predict: 16\n")  # its least
    out = ask(ws, "Write a long story about a router that learns to sing.")
    assert out["rescue"]["cut_short"] >= 1  # finish_reason length: seen, nothing run
    assert len(out["answer"].split()) <= 24  # 16 tokens, not the hundreds it writes uncapped


def test_the_constrained_reask_gives_schema_valid_calls_from_the_real_model(engine: str) -> None:
    from benchmarks.reask import run_reask

    report = run_reask(engine, "smollm2", repeat=2)  # 8 re-asks, the product's own path
    assert report["constraints"] == ["json_object"]  # json_schema refused (a 500), remembered
    assert report["valid"] >= 6, report


@contextmanager
def recording(upstream: str) -> Iterator[tuple[str, list[dict]]]:  # type: ignore[type-arg]
    """A proxy in front of the engine that keeps every chat request's body: what olav sent,
    as the engine received it (streams are passed through as they come)."""
    bodies: list[dict] = []  # type: ignore[type-arg]
    root = upstream.removesuffix("/v1")

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            res = httpx.get(root + self.path, timeout=30)
            self._reply(res.status_code, res.headers.get("content-type", ""), [res.content])

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.endswith("/chat/completions"):
                bodies.append(json.loads(raw))
            with httpx.stream("POST", root + self.path, content=raw, timeout=300,
                              headers={"content-type": "application/json"}) as res:  # fmt: skip
                self._reply(res.status_code, res.headers.get("content-type", ""), res.iter_raw())

        def _reply(self, code: int, kind: str, parts: Iterable[bytes]) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in parts:
                if part:
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_recalls_block_reaches_the_engine_in_the_persons_turn_within_its_window(
    engine: str, tmp_path: Path
) -> None:
    question = "Which management subnet does the sh1 site use?"
    with recording(engine) as (url, bodies):
        ws = workspace(tmp_path / "ws", url, "  num_predict: 64\n")
        out = ask_agent(ws, question, "netops")
    assert out["status"] == "completed"
    first = bodies[0]
    user = [m for m in first["messages"] if m["role"] == "user"][-1]["content"]
    # the block the model reads: in the person's turn, before the request, holding the guide
    assert user.startswith("<relevant-memories>") and user.endswith(question)
    assert "10.10.0.0/24" in user.split("</relevant-memories>")[0]
    assert first["stream"] is True and first["max_tokens"] == 64
    # and the whole prompt, as the engine's tokenizer counts it, fits its 4096-token window:
    # nothing of it was cut before the model read it
    count = engine.removesuffix("/v1") + "/extras/tokenize/count"
    text = "\n".join(str(m.get("content") or "") for m in first["messages"])
    tools = json.dumps(first.get("tools") or [])
    size = sum(httpx.post(count, json={"input": t}).json()["count"] for t in (text, tools))
    assert size + 4 * len(first["messages"]) + 64 < 4096, size


def ask_agent(ws: Path, question: str, agent: str) -> dict:  # type: ignore[type-arg]
    res = olav_here(ws, "ask", question, "--agent", agent, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]
