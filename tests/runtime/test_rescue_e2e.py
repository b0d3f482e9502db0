"""The rescue layer end to end: tool calls written as text run through the real Ollama and
OpenAI clients against local stub servers; negatives run nothing; a narration is nudged once;
reasoning reaches neither the answer nor memory. And the shipped corpus meets its targets."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from olav.bench.toolcalls import load_cases, run_toolcalls, shipped_corpus
from olav.core.config import Workspace
from olav.llm.window import model_window
from tests.helpers import (
    OlavCli,
    OlavMain,
    audit_events,
    olav_here,
    ollama_workspace,
    openai_workspace,
    write_config,
)
from tests.stubs.ollama_stub import StubState, ollama_stub
from tests.stubs.openai_stub import OpenAIStubState, openai_stub

DOC = "# Devices\n\n- sh1-border01\n"
ARGS = {"data": DOC, "format": "md", "filename": "devices.md"}
TEXT_CALLS = {
    "hermes": "I will export it now.\n<tool_call>\n"
    + json.dumps({"name": "format_and_export", "arguments": ARGS})
    + "\n</tool_call>",
    "qwen3_xml": "<function=format_and_export>\n<parameter=data>\n"
    + DOC
    + "\n</parameter>\n<parameter=format>\nmd\n</parameter>\n<parameter=filename>\ndevices.md\n"
    "</parameter>\n</function>\n</tool_call>",
    "json": json.dumps({"name": "format_and_export", "parameters": ARGS}),
    "json_fenced": "```json\n"
    + json.dumps({"name": "format_and_export", "arguments": ARGS})
    + "\n```",
    "pythonic": f"[format_and_export(data={DOC!r}, format='md', filename='devices.md')]",
    "mistral": "[TOOL_CALLS]" + json.dumps([{"name": "format_and_export", "arguments": ARGS}]),
}
REQUEST = "save the device list as a markdown file"


def ask(ws: Path) -> dict:  # type: ignore[type-arg]
    """`olav ask` in this process: the real command and the real model client over HTTP to
    the stub, without a fresh interpreter's 3-5 s of imports a run (the tests of what a
    person sees on failure still run `olav` as a process)."""
    res = olav_here(ws, "ask", REQUEST, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_shipped_corpus_meets_the_targets() -> None:
    cases = load_cases(shipped_corpus())
    report = run_toolcalls(cases, repeat=1)
    assert report["by_kind"]["call"] >= 120 and report["by_kind"]["negative"] >= 30
    call_families = [f for f, v in report["families"].items() if v["calls"]]
    assert len(call_families) >= 12
    assert all(c.source for c in cases)  # every case cites its public source
    total = report["total"]
    assert total["exact"] / total["calls"] >= 0.97
    assert total["executions"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(TEXT_CALLS))
def test_a_call_written_as_text_runs_the_real_tool(tmp_path: Path, family: str) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": "<think>They want a file.</think>" + TEXT_CALLS[family]},
            {"content": "Saved exports/devices.md"},
        ]
        out = ask(ws)
    assert (ws / "exports" / "devices.md").read_text() == DOC
    assert out["answer"] == "Saved exports/devices.md" and out["outcome"] == "completed"
    assert [s["family"] for s in out["rescue"]["salvaged"]] == [family]
    assert [e["tool"] for e in audit_events(ws, "salvaged")] == ["format_and_export"]
    # the model's next step saw a normal tool call and its result, never the raw text
    second = [body for path, body in state.requests if path == "/api/chat"][1]["messages"]
    call_msg = next(m for m in second if m["role"] == "assistant")
    assert call_msg["tool_calls"][0]["function"]["name"] == "format_and_export"
    shown = call_msg.get("content", "")
    assert "<tool_call>" not in shown and "<think>" not in shown


@pytest.mark.slow
def test_an_example_the_person_asked_for_runs_nothing(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        shown = (
            "Here is an example call:\n```json\n"
            + json.dumps({"name": "format_and_export", "arguments": ARGS})
            + "\n```"
        )
        state.chat_script[:] = [{"content": shown}]
        res = olav_here(ws, "ask", "show me an example of a format_and_export call", "--json")
    out = json.loads(res.stdout)
    assert out["answer"] == shown and out["rescue"]["salvaged"] == []
    assert not (ws / "exports" / "devices.md").exists()


@pytest.mark.slow
def test_a_narration_is_nudged_once_and_completes(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": "I will now save the device list as markdown."},
            {"tool_calls": [{"name": "format_and_export", "args": ARGS}]},
            {"content": "Saved exports/devices.md"},
        ]
        out = ask(ws)
        chats = [body for path, body in state.requests if path == "/api/chat"]
    assert (ws / "exports" / "devices.md").read_text() == DOC
    assert out["outcome"] == "completed" and out["rescue"]["nudged"] is True
    nudge = chats[1]["messages"][-1]
    assert nudge["role"] == "user" and nudge["content"].startswith("[olav] You described")
    # the nudge was for that call only: the next call's history has no trace of it
    assert all("[olav] You described" not in m.get("content", "") for m in chats[2]["messages"])
    assert [e.get("recovered") for e in audit_events(ws, "nudge")] == [None, True]


@pytest.mark.slow
def test_reasoning_reaches_neither_the_answer_nor_memory_and_is_audited(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": "<think>routing via SP-7</think>BGP is a protocol."}]
        res = olav_here(ws, "ask", "what is BGP", "--json")
        out = json.loads(res.stdout)
        dump = olav_here(ws, "kb", "export", "-")
    assert out["answer"] == "BGP is a protocol."
    assert "SP-7" not in dump.stdout
    db = ws / ".olav" / "databases" / "audit.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        rows = dict(con.execute("SELECT role, content FROM messages").fetchall())
    assert rows["reasoning"] == "routing via SP-7" and rows["assistant"] == "BGP is a protocol."


@pytest.mark.slow
@pytest.mark.parametrize("family", ["hermes", "qwen3_xml", "json_fenced", "pythonic"])
def test_a_call_written_as_text_runs_through_the_openai_client(tmp_path: Path, family: str) -> None:
    """llama.cpp, vLLM and LM Studio leave the same text in ``content`` when their parser
    misses a call: the real langchain-openai client streams it, and the tool still runs."""
    state = OpenAIStubState()
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        state.chat_script[:] = [
            {"content": "<think>a file</think>" + TEXT_CALLS[family]},
            {"content": "Saved exports/devices.md"},
        ]
        out = ask(ws)
    assert (ws / "exports" / "devices.md").read_text().strip() == DOC.strip()
    assert out["outcome"] == "completed"
    assert [s["family"] for s in out["rescue"]["salvaged"]] == [family]
    second = [b for p, b in state.requests if p == "/v1/chat/completions"][1]["messages"]
    call_msg = next(m for m in second if m["role"] == "assistant")
    assert call_msg["tool_calls"][0]["function"]["name"] == "format_and_export"
    assert json.loads(call_msg["tool_calls"][0]["function"]["arguments"])["format"] == "md"
    assert "<think>" not in (call_msg.get("content") or "")


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["y", "n"])
def test_a_dangerous_call_written_as_text_still_asks_y_n_in_the_chat(
    tmp_path: Path, answer: str, olav: OlavCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A salvaged call is never more privileged than a native one: take_snapshot waits for
    the person's y, and a no runs nothing. Both go through the chat in this process, its lines
    on stdin (the prompt at a terminal, a pty: tests/test_consent.py)."""
    state = StubState()
    call = {"name": "take_snapshot", "arguments": {"devices": ["sh1-border01"]}}
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": "<tool_call>" + json.dumps(call) + "</tool_call>"},
            {"content": "Done with the snapshot."},
        ]
        monkeypatch.chdir(ws)
        res = olav(
            "chat",
            "--agent",
            "netops",
            input=f"take a snapshot of sh1-border01\n{answer}\n/exit\n",
        )
        assert res.exit_code == 0, res.output
        transcript = res.output
        asked = transcript.index("take_snapshot needs your approval")
        assert asked < transcript.index("Allow? [y/N]") < transcript.index("Done with the")
    assert "<tool_call>" not in transcript  # the raw tags never reached the screen
    snaps = list((ws / "exports" / "snapshots").glob("*.json"))
    assert bool(snaps) is (answer == "y")
    kinds = [k for k in ("approval", "denial") if audit_events(ws, k)]
    assert kinds == (["approval"] if answer == "y" else ["denial"])
    assert [e["tool"] for e in audit_events(ws, "salvaged")] == ["take_snapshot"]


@pytest.mark.slow
def test_the_window_the_server_reports_is_the_one_olav_works_against(
    tmp_path: Path, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp started with ``-c 600`` cuts at 600 tokens whatever llm.num_ctx says: a
    prompt that will not fit is warned about once, before the call, and audited; a message
    that cannot fit by itself is not sent at all (``olav``'s entry point in this process: its
    exit status and what it prints on stderr)."""
    state = OpenAIStubState(n_ctx=600)
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        monkeypatch.chdir(ws)
        assert model_window(Workspace.open(ws).config).tokens == 600
        state.chat_script[:] = [{"content": "It is long."}]
        line = "interface Gi0/1 description uplink shutdown\n"
        # about 330 tokens: it fits, the system prompt and the memories with it do not
        res = olav_main("ask", "summarise this config:\n" + line * 30, "--json")
        assert res.returncode == 0, res.stderr
        assert "will not fit the model's window (600 tokens)" in res.stderr
        (full,) = audit_events(ws, "context_full")
        assert full["before"] is True and full["num_ctx"] == 600
        assert full["estimated_tokens"] > 600
        calls = len(state.requests)
        res = olav_main("ask", "summarise this config:\n" + line * 120)
        assert res.returncode == 1
        assert "more than the model's window of 600: it was not sent" in res.stderr
        assert len(state.requests) == calls  # nothing reached the server


def test_ollama_reports_the_trained_window_and_num_ctx_caps_it(tmp_path: Path) -> None:
    state = StubState(context_length=8192)
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        window = model_window(Workspace.open(ws).config)
    assert (window.tokens, window.reported, window.source) == (8192, 8192, "/api/show")
    (show,) = [body for path, body in state.requests if path == "/api/show"]
    assert show["model"] == "qwen3:8b"
    write_config(tmp_path / "down")  # llm.base_url is a port nobody listens on
    down = Workspace.open(tmp_path / "down").config
    assert model_window(down).tokens == 16384 and model_window(down).reported is None


@pytest.mark.slow
def test_olav_ask_stops_a_model_that_repeats_one_call(tmp_path: Path) -> None:
    """The same call with the same arguments, again and again: after runtime.loop_limit the
    model is told; when it repeats anyway the run ends tool_error, and the tool ran only
    loop_limit times."""
    state = StubState()
    query = {"name": "db_query", "args": {"sql": "SELECT count(*) FROM devices"}}
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"tool_calls": [query]}] * 8
        out = ask(ws)
        # the agent's calls (the run that went wrong is then learned from, without tools)
        chats = [body for path, body in state.requests if path == "/api/chat" and body.get("tools")]
    assert out["outcome"] == "tool_error"
    assert out["rescue"]["loop_stopped"] == "db_query"
    told = [m for m in chats[-1]["messages"] if m["role"] == "user"][-1]["content"]
    assert told.startswith("[olav] You have called db_query 3 times")
    db = ws / ".olav" / "databases" / "audit.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        (runs,) = con.execute("SELECT count(*) FROM tool_calls WHERE tool = 'db_query'").fetchone()
    assert runs == 3 and [e.get("stopped") for e in audit_events(ws, "loop_guard")] == [None, True]


@pytest.mark.slow
def test_olav_ask_caps_the_model_calls_of_a_run(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url, "runtime:\n  max_model_calls: 3\n")
        state.chat_script[:] = [
            {"tool_calls": [{"name": "db_query", "args": {"sql": f"SELECT {i}"}}]}
            for i in range(10)
        ]
        out = ask(ws)
        calls = [body for path, body in state.requests if path == "/api/chat" and body.get("tools")]
    assert len(calls) == 3
    assert out["answer"] == "Stopped: this run reached runtime.max_model_calls (3)."
    assert [e["reason"] for e in audit_events(ws, "loop_guard")] == ["max_model_calls"]
