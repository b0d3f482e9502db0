"""olav against a real engine and a real model: llama-cpp-python's server with SmolLM2-135M.
The model is too small to judge answers; what is judged is what olav does with a real
tokenizer, template, stream and constrained decoding."""

from __future__ import annotations

import json
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
    out = ask(workspace(tmp_path / "ws", engine), "Say hello in one short sentence.")
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
