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
