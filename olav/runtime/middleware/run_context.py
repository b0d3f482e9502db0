"""What the middleware of one session share: the current run (:class:`RunContext`), what the
rescue layer did in it (:class:`RescueState`), a person's answer to an approval
(:class:`ApprovalDecision`) and the note a middleware streams to whoever watches the run
(:func:`stream_note`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from olav.memory.ingest.capture import ToolEvent
from olav.memory.recall.recaller import RecallResult


@dataclass
class RescueState:
    """What the rescue layer (olav.runtime.rescue) did in one run: calls salvaged from text,
    the nudge, the loop guard, model calls and the tokens they used."""

    first_recall: int = 0  # this run's recalls are RunContext.recalls[first_recall:]
    salvaged: list[dict[str, Any]] = field(default_factory=list)
    nudged: list[str] = field(default_factory=list)  # the tools each nudge named
    loop_stopped: str = ""  # the tool whose repeated call ended the run
    model_calls: int = 0
    tokens_in: int = 0  # what the server counted (prompt_eval_count), summed over calls
    tokens_out: int = 0
    tokens_estimated: bool = False  # a call the engine sent no counts for: estimated
    # who counted: "engine" (its usage), "tokenizer" (its tokenizer, asked after the call, for
    # a stream that carried no usage) or "estimate" (neither could); the least exact of the run
    counted_by: str = "engine"
    last_prompt: int = 0  # the last call's prompt tokens
    reasoning: list[str] = field(default_factory=list)
    first_token_s: float | None = None  # seconds from the run's start to its first token
    denied: list[str] = field(default_factory=list)  # the tools a person (or no one) refused
    approval_s: float = 0.0  # seconds spent waiting for a person's yes or no
    cut_short: int = 0  # model messages that stopped on the token limit (none of it ran)
    reasked: list[dict[str, Any]] = field(default_factory=list)  # constrained re-asks

    def summary(self) -> dict[str, Any]:
        """The run's rescue marks for the audit and ``olav ask --json``."""
        return {
            "salvaged": [dict(s) for s in self.salvaged],
            "nudged": bool(self.nudged),
            "loop_stopped": self.loop_stopped or None,
            "model_calls": self.model_calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_estimated": self.tokens_estimated,
            "counted_by": self.counted_by,
            "denied": list(self.denied),
            "approval_s": round(self.approval_s, 3),
            "cut_short": self.cut_short,
            "reasked": [dict(r) for r in self.reasked],
        }


@dataclass(frozen=True)
class ApprovalDecision:
    """A person's answer to an approval, when it says more than yes or no: ``args`` to run the
    tool with instead of the model's (an edit), ``message`` for the model (a rejection's
    reason, or the policy that refused it). An approver may return one instead of a bool; it
    is true when it approves."""

    approved: bool
    args: dict[str, Any] | None = None
    message: str = ""
    by: str = "user"  # who decided: "user", or "policy" (the server's rules, nobody asked)

    def __bool__(self) -> bool:
        return self.approved


def stream_note(data: Any) -> None:
    """Write ``data`` to LangGraph's stream writer (the ``custom`` stream mode, which olav
    serve streams); nothing outside a graph run, or when nobody streams that mode."""
    try:
        from langgraph.config import get_stream_writer

        get_stream_writer()(data)
    except Exception:  # outside a runnable context: nobody to tell
        return


@dataclass
class RunContext:
    """Shared by the middleware of one session: the current run and the UI hooks."""

    run_id: str | None = None
    audit: Any = None
    approver: Callable[[str, dict[str, Any]], bool | ApprovalDecision] | None = None
    on_tool_start: Callable[[str, str, dict[str, Any]], None] | None = None
    on_tool_end: Callable[[str, str, str, float], None] | None = None
    recalls: list[RecallResult] = field(default_factory=list)
    tool_events: list[ToolEvent] = field(default_factory=list)
    on_warning: Callable[[str], None] | None = None
    rescue: RescueState = field(default_factory=RescueState)
    thinking: bool | None = None  # this turn's thinking switch (/think, /no_think); None: config
    # what a client asked of the model for this run (olav serve's /v1: max_tokens, temperature,
    # top_p, stop, seed), applied to each model call (olav.runtime.rescue.asked)
    asked: dict[str, Any] = field(default_factory=dict)
    # the approver may pause the run with a LangGraph interrupt (olav serve): the runner then
    # ends the run "interrupted" and the person's answer continues it (Session.answer)
    interrupts: bool = False
    _warned: set[str | None] = field(default_factory=set, repr=False)

    def begin(self, run_id: str) -> None:
        """A new run: its id, and empty tool events and rescue marks."""
        self.run_id = run_id
        self.tool_events = []
        self.rescue = RescueState(first_recall=len(self.recalls))

    def warn(self, message: str) -> None:
        """Tell the person that something degraded, at most once per run (the agent and its
        sub-agents may all hit the same broken memory)."""
        if self.run_id in self._warned:
            return
        self._warned.add(self.run_id)
        if self.on_warning is not None:
            self.on_warning(message)
