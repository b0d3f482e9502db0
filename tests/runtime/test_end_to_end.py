"""The real Ollama client end to end, against a stub server that speaks Ollama's protocol."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pexpect
import pytest

from tests.helpers import OlavMain, olav_entry, ollama_workspace, spawn_olav
from tests.stubs.ollama_stub import StubState, ollama_stub


@pytest.mark.slow
def test_olav_ask_through_the_real_ollama_client(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [
            {
                "tool_calls": [
                    {
                        "name": "format_and_export",
                        "args": {
                            "data": "hostname,site\nsh1-border01,sh1\n",
                            "format": "csv",
                            "filename": '"border"',
                        },
                    }
                ]
            },
            {"content": "Saved exports/border.csv"},
        ]
        res = olav_entry(ws, "ask", "save the border routers as csv", "--json")
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["answer"] == "Saved exports/border.csv" and out["status"] == "completed"
        assert out["outcome"] == "completed"  # a tool was called: not narrated
        assert (ws / "exports" / "border.csv").read_text() == "hostname,site\nsh1-border01,sh1\n"
        chats = [body for path, body in state.requests if path == "/api/chat"]
        assert len(chats) == 2
        assert chats[0]["model"] == "qwen3:8b"
        assert chats[0]["options"]["num_ctx"] >= 8192
        assert any(t["function"]["name"] == "format_and_export" for t in chats[0]["tools"])
        user = [m for m in chats[0]["messages"] if m["role"] == "user"][-1]["content"]
        assert user.startswith("<relevant-memories>")
        assert chats[1]["messages"][-1]["role"] == "tool"
        assert any(path == "/api/embed" for path, _ in state.requests)
    con = duckdb.connect(str(ws / ".olav/databases/audit.duckdb"), read_only=True)
    runs = con.execute("SELECT id, status, model FROM runs").fetchall()
    tools = con.execute("SELECT run_id, tool, status FROM tool_calls").fetchall()
    con.close()
    assert [(r[1], r[2]) for r in runs] == [("completed", "qwen3:8b")]
    assert tools == [(runs[0][0], "format_and_export", "success")]


@pytest.mark.slow
def test_connection_lost_mid_run_is_an_audited_error(tmp_path: Path) -> None:
    state = StubState(drop_chat=True)
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        res = olav_entry(ws, "ask", "hello")
    assert res.returncode != 0
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    con = duckdb.connect(str(ws / ".olav/databases/audit.duckdb"), read_only=True)
    runs = con.execute("SELECT status, error FROM runs").fetchall()
    con.close()
    assert runs and runs[0][0] == "error"


def test_ask_without_a_server_prints_the_one_line_hint(hash_ws: Path) -> None:
    res = olav_entry(hash_ws, "ask", "hello")
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "ollama serve" in lines[0] and "llm.base_url" in lines[0]


def test_model_not_pulled_says_ollama_pull(tmp_path: Path) -> None:
    # the embedder the workspace was made with (bge-m3 of 32 dimensions), no chat model
    with ollama_stub(StubState(models={"bge-m3": 32})) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        res = olav_entry(ws, "ask", "hello")
    assert res.returncode == 1
    assert "ollama pull qwen3:8b" in res.stderr


def test_chat_without_a_server_shows_recall_preview_and_hint(hash_ws: Path) -> None:
    res = olav_entry(hash_ws)
    assert res.returncode == 0
    assert "Memory works without the model" in res.stdout
    assert "relevance is off for this embedder" in res.stdout  # no floors for a hash embedder
    assert "ollama serve" in res.stdout
    # and, for a machine with no model server at all, the one olav runs itself, said plainly
    said = " ".join(res.stdout.split())
    assert "`olav engine start`" in said and "not for work" in said


@pytest.mark.slow
def test_interactive_chat_under_a_pty(tmp_path: Path) -> None:
    state = StubState()
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url)
        state.chat_script[:] = [{"content": "There are 4 border routers."}]
        child = spawn_olav(ws)
        try:
            child.expect("/help for commands")
            child.expect("core> ")
            child.sendline("how many border routers are there?")
            child.expect("There are 4 border routers.")
            child.expect("core> ")
            child.sendline("/memory backup router configuration")
            child.expect("recall for 'backup router configuration'")
            child.expect("injected")
            child.expect("core> ")
            child.sendline("/exit")
            child.expect("bye")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    # the model was loaded while the prompt waited for the first request
    loads = [body for path, body in state.requests if path == "/api/generate"]
    assert loads and loads[0]["model"] == "qwen3:8b" and not loads[0].get("prompt")


def test_a_server_that_breaks_off_mid_answer_is_not_called_unreachable(
    tmp_path: Path, olav_main: OlavMain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer had begun when the connection was reset: the server broke off, which says
    what to do (retry, read its log), not "cannot reach ... start it"."""
    words = " ".join(f"word{i}" for i in range(40))
    state = StubState(word_delay=0.01, break_after=5, chat_reply=lambda body: {"content": words})
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url, "runtime:\n  nudge: false\n")
        monkeypatch.chdir(ws)
        res = olav_main("ask", "hello")
    assert res.returncode == 1
    line = res.stderr.strip()
    assert "broke off its answer" in line and "incomplete" in line
    assert "cannot reach" not in line and "ollama serve" not in line
