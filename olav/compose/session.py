"""A Session with learning: the learning tools, and trace lessons after failed, cancelled,
narrated and tool_error runs (learned in a background thread, so the chat is not delayed)."""

from __future__ import annotations

import threading
from typing import Any

from olav.audit.recorder import LEARNABLE_OUTCOMES
from olav.compose.tools import LEARNING_TOOLS
from olav.core.config import Workspace
from olav.learning.trace_learner import start_trace_learning
from olav.runtime.hooks import Hooks, RunEnd
from olav.runtime.runner import Session


def trace_learning(end: RunEnd) -> threading.Thread | None:
    """The after-run hook: a run worth a lesson starts trace learning in the background. A
    run the model server never answered teaches nothing, and the learner would only wait on
    the same dead server before `olav ask` could print its error."""
    if end.outcome not in LEARNABLE_OUTCOMES or end.model_unreachable:
        return None
    return start_trace_learning(end.ws, end.store)


def learning_hooks(*, learn_from_failures: bool = True) -> Hooks:
    return Hooks(after_run=(trace_learning,) if learn_from_failures else ())


def agent_session(ws: Workspace, *, learn_from_failures: bool = True, **kw: Any) -> Session:
    """A Session (``kw`` are its arguments) with the learning tools and, unless
    ``learn_from_failures`` is off (a job, a benchmark, a test that learns explicitly),
    trace learning after the runs that went wrong."""
    hooks = learning_hooks(learn_from_failures=learn_from_failures)
    return Session(ws, hooks=hooks, tools=LEARNING_TOOLS, **kw)
