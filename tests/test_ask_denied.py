"""``olav ask`` tells the truth about a refused tool: nobody is there to approve a dangerous
call, so it is refused, the person is told so and how to allow it, and the exit status is
non-zero when the refused call was the run's only action, whatever the model then claims."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import OlavMain, scripted_ws

SNAPSHOT = {
    "content": "",
    "tool_calls": [{"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}],
}
CLAIM = {"content": "Done: the tool ran."}


def test_a_refused_tool_is_reported_and_exits_non_zero(hash_ws: Path, olav_main: OlavMain) -> None:
    scripted_ws(hash_ws, [SNAPSHOT, CLAIM])
    res = olav_main("ask", "take a snapshot of sh1-border01", "--agent", "netops")
    assert res.returncode == 1
    assert "Done: the tool ran." in res.stdout  # the model's words, shown as they are
    assert "take_snapshot was refused" in res.stderr and "--yes" in res.stderr


def test_with_yes_the_tool_runs_and_the_json_says_nothing_was_refused(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    scripted_ws(hash_ws, [SNAPSHOT, CLAIM])
    res = olav_main(
        "ask", "take a snapshot of sh1-border01", "--agent", "netops", "--yes", "--json"
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["rescue"]["denied"] == [] and "refused" not in res.stderr
