"""A memory is committed only after the person's own yes, which the model cannot give.

The chat runs for real (the `olav` entry point, the scripted model behind the model factory,
LanceDB and DuckDB in a temporary workspace); the person answers the y/N prompt. The yes is
typed at a terminal (a pty: the process-level contract); each way of saying no goes through the
same chat in this process, its lines on stdin (an empty input's end is Ctrl-D).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pexpect
import pytest

from olav.audit.recorder import AuditRecorder
from olav.compose import LEARNING_TOOLS, agent_session
from olav.core.config import Workspace
from olav.learning.curator import DRAFTS
from olav.llm.models import ScriptedChatModel
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from olav.runtime.hooks import Callbacks
from tests.helpers import OlavCli, scripted_ws, spawn_olav

PROPOSE = {
    "content": "Here is the draft. Store it?",
    "tool_calls": [
        {
            "name": "propose_memory_draft",
            "args": {
                "intent": "r1_loopback",
                "keywords": ["R1", "loopback"],
                "body": "R1's loopback is 10.255.1.1",
                "category": "fact",
            },
        }
    ],
}
# the person says no, and the model commits anyway
COMMIT = {"tool_calls": [{"name": "commit_to_memory", "args": {"from_draft": True}}]}
SCRIPT = [PROPOSE, {"content": "Here is the draft. Store it?"}, COMMIT, {"content": "Done."}]
EOF_ANSWER = "<Ctrl-D>"


def stored(root: Path) -> bool:
    return (
        MemoryStore.for_workspace(Workspace.open(root)).read("fact_r1_loopback", EVERYONE)
        is not None
    )


def audit_events(root: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = AuditRecorder(root / ".olav/databases/audit.duckdb").query(
        "SELECT kind, detail FROM events WHERE kind IN ('approval', 'denial') ORDER BY created_at"
    )
    return [(kind, json.loads(detail)) for kind, detail in rows]


def chat_until_the_prompt(child: pexpect.spawn) -> None:
    """Turn 1 proposes; turn 2 ("no") meets the model's commit with the y/N prompt."""
    child.expect("/help for commands")
    child.expect("core> ")
    child.sendline("remember that R1's loopback is 10.255.1.1")
    child.expect("Here is the draft")
    child.expect("core> ")
    child.sendline("no, don't save that")
    child.expect("commit_to_memory would store r1_loopback")
    child.expect("category: fact")  # the draft's preview, not the tool's arguments
    child.expect("10.255.1.1")
    child.expect(re.escape("Store it in memory? [y/N] "))


def answer_and_leave(child: pexpect.spawn, answer: str) -> None:
    child.sendline(answer)
    child.expect("Done.")
    child.expect("core> ")
    child.sendline("/exit")
    child.expect("bye")
    child.expect(pexpect.EOF)


def run_chat(root: Path, answer: str) -> None:
    scripted_ws(root, SCRIPT)
    child = spawn_olav(root)
    try:
        chat_until_the_prompt(child)
        answer_and_leave(child, answer)
    finally:
        child.close(force=True)


@pytest.mark.parametrize("answer", ["n", "", EOF_ANSWER])
def test_no_at_the_prompt_stores_nothing_even_if_the_model_commits(
    hash_ws: Path, answer: str, olav: OlavCli
) -> None:
    scripted_ws(hash_ws, SCRIPT)
    lines = ["remember that R1's loopback is 10.255.1.1", "no, don't save that"]
    if answer != EOF_ANSWER:  # the end of the input is the Ctrl-D: no, and the chat ends
        lines += [answer, "/exit"]
    res = olav("chat", input="\n".join(lines) + "\n")
    assert res.exit_code == 0, res.output
    said = res.output
    assert "commit_to_memory would store r1_loopback" in said and "category: fact" in said
    assert said.index("Store it in memory? [y/N]") < said.index("Done.") < said.index("bye")
    assert not stored(hash_ws)
    assert (hash_ws / DRAFTS / "r1_loopback.draft.json").is_file()  # confirmable later
    [(kind, detail)] = audit_events(hash_ws)
    assert kind == "denial"
    assert (detail["tool"], detail["subject"], detail["asked"]) == (
        "commit_to_memory",
        "r1_loopback",
        True,
    )
    draft = json.loads((hash_ws / DRAFTS / "r1_loopback.draft.json").read_text())
    assert draft["seen_at"]  # the prompt showed it to the person


@pytest.mark.slow
def test_yes_at_the_prompt_stores_the_draft(hash_ws: Path) -> None:
    run_chat(hash_ws, "y")
    assert stored(hash_ws)
    assert not (hash_ws / DRAFTS / "r1_loopback.draft.json").exists()
    assert [kind for kind, _ in audit_events(hash_ws)] == ["approval"]


def test_without_an_approver_commit_is_refused_with_the_cli_hint(hash_ws: Path) -> None:
    """`olav ask`, cron and benchmarks have nobody to ask: refused, never auto-approved."""
    model = ScriptedChatModel(turns=SCRIPT)
    session = agent_session(scripted_ws(hash_ws, SCRIPT), model=model, callbacks=Callbacks())
    session.ask("remember that R1's loopback is 10.255.1.1")
    session.ask("yes, store it")
    refusal = str(model.calls[3][-1].content)
    assert refusal.startswith("Error: the person did not confirm the draft r1_loopback")
    assert "olav kb drafts confirm r1_loopback" in refusal
    assert not stored(hash_ws)
    [(kind, detail)] = audit_events(hash_ws)
    assert (kind, detail["subject"], detail["asked"]) == ("denial", "r1_loopback", False)


def test_olav_ask_auto_approve_does_not_commit(hash_ws: Path, olav: OlavCli) -> None:
    scripted_ws(hash_ws, [COMMIT, {"content": "Done."}])
    from olav.learning.curator import DraftRequest, propose_draft

    request = DraftRequest(
        intent="r1_loopback", keywords=["R1"], body="R1 is 10.255.1.1", category="fact"
    )
    propose_draft(hash_ws, request)
    res = olav("ask", "--auto-approve", "store the R1 draft")
    # the refused commit was the run's only action: the answer's "Done." is not the truth
    assert res.exit_code == 1, res.output
    assert "commit_to_memory was refused" in res.output and "kb drafts confirm" in res.output
    assert not stored(hash_ws)
    assert [kind for kind, _ in audit_events(hash_ws)] == ["denial"]


def test_the_tool_alone_cannot_commit(hash_ws: Path) -> None:
    """Called without the middleware's consent (e.g. a model forging arguments), the tool
    refuses; the consent is not an argument the model can pass."""
    from olav.learning.curator import DraftRequest, propose_draft
    from olav.runtime.tools import build_tools
    from tests.helpers import tool_context

    request = DraftRequest(
        intent="r1_loopback", keywords=["R1"], body="R1 is 10.255.1.1", category="fact"
    )
    propose_draft(hash_ws, request)
    [tool] = build_tools(["commit_to_memory"], tool_context(hash_ws), LEARNING_TOOLS)
    out = tool.invoke({"from_draft": True, "intent": "r1_loopback", "confirmed_by": "chat"})
    assert out.startswith("Error: a person must confirm the draft")
    assert not stored(hash_ws)


def test_chat_auto_approve_still_asks_before_storing(
    hash_ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`olav chat --auto-approve` covers dangerous tools, never a memory: the prompt shows the
    preview and an empty answer is a no."""
    from olav.cli.repl import Chat

    prompts: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt: prompts.append(prompt) or "")
    chat = Chat(Workspace.open(hash_ws), auto_approve=True)
    args = {"from_draft": True, "subject": "r1_loopback", "preview": "body: R1 is 10.255.1.1"}
    assert chat.approve("commit_to_memory", args) is False
    assert prompts == ["  Store it in memory? [y/N] "]
    assert "body: R1 is 10.255.1.1" in capsys.readouterr().out
    assert chat.approve("take_snapshot", {"devices": ["r1"]}) is True  # unchanged
    assert len(prompts) == 1
