""":class:`AutoRecallMiddleware` puts a ``<relevant-memories>`` block next to the last human
message, for this model call only; the stored history is never changed. When the embedder,
the table or an index fails, it recalls by full text, and when that fails too, nothing: the
person is told once per run, and the audit gets a ``recall_degraded`` event."""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import HumanMessage

from olav.audit.events import RECALL_DEGRADED_EVENT
from olav.core.log import get_logger
from olav.memory.recall.recaller import Recaller, RecallResult
from olav.runtime.middleware.messages import last_human_index, message_text
from olav.runtime.middleware.run_context import RunContext

log = get_logger("runtime.recall")


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
            self.run.audit.event(self.run.run_id, RECALL_DEGRADED_EVENT, detail)
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
            self.run.audit.event(self.run.run_id, RECALL_DEGRADED_EVENT, detail)
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
