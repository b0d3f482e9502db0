"""When the rescue layer asks the model again inside one step (the nudge, an answer cut at
the token limit), the person reads the answer once: the retry's text is not streamed, and
what the step settles on is printed whole at the end of the turn."""

from __future__ import annotations

from pathlib import Path

import yaml

from olav.compose import agent_session
from olav.core.config import Workspace
from olav.runtime.hooks import Callbacks
from tests.helpers import scripted_ws

NARRATION = (
    "I will now export the device list to a markdown file with format_and_export, so that you "
    "get a clean table of every device in sh1 and bj1, their roles, their management addresses "
    "and the sites they belong to, in one file."
)  # longer than the stream guard's hold: it streams as it comes


def _nudging(root: Path, turns: list[dict]) -> Workspace:  # type: ignore[type-arg]
    scripted_ws(root, turns)
    cfg = root / ".olav" / "olav.yaml"
    data = yaml.safe_load(cfg.read_text())
    data.setdefault("runtime", {})["nudge"] = True
    cfg.write_text(yaml.safe_dump(data))
    return Workspace.open(root)


def _ask(ws: Workspace, text: str) -> tuple[str, str]:
    shown: list[str] = []
    session = agent_session(ws, callbacks=Callbacks(on_token=shown.append))
    result = session.ask(text)
    return "".join(shown) + result.unshown, result.answer


def test_a_nudged_narration_that_stays_one_is_shown_once(hash_ws: Path) -> None:
    ws = _nudging(hash_ws, [{"content": NARRATION}, {"content": NARRATION}])
    shown, answer = _ask(ws, "save the device list as a markdown file")
    assert shown.count("I will now export") == 1
    assert answer == NARRATION


def test_the_answer_after_a_cut_call_is_printed_once(hash_ws: Path) -> None:
    cut = {
        "content": '<tool_call>\n{"name": "format_and_export", "arguments": {"data": "# Dev',
        "done_reason": "length",
    }
    after = "The export did not fit; the devices are sh1-border01 and bj1-core01."
    ws = _nudging(hash_ws, [cut, {"content": after}])
    shown, answer = _ask(ws, "save the device list as a markdown file")
    assert answer == after
    assert shown.count(after) == 1 and "<tool_call>" not in shown
