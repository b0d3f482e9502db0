"""What happens after a run is decided by whoever builds the Session, not by the engine.

The engine calls every ``Hooks.after_run`` hook once a run has ended, with a :class:`RunEnd`.
A hook that starts background work returns something to ``join`` (a thread), and
``Session.wait_background`` waits for it. A hook that raises is logged; it never breaks the
chat. The learning loop (trace lessons after a run that went wrong) is such a hook, added by
olav.compose: the engine does not import olav.learning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from olav.core.config import Workspace
from olav.core.log import get_logger

if TYPE_CHECKING:
    from olav.runtime.middleware import ApprovalDecision


class Waitable(Protocol):
    def join(self, timeout: float | None = None) -> None: ...


@dataclass(frozen=True)
class RunEnd:
    """One finished run, as a hook sees it."""

    ws: Workspace
    store: Any  # the session's memory table (or MemoryOff)
    run_id: str
    outcome: str  # completed, narrated, tool_error, failed, cancelled (olav.runtime.outcome)
    # the run failed because the model server could not be reached: whatever would learn
    # from it needs that same server
    model_unreachable: bool = False


AfterRun = Callable[[RunEnd], Waitable | None]

log = get_logger("hooks")


@dataclass(frozen=True)
class Hooks:
    """The composer's hooks into a Session; none by default (the engine learns nothing)."""

    after_run: Sequence[AfterRun] = ()

    def run_after(self, end: RunEnd) -> list[Waitable]:
        """Every after-run hook, in order; what they started, to wait for."""
        started: list[Waitable] = []
        for hook in self.after_run:
            try:
                begun = hook(end)
            except Exception as exc:  # a hook must never break the chat
                log.warning("after-run hook %s failed for run %s: %s", hook, end.run_id, exc)
                continue
            if begun is not None:
                started.append(begun)
        return started


@dataclass(frozen=True, slots=True)
class Callbacks:
    """What the person's side of a Session (the REPL, ``olav ask``, a job) plugs in: the
    ``approver`` asked before a dangerous tool runs (None: every such call is denied), and the
    streaming callbacks for the answer's tokens and each tool call's start and end. The
    approver's answer is a yes or no, or a ApprovalDecision that says more (an edit, a reason)."""

    approver: Callable[[str, dict[str, Any]], bool | ApprovalDecision] | None = None
    # the approver reads the terminal: it is asked on the thread that called ``ask`` (the
    # graph runs in a worker of its own, olav.runtime.cancel), never on the run's worker
    approver_reads_terminal: bool = False
    on_token: Callable[[str], None] | None = None
    on_tool_start: Callable[[str, str, dict[str, Any]], None] | None = None
    on_tool_end: Callable[[str, str, str, float], None] | None = None
    # (mode, payload) of each graph step: "values", "updates" and the run's extra stream modes
    on_step: Callable[[str, Any], None] | None = None
    # a line for the person about the run (memory degraded, the window nearly full)
    on_warning: Callable[[str], None] | None = None
