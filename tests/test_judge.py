"""The chat model as judge of close calls: one short call, a JSON verdict read leniently (a
thinking model's reasoning ignored), and no verdict at all, never an error, when the model is
down, slow or says something else. Through the real Ollama client against the stub too."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from olav.core.config import Config
from olav.llm.models import ScriptedChatModel, verdict_model
from olav.memory.recall.judge import Judge, parse_verdict, prompt

NOTES = [
    "Rotate nginx logs daily with logrotate and keep 14 of them.",
    "Kafka consumer lag over 10k pages the on-call engineer.",
]
REQUEST = "set up log rotation for nginx on web01"


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ('{"apply": [1]}', [True, False]),
        ('<think>the first is about nginx logs</think>\n{"apply": [1, 2]}', [True, True]),
        ('the template opened it… </think> {"apply": []}', [False, False]),
        ('Sure! ```json\n{"apply": [2]}\n```', [False, True]),
        ('{"note": 1} then {"apply": [1]}', [True, False]),
    ],
)
def test_a_verdict_is_read_from_what_models_write(answer: str, want: list[bool]) -> None:
    assert parse_verdict(answer, 2) == want


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("Note 1 applies.", "no {"),
        ('{"apply": [3]}', "names 3"),
        ('{"apply": "1"}', "not a list"),
        ('{"apply": [true]}', "names True"),
        ('<think>{"apply": [1]}</think> none of them', "no {"),
    ],
)
def test_anything_else_is_no_verdict_and_says_why(answer: str, why: str) -> None:
    got = parse_verdict(answer, 2)
    assert isinstance(got, str) and why in got


def test_the_judge_asks_once_with_every_note_numbered() -> None:
    model = ScriptedChatModel(turns=[{"content": '{"apply": [1]}'}])
    verdict = Judge(model).decide(REQUEST, NOTES)
    assert verdict.applies == [True, False] and verdict.failure == ""
    assert len(model.calls) == 1
    sent = model.calls[0][-1].content
    assert sent == prompt(REQUEST, NOTES)
    assert "[1] Rotate nginx logs" in sent and "[2] Kafka consumer lag" in sent


def test_a_model_that_fails_or_rambles_gives_no_verdict() -> None:
    failing = Judge(ScriptedChatModel(turns=[{"error": "model not found"}])).decide(REQUEST, NOTES)
    assert failing.applies is None and failing.failure.startswith("down:")
    rambling = Judge(ScriptedChatModel(turns=[{"content": "Both look fine."}]))
    verdict = rambling.decide(REQUEST, NOTES)
    assert verdict.applies is None and verdict.failure.startswith("malformed:")
    assert verdict.answer == "Both look fine."
    assert Judge(rambling.model).decide(REQUEST, []).applies == []  # nothing to ask


def _ollama_config(tmp_path: Path, url: str, timeout_ms: int = 5000) -> Config:
    cfg = tmp_path / "olav.yaml"
    cfg.write_text(
        f"llm:\n  provider: ollama\n  base_url: {url}\n  model: qwen3:8b\n"
        f"memory:\n  judge: model\n  judge_timeout_ms: {timeout_ms}\n"
    )
    return Config.load(cfg)


def _judge(cfg: Config) -> Judge | None:
    return Judge.from_config(cfg, verdict_model(cfg))


def test_through_the_real_ollama_client_thinking_off_and_a_deadline(tmp_path: Path) -> None:
    from tests.stubs.ollama_stub import StubState, ollama_stub

    release = threading.Event()

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if "slow" in json.dumps(body):
            release.wait(30)
        return {"content": '{"apply": [1]}'}

    state = StubState(chat_reply=reply)
    try:
        with ollama_stub(state) as (url, _):
            judge = _judge(_ollama_config(tmp_path, url))
            assert judge is not None
            verdict = judge.decide(REQUEST, NOTES)
            assert verdict.applies == [True, False], verdict
            body = next(b for p, b in state.requests if p == "/api/chat")
            assert body.get("think") is False  # a verdict needs no reasoning
            assert body["options"]["num_predict"] == 64
            slow = _judge(_ollama_config(tmp_path, url, timeout_ms=200))
            assert slow is not None
            late = slow.decide("slow " + REQUEST, NOTES)
            assert late.applies is None and late.failure == "slow: no verdict within 200 ms"
    finally:
        release.set()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = _judge(_ollama_config(tmp_path, f"http://127.0.0.1:{port}"))
    assert gone is not None
    down = gone.decide(REQUEST, NOTES)
    assert down.applies is None and down.failure.startswith("down:")
    assert _judge(Config.load(None)) is None  # off by default
