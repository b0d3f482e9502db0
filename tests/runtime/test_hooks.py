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


def test_a_run_the_model_server_never_answered_is_marked_and_teaches_nothing(
    hash_ws: Path,
) -> None:
    """The server refused the connection: the hooks hear so, and trace learning (which would
    ask the same dead server before `olav ask` could print its error) does not start. A run
    that failed any other way is still learnt from."""
    import pytest

    from olav.compose.session import trace_learning
    from olav.core.errors import OlavError

    class Refused(ScriptedChatModel):
        def _next_turn(self, messages: list) -> object:  # type: ignore[override]
            raise ConnectionRefusedError(111, "Connection refused")

    seen: list[RunEnd] = []
    turns = [{"error": "the model crashed"}]
    for model in (Refused(turns=turns), ScriptedChatModel(turns=turns)):
        session = Session(
            scripted_ws(hash_ws, turns),
            model=model,
            hooks=Hooks(after_run=(seen.append,)),
            tools=LEARNING_TOOLS,
        )
        with pytest.raises(OlavError):
            session.ask("hi")
        session.wait_background()
    down, broken = seen
    assert (down.outcome, down.model_unreachable) == ("failed", True)
    assert (broken.outcome, broken.model_unreachable) == ("failed", False)
    assert trace_learning(down) is None
    started = trace_learning(broken)
    assert started is not None
    started.join(60)
