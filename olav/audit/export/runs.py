"""What ``olav log`` reads of a run: the filter that picks runs, the run with its summary
counts (:class:`AuditedRun`) and each of its messages (:class:`Step`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs: ``salvaged``/``nudged`` True keeps only those runs, False drops them,
    None keeps both. ``until`` is exclusive. ``turns`` counts the run's assistant messages.
    ``threads``: only the runs of these threads (None: any run); ``but_threads``: not the runs
    of these (a run without a thread stays). ``operator``: only the runs recorded as that
    operator's, and with ``or_unnamed`` those that name none too (recorded before runs named
    their operator, or by olav's own jobs). ``offset`` skips that many, after the order."""

    outcomes: tuple[str, ...] = ()
    agent: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_turns: int = 0
    salvaged: bool | None = None
    nudged: bool | None = None
    limit: int | None = None
    threads: tuple[str, ...] | None = None
    but_threads: tuple[str, ...] = ()
    offset: int = 0
    operator: str | None = None
    or_unnamed: bool = False
    but_agents: tuple[str, ...] = ()  # not these agents' runs (olav's own jobs)


@dataclass(slots=True)
class Step:
    """One message of a run: ``tool_calls`` ``[{id, name, args}]`` on assistant steps;
    ``tool_call_id``, ``name`` and ``status`` on tool steps."""

    role: str  # user | assistant | tool
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    reasoning: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        if self.role == "tool":
            out.update(tool_call_id=self.tool_call_id, name=self.name, status=self.status)
        if self.reasoning:
            out["reasoning"] = self.reasoning
        return out


@dataclass(slots=True)
class AuditedRun:
    """A run as ``olav log`` shows and exports it; ``steps`` and what follows them are read
    only when the run's details are (:func:`load_run`, :func:`iter_runs`)."""

    id: str
    agent: str
    session_id: str | None
    thread_id: str | None
    status: str
    outcome: str
    query: str
    model: str | None
    error: str | None
    started_at: datetime
    ended_at: datetime | None
    turns: int
    n_steps: int
    n_tool_calls: int
    salvaged: int
    nudged: int
    loop_guard: int
    context_full: int
    operator: str | None = None  # whose run it is (None: recorded before runs said)
    steps: list[Step] = field(default_factory=list)
    source: str = "steps"  # steps, or messages for a run recorded before schema 4
    injected: list[str] = field(default_factory=list)
    memory_block: str | None = None
    reasoning: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    # every recall of the run, oldest first: {agent, query, injected, block, latency_ms, at}
    recalls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def group(self) -> str:
        """What the train/test split keeps together: the thread, or the run alone."""
        return self.thread_id or self.id

    def marks(self) -> dict[str, Any]:
        return {
            "salvaged": self.salvaged,
            "nudged": bool(self.nudged),
            "loop_guard": bool(self.loop_guard),
            "context_full": bool(self.context_full),
        }

    def summary_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at.isoformat(),
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "agent": self.agent,
            "model": self.model,
            "thread_id": self.thread_id,
            "session_id": self.session_id,
            "status": self.status,
            "outcome": self.outcome,
            "turns": self.turns,
            "steps": self.n_steps,
            "tool_calls": self.n_tool_calls,
            "rescue": self.marks(),
            "query": self.query,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        """The whole run (``olav log show --json``)."""
        return {
            **self.summary_json(),
            "source": self.source,
            "tokens": {k: self.stats.get(k) for k in ("tokens_in", "tokens_out", "model_calls")},
            "stats": self.stats,
            "memories": {"injected": self.injected, "block": self.memory_block},
            "messages": [s.to_json() for s in self.steps],
            "reasoning": self.reasoning,
            "events": self.events,
        }
