"""The chat's slash commands as a person types them (``olav chat`` with piped input)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import OlavCli, scripted_ws


def test_agent_switches_and_resume_does_not(hash_ws: Path, olav: OlavCli) -> None:
    scripted_ws(hash_ws, [{"content": "first answer"}])
    res = olav("chat", input="hello\n/agent\n/agent netops\n/agent nosuch\n/exit\n")
    assert res.exit_code == 0, res.output
    assert "unknown command /agent" not in res.output
    assert "current agent: core" in res.output
    assert "now talking to netops" in res.output
    assert "no agent named 'nosuch'" in res.output

    tid = next(
        line.split()[0] for line in olav("threads", "list").output.splitlines() if "hello" in line
    )
    res = olav("chat", input=f"/resume {tid[:6]}\n/exit\n")
    assert res.exit_code == 0, res.output
    assert f"continuing {tid}" in res.output
    # the agent switch no longer runs inside /resume: the id is not taken for an agent's name
    assert "no agent named" not in res.output and "now talking to" not in res.output


SNAPSHOT = {
    "content": "",
    "tool_calls": [{"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}],
}


def test_after_the_answer_the_chat_says_what_happens_now(hash_ws: Path, olav: OlavCli) -> None:
    """After y the line under the question says the tool runs; after n that it does not."""
    scripted_ws(hash_ws, [SNAPSHOT, {"content": "Snapshot taken."}])
    res = olav("chat", "--agent", "netops", input="take a snapshot of sh1-border01\ny\n/exit\n")
    assert res.exit_code == 0, res.output
    asked = res.output.index("Allow? [y/N]")
    after = res.output[asked:]
    assert "allowed, running take_snapshot…" in after
    assert after.index("allowed, running") < after.index("take_snapshot success")
    scripted_ws(hash_ws, [SNAPSHOT, {"content": "Not taken."}])
    res = olav("chat", "--agent", "netops", input="take a snapshot of sh1-border01\nn\n/exit\n")
    assert res.exit_code == 0, res.output
    assert "denied: take_snapshot does not run" in res.output
    assert "allowed, running" not in res.output
