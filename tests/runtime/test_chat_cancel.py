"""Ctrl-C in the terminal chat stops the run itself, not only its display: a slow model's
request is cut off (the server sees its client hang up long before the answer's end), the
prompt comes back, the thread keeps what the person saw marked as cancelled, and the next
question is a turn of its own. Through the real Ollama client, under a pty."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pexpect

from tests.helpers import olav_here, ollama_workspace, spawn_olav
from tests.stubs.ollama_stub import StubState, ollama_stub

WORDS = 80
# long words, so the stream guard's hold (a tool call written as text is held back) is passed
# after a few of them and the person sees the answer begin
ANSWER = " ".join(f"configuration-line-{i:03d}" for i in range(WORDS))


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """The answer to each request by what it asks (a cancelled run also starts trace learning
    in the background, whose own model call must not take the chat's answers)."""
    said = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if said.endswith("show me the running config"):
        return {"content": ANSWER}
    if said.endswith("and the second question?"):
        return {"content": "the second answer"}
    return {"content": "[]"}


def test_ctrl_c_cancels_the_model_request_and_keeps_what_was_seen(tmp_path: Path) -> None:
    state = StubState(word_delay=0.1, chat_reply=_reply)
    with ollama_stub(state) as (url, _):
        ws = ollama_workspace(tmp_path / "ws", url, "runtime:\n  nudge: false\n")
        chat = spawn_olav(ws, "chat")
        try:
            chat.expect("core> ")
            chat.sendline("show me the running config")
            chat.expect("configuration-line-010")  # the answer is on the screen, streaming
            chat.sendintr()
            chat.expect("cancelled")
            chat.expect("core> ")
            # the prompt is back while the model would still be talking: its request was cut
            assert state.words_sent < WORDS
            chat.sendline("and the second question?")
            chat.expect("the second answer")
            chat.expect("core> ")
            chat.sendline("/exit")
            chat.expect(pexpect.EOF)
        finally:
            chat.close(force=True)
        assert state.aborted >= 1 and state.words_sent < WORDS

    listed = json.loads(olav_here(ws, "threads", "list", "--json").stdout)
    shown = json.loads(olav_here(ws, "threads", "show", listed[0]["id"], "--json").stdout)
    turns = [(m["role"], m["content"]) for m in shown["turns"]]
    roles = [r for r, _ in turns]
    assert roles == ["user", "assistant", "user", "assistant"], turns
    kept = turns[1][1]
    assert kept.startswith("configuration-line-000") and "configuration-line-010" in kept
    assert kept.endswith("(cancelled by the user)")
    assert f"configuration-line-{WORDS - 1:03d}" not in kept  # never the answer nobody saw
    assert turns[2] == ("user", "and the second question?")
    assert turns[3] == ("assistant", "the second answer")

    runs = json.loads(olav_here(ws, "log", "list", "--json").stdout)
    outcomes = sorted(r.get("outcome") or r.get("status") for r in runs)
    assert "cancelled" in outcomes
    # a training export leaves the cancelled run out: nobody saw its answer
    dataset = tmp_path / "ft.jsonl"
    olav_here(ws, "log", "export", "-o", str(dataset))
    exported = dataset.read_text()
    assert "the second answer" in exported and "configuration-line-000" not in exported
