"""A model message that stopped on the token limit runs nothing.

Through the real Ollama and OpenAI clients against local stubs: a call the model was cut off
in (written as text, or structured with ``finish_reason: length``) is never completed or run;
the model is asked once to send it again, and when that is cut too the person is told the
limit and how to raise it. Every cut is audited."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import audit_events, olav_here, ollama_workspace, openai_workspace
from tests.stubs.ollama_stub import StubState, ollama_stub
from tests.stubs.openai_stub import OpenAIStubState, openai_stub

DOC = "# Devices\n\n- sh1-border01\n"
ARGS = {"data": DOC, "format": "md", "filename": "devices.md"}
WHOLE = "<tool_call>\n" + json.dumps({"name": "format_and_export", "arguments": ARGS})
CUT = WHOLE[: WHOLE.index("sh1-border01") + 3]  # "…- sh1": the model stopped there
REQUEST = "save the device list as a markdown file"


def ask(ws: Path) -> dict:  # type: ignore[type-arg]
    res = olav_here(ws, "ask", REQUEST, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_a_call_cut_at_the_limit_is_asked_again_and_only_the_whole_one_runs(
    tmp_path: Path,
) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": CUT, "done_reason": "length"},
            {"content": WHOLE + "\n</tool_call>"},
            {"content": "Saved exports/devices.md"},
        ]
        out = ask(ws)
    assert (ws / "exports" / "devices.md").read_text() == DOC  # the whole text, not "- sh1"
    assert out["answer"] == "Saved exports/devices.md"
    assert out["rescue"]["cut_short"] == 1
    [cut] = audit_events(ws, "cut_short")
    assert cut["calls"] == ["format_and_export"] and cut["retried"] is True
    # the model was told why, and never saw its cut call as one that ran
    second = [b for p, b in state.requests if p == "/api/chat"][1]["messages"]
    assert "cut off at the token limit" in second[-1]["content"]
    assert not any(m.get("tool_calls") for m in second)


def test_cut_twice_nothing_runs_and_the_person_is_told_the_limit(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": "Exporting.\n" + CUT, "done_reason": "length"},
            {"content": CUT, "done_reason": "length"},
        ]
        res = olav_here(ws, "ask", REQUEST, "--json")
    out = json.loads(res.stdout)
    assert not (ws / "exports" / "devices.md").exists()
    assert out["rescue"]["cut_short"] == 2
    assert out["answer"] == (
        "(The answer was cut off at the model's token limit: format_and_export did not run.)"
    )
    warned = res.stderr + json.dumps(out.get("warnings", []))
    assert "llm.num_predict" in warned and "format_and_export did not run" in warned
    assert [e["retried"] for e in audit_events(ws, "cut_short")] == [True, False]


def test_structured_calls_with_finish_reason_length_do_not_run(tmp_path: Path) -> None:
    """An OpenAI-compatible server may close the cut call itself and send it with
    ``finish_reason: length``: olav does not run it."""
    state = OpenAIStubState()
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        state.chat_script[:] = [
            {
                "content": "",
                "tool_calls": [{"name": "format_and_export", "args": {**ARGS, "data": "# Dev"}}],
                "finish_reason": "length",
            },
            {"content": "", "tool_calls": [{"name": "format_and_export", "args": ARGS}]},
            {"content": "Saved exports/devices.md"},
        ]
        out = ask(ws)
    assert (ws / "exports" / "devices.md").read_text() == DOC
    assert out["rescue"]["cut_short"] == 1
    chats = [b for p, b in state.requests if p == "/v1/chat/completions"]
    second, third = chats[1]["messages"], chats[2]["messages"]
    assert not any(m["role"] == "tool" for m in second)  # the cut call never ran
    assert [m["role"] for m in third].count("tool") == 1  # the whole one did, once


def test_a_long_answer_cut_at_the_limit_is_kept_and_the_person_told(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {"content": "The border routers peer with", "done_reason": "length"}
        ]
        res = olav_here(ws, "ask", "describe the border routers", "--json")
    out = json.loads(res.stdout)
    assert out["answer"] == "The border routers peer with"
    assert len([b for p, b in state.requests if p == "/api/chat"]) == 1  # not asked again
    assert "cut off at its token limit" in res.stderr + json.dumps(out.get("warnings", []))


def test_a_cut_answer_streamed_in_the_chat_is_printed_once_with_the_warning_after(
    tmp_path: Path,
) -> None:
    """The warning ends the streamed line; the turn's end must not take that for "nothing
    streamed" and print the whole answer a second time."""
    import pexpect

    from tests.helpers import spawn_olav

    answer = " ".join(f"border-router-{i:02d} peers with its upstream" for i in range(12))
    answer += " over eBGP sessions"
    state = StubState(word_delay=0.02)  # it streams: the answer is on the screen before the cut
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url, "runtime:\n  nudge: false\n")
        state.chat_script[:] = [{"content": answer, "done_reason": "length"}]
        chat = spawn_olav(ws, "chat")
        try:
            chat.expect("core> ")
            chat.sendline("describe the border routers")
            chat.expect("tokens in")
            screen = chat.before
            chat.expect("core> ")
            chat.sendline("/exit")
            chat.expect(pexpect.EOF)
        finally:
            chat.close(force=True)
    assert screen.count("eBGP sessions") == 1, screen
    assert screen.index("eBGP sessions") < screen.index("cut off at its token limit")
