"""The OpenAI-compatible provider end to end: the real langchain-openai client and `olav ask`
against a stub that speaks the chat-completions protocol (llama.cpp, vLLM, LM Studio)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from olav.core.config import Workspace
from olav.core.errors import ModelError
from olav.llm.models import make_chat_model, translate_model_error
from tests.helpers import OPENAI_MODEL, olav_entry, olav_here, openai_workspace
from tests.stubs.openai_stub import OpenAIStubState, openai_stub, stub_tokens

MODEL = OPENAI_MODEL
EXPORT_TURNS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "format_and_export",
                "args": {
                    "data": "hostname,site\nsh1-border01,sh1\n",
                    "format": "csv",
                    "filename": "border",
                },
            }
        ]
    },
    {"content": "Saved exports/border.csv"},
]


def audit_rows(ws: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    con = duckdb.connect(str(ws / ".olav/databases/audit.duckdb"), read_only=True)
    try:
        runs = con.execute("SELECT id, status, model, error FROM runs").fetchall()
        tools = con.execute("SELECT run_id, tool, status FROM tool_calls").fetchall()
    finally:
        con.close()
    return runs, tools


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def chat_requests(state: OpenAIStubState) -> list[dict[str, Any]]:
    return [body for path, body in state.requests if path == "/v1/chat/completions"]


@pytest.mark.slow
def test_olav_ask_streams_an_answer(tmp_path: Path) -> None:
    state = OpenAIStubState(chat_script=[{"content": "There are 4 border routers."}])
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        res = olav_here(ws, "ask", "how many border routers are there?", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["answer"].strip() == "There are 4 border routers."
    assert out["status"] == "completed"
    (chat,) = chat_requests(state)
    assert chat["model"] == MODEL and chat["stream"] is True
    assert chat["max_completion_tokens"] == 4096
    assert chat["max_tokens"] == 4096  # the name older OpenAI-compatible servers honour
    assert chat["stream_options"] == {"include_usage": True}  # usage asked for in the stream
    assert (out["rescue"]["tokens_in"], out["rescue"]["tokens_out"]) == (10, 5)
    assert out["rescue"]["tokens_estimated"] is False


@pytest.mark.slow
def test_a_server_that_sends_no_usage_gets_an_estimate_said_to_be_one(tmp_path: Path) -> None:
    answer = "There are 4 border routers in the inventory, two per site."
    state = OpenAIStubState(chat_script=[{"content": answer}], no_stream_usage=True)
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        res = olav_here(ws, "ask", "how many border routers are there?", "--json")
    rescue = json.loads(res.stdout)["rescue"]
    assert rescue["tokens_estimated"] is True  # never a silent 0
    assert rescue["tokens_in"] > 50 and 5 <= rescue["tokens_out"] <= 40  # the prompt is long
    assert any(path == "/v1/embeddings" for path, _ in state.requests)
    runs, tools = audit_rows(ws)
    assert [(r[1], r[2]) for r in runs] == [("completed", MODEL)] and tools == []


@pytest.mark.slow
@pytest.mark.parametrize("route", ["extras", "llama-server"])
def test_a_server_that_sends_no_usage_but_tokenizes_is_counted_by_its_tokenizer(
    tmp_path: Path, route: str
) -> None:
    answer = "There are 4 border routers in the inventory, two per site."
    state = OpenAIStubState(chat_script=[{"content": answer}], no_stream_usage=True)
    state.tokenize = route  # llama-cpp-python's /extras/tokenize/count, llama-server's /tokenize
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        res = olav_here(ws, "ask", "how many border routers are there?", "--json")
    rescue = json.loads(res.stdout)["rescue"]
    assert rescue["counted_by"] == "tokenizer" and rescue["tokens_estimated"] is False
    assert rescue["tokens_out"] == stub_tokens(answer)  # the engine's count, not a guess
    (chat,) = chat_requests(state)
    sent = "\n".join(str(m.get("content") or "") for m in chat["messages"])
    assert rescue["tokens_in"] == stub_tokens(sent)  # the prompt's text, as the engine splits it
    counted = [p for p, _ in state.requests if p in ("/extras/tokenize/count", "/tokenize")]
    used = "/tokenize" if route == "llama-server" else "/extras/tokenize/count"
    assert counted.count(used) == 2  # the prompt and the answer
    assert len(counted) <= 3  # the other route tried once at most, and only on the first count
    (run,) = json.loads(olav_here(ws, "log", "list", "--json").stdout)
    shown = olav_here(ws, "log", "show", run["id"]).stdout
    assert "(the engine's tokenizer)" in shown


@pytest.mark.slow
def test_a_prompt_longer_than_the_servers_window_names_the_window_and_the_fix(
    tmp_path: Path,
) -> None:
    # llama-cpp-python's server: an empty 200 stream; the same request unstreamed says why
    state = OpenAIStubState(window=400)
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        res = olav_entry(ws, "ask", "summarise this: " + "interface down " * 300)
    assert res.returncode == 1
    line = one_line(res.stderr)
    assert "is longer than the model's window" in line
    assert "(400 tokens, as the server says)" in line
    assert "--n_ctx" in line and "llm.num_ctx" in line
    assert "Traceback" not in res.stderr and "No generations" not in res.stderr
    streamed = [c for c in chat_requests(state) if c.get("stream")]
    assert streamed and any(not c.get("stream") for c in chat_requests(state))
    runs, _ = audit_rows(ws)
    assert [r[1] for r in runs] == ["error"]


@pytest.mark.slow
def test_a_stream_that_brings_nothing_is_answered_unstreamed(tmp_path: Path) -> None:
    state = OpenAIStubState(chat_script=[{"content": ""}, {"content": "the answer, unstreamed"}])
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        state.empty_stream = True  # a 200 stream with no chunk at all (a broken proxy)
        res = olav_here(ws, "ask", "hello", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "the answer, unstreamed"


@pytest.mark.slow
def test_a_streamed_tool_call_exports_a_file_and_is_audited(tmp_path: Path) -> None:
    state = OpenAIStubState()
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [dict(t) for t in EXPORT_TURNS]
        res = olav_here(ws, "ask", "save the border routers as csv", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["answer"].strip() == "Saved exports/border.csv"
    assert out["outcome"] == "completed"
    # the arguments arrived as two fragments of a JSON string and were reassembled
    assert (ws / "exports" / "border.csv").read_text() == "hostname,site\nsh1-border01,sh1\n"
    first, second = chat_requests(state)
    assert any(t["function"]["name"] == "format_and_export" for t in first["tools"])
    user = [m for m in first["messages"] if m["role"] == "user"][-1]["content"]
    assert user.startswith("<relevant-memories>")
    answer_to_tool = second["messages"][-1]
    assert answer_to_tool["role"] == "tool"
    assert answer_to_tool["tool_call_id"] == "call_0_format_and_export"
    runs, calls = audit_rows(ws)
    assert [(r[1], r[2]) for r in runs] == [("completed", MODEL)]
    assert calls == [(runs[0][0], "format_and_export", "success")]


@pytest.mark.slow
def test_connection_lost_mid_stream_is_one_line_and_audited(tmp_path: Path) -> None:
    state = OpenAIStubState(chat_script=[{"content": "a long answer that never ends"}])
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        state.drop_chat = True
        res = olav_entry(ws, "ask", "hello")
    assert res.returncode == 1
    line = one_line(res.stderr)
    assert f"the connection to {url} broke off mid-response" in line
    assert "still running" in line
    runs, _ = audit_rows(ws)
    assert [r[1] for r in runs] == ["error"]
    assert "Connection error" in str(runs[0][3])


@pytest.mark.slow
def test_a_model_the_server_lacks_names_the_url_and_the_fix(tmp_path: Path) -> None:
    state = OpenAIStubState(models=["llama-3.2-3b"])
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        res = olav_entry(ws, "ask", "hello")
    assert res.returncode == 1
    line = one_line(res.stderr)
    assert f"the server at {url} has no model '{MODEL}' (404)" in line
    assert f"`curl {url}/models`" in line and "llm.model" in line
    assert chat_requests(state)  # the request did reach the server


@pytest.mark.slow
def test_a_server_that_is_down_names_the_url_and_how_to_start_one(tmp_path: Path) -> None:
    with openai_stub() as (url, _):
        pass  # the stub has stopped: nothing listens on its port any more
    ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
    res = olav_entry(ws, "ask", "hello")
    assert res.returncode == 1
    line = one_line(res.stderr)
    assert f"cannot reach the model server at {url}" in line
    assert "llama-server" in line and "vllm serve" in line and "llm.base_url" in line
    runs, _ = audit_rows(ws)
    assert [r[1] for r in runs] == ["error"]


def test_the_factory_model_answers_without_streaming(tmp_path: Path) -> None:
    """Learning jobs call ``invoke``: one JSON reply, tool arguments parsed from a string."""
    state = OpenAIStubState(chat_script=[dict(t) for t in EXPORT_TURNS])
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        model = make_chat_model(Workspace.open(ws).config)
        reply = model.invoke("save the border routers as csv")
    assert reply.tool_calls == [
        {
            "name": "format_and_export",
            "args": EXPORT_TURNS[0]["tool_calls"][0]["args"],
            "id": "call_0_format_and_export",
            "type": "tool_call",
        }
    ]
    (chat,) = chat_requests(state)
    assert not chat.get("stream")


def test_a_refused_key_names_the_variable_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    with openai_stub(OpenAIStubState(api_key="right")) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url, embedder="hash")
        config = Workspace.open(ws).config
        with pytest.raises(Exception) as caught:
            make_chat_model(config).invoke("hello")
        monkeypatch.setenv("OPENAI_API_KEY", "right")
        assert make_chat_model(config).invoke("hello").content == "ok"
    err = translate_model_error(caught.value, config, MODEL)
    assert isinstance(err, ModelError)
    assert f"the server at {url} refused the API key (401)" in err.one_line()
    assert "OPENAI_API_KEY" in err.one_line()


def test_workspace_chat_model_reads_the_workspace_from_any_directory(
    hash_ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from olav.llm.models import ScriptedChatModel, workspace_chat_model
    from tests.helpers import scripted_ws

    ws = scripted_ws(hash_ws, [{"content": "from the script"}])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # llm.script is relative to the workspace, not to the cwd
    model = workspace_chat_model(ws)
    assert isinstance(model, ScriptedChatModel)
    assert model.invoke("hello").content == "from the script"


@pytest.mark.slow
def test_an_answer_cut_short_of_num_predict_blames_the_servers_window(tmp_path: Path) -> None:
    # llama.cpp ends an answer that fills its window with finish_reason length, as it ends
    # one that reaches max_tokens: 5 tokens of 4096 is the window, and the fix is the server's
    state = OpenAIStubState(chat_script=[{"content": "The border", "finish_reason": "length"}])
    with openai_stub(state) as (url, _):
        ws = openai_workspace(tmp_path / "ws", url)
        res = olav_here(ws, "ask", "describe the border routers", "--json")
    out = json.loads(res.stdout)
    told = res.stderr + json.dumps(out.get("warnings", []))
    assert "cut off after 5 tokens, short of llm.num_predict (4096)" in told
    assert "the server's window was full" in told and "--n_ctx" in told


def test_a_thinking_switch_keeps_the_token_cap_the_engine_honours(tmp_path: Path) -> None:
    """/think and /no_think go out in extra_body; a call's extra_body replaces the model's, so
    it must keep the model's max_tokens (llama-cpp-python honours only that name)."""
    from olav.compose import agent_session

    with openai_stub(OpenAIStubState(chat_script=[{"content": "ok"}])) as (url, state):
        ws = Workspace.open(openai_workspace(tmp_path / "ws", url, embedder="hash"))
        session = agent_session(ws, agent="core", learn_from_failures=False)
        session.run.thinking = False
        session.ask("hello")
        session.wait_background()
    (chat,) = chat_requests(state)
    assert chat["chat_template_kwargs"] == {"enable_thinking": False}
    assert chat["max_tokens"] == 4096 and chat["max_completion_tokens"] == 4096
