"""The constrained re-ask end to end: a finished message whose call olav cannot read safely
(never closed, or arguments the schema refuses) is asked for once more through the real
Ollama and OpenAI clients, with no tools bound and the engine's constrained decoding held to
that tool's call schema; the valid call runs, the re-ask is audited, nothing is guessed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olav.runtime.rescue import reask
from tests.helpers import audit_events, olav_here, ollama_workspace, openai_workspace
from tests.stubs.ollama_stub import StubState, ollama_stub
from tests.stubs.openai_stub import OpenAIStubState, openai_stub

DOC = "# Devices\n\n- sh1-border01\n"
ARGS = {"data": DOC, "format": "md", "filename": "devices.md"}
REQUEST = "save the device list as a markdown file"
UNCLOSED = '<tool_call>\n{"name": "format_and_export", "arguments": {"data": "# Devices'
CALL = json.dumps({"name": "format_and_export", "arguments": ARGS})


def ask(ws: Path) -> dict:  # type: ignore[type-arg]
    res = olav_here(ws, "ask", REQUEST, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "first",
    [UNCLOSED, '<tool_call>{"name": "format_and_export", "arguments": {"format": 7}}</tool_call>'],
    ids=["never closed", "arguments the schema refuses"],
)
def test_ollama_is_asked_again_under_format_and_the_call_runs(tmp_path: Path, first: str) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": first}, {"content": CALL}, {"content": "Saved."}]
        out = ask(ws)
    chats = [body for path, body in state.requests if path == "/api/chat"]
    assert (ws / "exports" / "devices.md").read_text() == DOC
    assert out["outcome"] == "completed" and out["answer"] == "Saved."
    again = chats[1]
    held = again["format"]["properties"]
    assert held["name"]["enum"] == ["format_and_export"]  # the tool the message tried to call
    offered = _schema(chats[0])  # the arguments are held to the tool's own schema
    assert set(held["arguments"]["properties"]) == set(offered["properties"])
    assert held["arguments"]["required"] == offered["required"]
    assert not again.get("tools")  # the answer is held to the call's JSON, not a tool list
    assert again["messages"][-1]["content"].startswith("[olav] Your last message held")
    (done,) = out["rescue"]["reasked"]
    assert done["valid"] is True and done["constrained"] == "ollama format"
    assert done["ms"] >= 0 and done["tools"] == ["format_and_export"]
    assert [e["valid"] for e in audit_events(ws, "reask")] == [True]


def test_an_answer_that_fails_again_runs_nothing_and_is_asked_once(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": UNCLOSED}, {"content": '{"name": "format_and_e'}]
        out = ask(ws)
    chats = [body for path, body in state.requests if path == "/api/chat"]
    assert len([c for c in chats if _reasked(c)]) == 1  # asked once, not again
    assert not (ws / "exports" / "devices.md").exists()
    (done,) = out["rescue"]["reasked"]
    assert done["valid"] is False and done["problem"]
    assert [e["valid"] for e in audit_events(ws, "reask")] == [False]


def test_a_server_that_refuses_json_schema_gets_json_object_with_the_schema(
    tmp_path: Path,
) -> None:
    state = OpenAIStubState(refuse_json_schema=True)
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": UNCLOSED}, {"content": CALL}, {"content": "Saved."}]
        out = ask(ws)
    chats = [body for path, body in state.requests if path == "/v1/chat/completions"]
    formats = [(c.get("response_format") or {}).get("type") for c in chats]
    assert formats[0] is None and "json_schema" in formats
    held = next(c for c in chats if (c.get("response_format") or {}).get("type") == "json_object")
    assert held["response_format"]["schema"]["properties"]["name"]["enum"] == ["format_and_export"]
    assert (ws / "exports" / "devices.md").read_text() == DOC
    (done,) = out["rescue"]["reasked"]
    assert done["valid"] is True and done["constrained"] == "json_object"


def test_an_engine_that_fails_the_reask_leaves_the_run_going(tmp_path: Path) -> None:
    state = OpenAIStubState(refuse_formats=True)
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": UNCLOSED}]
        out = ask(ws)
    assert out["status"] == "completed" and not (ws / "exports" / "devices.md").exists()
    (done,) = out["rescue"]["reasked"]
    assert done["valid"] is False and done["problem"].startswith("the engine failed")


def test_runtime_reask_off_leaves_the_cut_call_unrun(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url, "runtime:\n  reask: false\n")
        state.chat_script[:] = [{"content": UNCLOSED}]
        out = ask(ws)
    chats = [body for path, body in state.requests if path == "/api/chat"]
    assert len([c for c in chats if c.get("tools")]) == 1
    assert not any(_reasked(c) for c in chats)
    assert out["rescue"]["reasked"] == [] and not (ws / "exports" / "devices.md").exists()


def test_the_reply_is_checked_against_the_schema() -> None:
    tools = {"get": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    assert reask.read_reply('{"name": "get", "arguments": {"n": "3"}}', tools) == ("get", {"n": 3})
    assert isinstance(reask.read_reply('{"name": "get", "arguments": {}}', tools), str)
    assert isinstance(reask.read_reply('{"name": "rm", "arguments": {}}', tools), str)
    assert isinstance(reask.read_reply("not json", tools), str)
    both = reask.call_schema({**tools, "put": {"type": "object"}})
    assert [o["properties"]["name"]["enum"] for o in both["anyOf"]] == [["get"], ["put"]]


def _schema(chat: dict) -> dict:  # type: ignore[type-arg]
    (tool,) = [t for t in chat["tools"] if t["function"]["name"] == "format_and_export"]
    return tool["function"]["parameters"]  # type: ignore[no-any-return]


def _reasked(chat: dict) -> bool:  # type: ignore[type-arg]
    return any(
        str(m.get("content", "")).startswith("[olav] Your last message held a tool call")
        for m in chat["messages"]
    )
