"""olav's agent middleware. Every hook has a sync and an async version.

- :class:`AutoRecallMiddleware` puts a ``<relevant-memories>`` block next to the last human
  message, for this model call only; the stored history is never changed.
- :class:`StaticContextMiddleware` adds ``on_intent`` reference files (L1) when the query hits
  their keywords. ``static_context`` files (L0) are part of the system prompt already.
- :class:`CompressionMiddleware` compresses older turns when the conversation outgrows the
  context budget.
- The tool guard (allow-list, approvals, audit of each call) is :mod:`olav.runtime.toolguard`.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from olav.core.log import get_logger
from olav.memory.ingest.capture import ToolEvent
from olav.memory.recall.recaller import Recaller, RecallResult

log = get_logger("runtime.recall")


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
    last_prompt: int = 0  # the last call's prompt tokens
    reasoning: list[str] = field(default_factory=list)
    first_token_s: float | None = None  # seconds from the run's start to its first token
    denied: list[str] = field(default_factory=list)  # the tools a person (or no one) refused
    approval_s: float = 0.0  # seconds spent waiting for a person's yes or no
    cut_short: int = 0  # model messages that stopped on the token limit (none of it ran)

    def summary(self) -> dict[str, Any]:
        """The run's rescue marks for the audit and ``olav ask --json``."""
        return {
            "salvaged": [dict(s) for s in self.salvaged],
            "nudged": bool(self.nudged),
            "loop_stopped": self.loop_stopped or None,
            "model_calls": self.model_calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "denied": list(self.denied),
            "approval_s": round(self.approval_s, 3),
            "cut_short": self.cut_short,
        }


@dataclass(frozen=True)
class Decision:
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
    approver: Callable[[str, dict[str, Any]], bool | Decision] | None = None
    on_tool_start: Callable[[str, str, dict[str, Any]], None] | None = None
    on_tool_end: Callable[[str, str, str, float], None] | None = None
    recalls: list[RecallResult] = field(default_factory=list)
    tool_events: list[ToolEvent] = field(default_factory=list)
    on_warning: Callable[[str], None] | None = None
    rescue: RescueState = field(default_factory=RescueState)
    thinking: bool | None = None  # this turn's thinking switch (/think, /no_think); None: config
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


def describe_error(exc: BaseException, width: int = 120) -> str:
    """``Type: first line of the message``, short enough for one terminal line (LanceDB
    errors carry pages of Rust source paths)."""
    lines = str(exc).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else ""
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failed_stage(exc: BaseException) -> str:
    """Where a recall failed: ``embed`` when the embedder raised, else ``search`` (the
    table or one of its indexes)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return "embed" if any(f.name == "embed_query" for f in frames) else "search"


STAGE_WORDS = {"embed": "the embedder", "search": "the memory search"}


def degraded_detail(agent: str, failures: list[tuple[str, BaseException]]) -> dict[str, Any]:
    """The audit event of a degraded recall: the stage that failed first, its error type,
    every failed stage, and what recalled instead (``fts`` or ``none``)."""
    stage, exc = failures[0]
    return {
        "agent": agent,
        "stage": stage,
        "error": type(exc).__name__,
        "message": describe_error(exc),
        "failed": [{"stage": s, "error": type(e).__name__} for s, e in failures],
        "recalled_by": "none" if len(failures) > 1 else "fts",
    }


def degraded_message(failures: list[tuple[str, BaseException]]) -> str:
    """The one line the person sees, e.g. ``memory degraded: the embedder failed
    (RuntimeError: …); recalled by full text only``."""
    stage, exc = failures[0]
    if len(failures) > 1:
        outcome = f"full-text recall failed too ({type(failures[-1][1]).__name__}); no memories"
    else:
        outcome = "recalled by full text only"
    return f"memory degraded: {STAGE_WORDS[stage]} failed ({describe_error(exc)}); {outcome}"


def message_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def last_human_index(messages: list[Any]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return None


class AutoRecallMiddleware(AgentMiddleware):
    def __init__(self, recaller: Recaller, run: RunContext) -> None:
        super().__init__()
        self.recaller = recaller
        self.run = run
        self._cache: tuple[str | None, str, RecallResult] | None = None

    @property
    def name(self) -> str:
        return f"olav_auto_recall_{self.recaller.agent}"

    def recall_for(self, query: str) -> RecallResult:
        # The tool loop calls the model several times for one human message: recall once.
        key = (self.run.run_id, query)
        if self._cache is not None and self._cache[:2] == key:
            return self._cache[2]
        result = self._recall_or_degrade(query)
        self._cache = (self.run.run_id, query, result)
        self.run.recalls.append(result)
        if result.notes:  # a reranker or judge that failed: the floors decided
            self._report_look(result.look.failed or "rerank", result.notes)
        return result

    def _report_look(self, stage: str, notes: list[str]) -> None:
        """Log, audit and show (once per run) a second look that could not be had."""
        for note in notes:
            log.warning("recall for %s (run %s): %s", self.recaller.agent, self.run.run_id, note)
        if self.run.audit:
            detail = {"agent": self.recaller.agent, "stage": stage, "message": notes[0]}
            self.run.audit.event(self.run.run_id, "recall_degraded", detail)
        self.run.warn("memory: " + notes[0])

    def _recall_or_degrade(self, query: str) -> RecallResult:
        """Hybrid recall; when the embedder, the table or an index fails, full-text recall;
        when that fails too, no memory. Memory must never take the agent down."""
        run_id = self.run.run_id
        try:
            return self.recaller.recall(query, run_id=run_id)
        except Exception as exc:
            failures: list[tuple[str, BaseException]] = [(failed_stage(exc), exc)]
        try:
            result = self.recaller.recall(query, run_id=run_id, search_mode="fts")
        except Exception as exc:
            failures.append(("fts", exc))
            result = RecallResult(query=query, agent=self.recaller.agent, tier=self.recaller.tier)
        self._report(failures)
        return result

    def _report(self, failures: list[tuple[str, BaseException]]) -> None:
        """Log, audit and show (once per run) a degraded recall."""
        for stage, exc in failures:
            log.warning(
                "recall for %s failed at %s (run %s): %s",
                self.recaller.agent,
                stage,
                self.run.run_id,
                describe_error(exc, width=500),
            )
        if self.run.audit:
            detail = degraded_detail(self.recaller.agent, failures)
            self.run.audit.event(self.run.run_id, "recall_degraded", detail)
        self.run.warn(degraded_message(failures))

    def _inject(self, request: Any) -> Any:
        messages = list(request.messages)
        idx = last_human_index(messages)
        if idx is None:
            return request
        query = message_text(messages[idx])
        result = self.recall_for(query)
        if not result.block:
            return request
        messages[idx] = HumanMessage(content=f"{result.block}\n\n{query}", id=messages[idx].id)
        return request.override(messages=messages)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._inject(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._inject(request))


class StaticContextMiddleware(AgentMiddleware):
    """L1: reference files whose keywords appear in the query join the system prompt."""

    def __init__(self, agent_name: str, on_intent: list[tuple[list[str], str, str]]) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.on_intent = on_intent  # (keywords, file name, content)

    @property
    def name(self) -> str:
        return f"olav_static_context_{self.agent_name}"

    def _extend(self, request: Any) -> Any:
        idx = last_human_index(list(request.messages))
        if idx is None or not self.on_intent:
            return request
        query = message_text(request.messages[idx]).lower()
        extra = [
            f"## Reference: {name}\n{content}"
            for kws, name, content in self.on_intent
            if any(k.lower() in query for k in kws)
        ]
        if not extra:
            return request
        base = message_text(request.system_message) if request.system_message else ""
        return request.override(
            system_message=SystemMessage(content=base + "\n\n" + "\n\n".join(extra))
        )

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._extend(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._extend(request))


class CompressionMiddleware(AgentMiddleware):
    """Working memory: when the conversation outgrows the budget, older turns become one
    structured state message (intent, confirmed parameters, open items) for the model call,
    instead of being dropped. The stored history is not changed."""

    KEEP_TURNS = 2

    def __init__(self, agent_name: str, budget_tokens: int) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.budget = budget_tokens

    @property
    def name(self) -> str:
        return f"olav_compression_{self.agent_name}"

    def _compress(self, request: Any) -> Any:
        from olav.memory.store.tokens import estimate_tokens

        messages = list(request.messages)
        total = sum(estimate_tokens(message_text(m)) + 4 for m in messages)
        if total <= self.budget:
            return request
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        if len(humans) <= self.KEEP_TURNS:
            return request
        cut = humans[-self.KEEP_TURNS]  # the last KEEP_TURNS user turns stay whole
        state = summarise_turns(messages[:cut])
        return request.override(messages=[HumanMessage(content=state), *messages[cut:]])

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._compress(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._compress(request))


def summarise_turns(messages: list[Any]) -> str:
    """A deterministic structured state of earlier turns."""
    from langchain_core.messages import AIMessage

    intents = [
        " ".join(message_text(m).split())[:160] for m in messages if isinstance(m, HumanMessage)
    ]
    params: dict[str, str] = {}
    failed: set[str] = set()
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                res = results.get(call.get("id") or "")
                ok = res is not None and res.status != "error"
                if not ok:
                    failed.add(call["name"])
                    continue
                for key, val in (call.get("args") or {}).items():
                    if key != "data":
                        params[f"{call['name']}.{key}"] = " ".join(str(val).split())[:80]
    lines = ["[conversation state: earlier turns, compressed]"]
    lines.append("User intents: " + " | ".join(intents[-6:]))
    if params:
        lines.append(
            "Confirmed parameters: " + "; ".join(f"{k}={v}" for k, v in list(params.items())[-20:])
        )
    if failed:
        lines.append("Open items (tools that failed): " + ", ".join(sorted(failed)))
    return "\n".join(lines)
