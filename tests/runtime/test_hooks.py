"""The engine's after-run hooks: the composer decides what happens after a run."""

from __future__ import annotations

from pathlib import Path

from olav.compose import LEARNING_TOOLS
from olav.llm.models import ScriptedChatModel
from olav.runtime.hooks import Hooks, RunEnd
from olav.runtime.runner import Session
from tests.helpers import scripted_ws


def test_every_hook_sees_each_run_and_a_broken_one_does_not_break_it(hash_ws: Path) -> None:
    seen: list[tuple[str, str]] = []

    def broken(end: RunEnd) -> None:
        raise RuntimeError("a hook's bug")

    def record(end: RunEnd) -> None:
        seen.append((end.run_id, end.outcome))

    turns = [{"content": "hello"}, {"content": "hello again"}]
    session = Session(
        scripted_ws(hash_ws, turns),
        model=ScriptedChatModel(turns=turns),
        hooks=Hooks(after_run=(broken, record)),
        tools=LEARNING_TOOLS,
    )
    first = session.ask("hi")
    second = session.ask("hi again")
    session.wait_background()
    assert seen == [(first.run_id, "completed"), (second.run_id, "completed")]
    assert second.answer == "hello again"
