"""Built-in job bodies that compose the layers below (the learning loop run by an agent)."""

from __future__ import annotations

from typing import Any

from olav.learning.reflector import REQUEST


def run_reflector(ws: Any, *, days: int = 1, model: Any = None) -> str:
    """The `reflect` cron job: run the reflector agent once over the last ``days``."""
    from olav.compose import agent_session
    from olav.runtime.hooks import Callbacks

    session = agent_session(
        ws,
        agent="reflector",
        callbacks=Callbacks(approver=lambda name, args: False),
        model=model,
        learn_from_failures=False,
    )
    try:
        result = session.ask(REQUEST.format(days=days))
    finally:
        session.wait_background()  # the run's memory writes land before the job reports
    return result.answer.strip()[:500] or "done"
