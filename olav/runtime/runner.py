"""A chat session: runs turns through the agent graph and records them in the audit log."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from olav.audit.recorder import AuditRecorder
from olav.config import Workspace
from olav.errors import ModelError, OlavError
from olav.learning.trace_learner import start_trace_learning
from olav.log import configure as configure_logging
from olav.log import get_logger
from olav.memory.capture import CORRECTION, capture, invalidate_ids
from olav.memory.episodes import EVERY_N_TURNS
from olav.runtime.builder import BuiltAgent, build
from olav.runtime.middleware import RunContext, message_text
from olav.runtime.models import translate_model_error

log = get_logger("runner")

RECURSION_LIMIT = 80
# access-count bumps are written every this many runs and when the session closes
BUMP_EVERY_N_TURNS = 5


def _is_main(meta: dict[str, Any]) -> bool:
    """Tokens of the top-level agent (sub-agents run inside the tools node)."""
    return "tools:" not in str(meta.get("langgraph_checkpoint_ns", ""))


class RunCancelled(OlavError):
    exit_code = 130


@dataclass
class TurnResult:
    run_id: str
    answer: str
    status: str


class Session:
    def __init__(
        self,
        ws: Workspace,
        *,
        agent: str = "core",
        approver: Callable[[str, dict[str, Any]], bool] | None = None,
        on_token: Callable[[str], None] | None = None,
        on_tool_start: Callable[[str, str, dict[str, Any]], None] | None = None,
        on_tool_end: Callable[[str, str, str, float], None] | None = None,
        model: Any = None,
        store: Any = None,
        learn_from_failures: bool = True,
    ) -> None:
        self.ws = ws
        configure_logging(ws.logs)
        self.audit = AuditRecorder(ws.audit_path)
        self.run = RunContext(
            audit=self.audit,
            approver=approver,
            on_tool_start=on_tool_start,
            on_tool_end=on_tool_end,
        )
        self.on_token = on_token
        self._model = model
        self._store = store
        self.agent_name = agent
        self.session_id = uuid.uuid4().hex[:12]
        self.thread_id = self.session_id
        self._built: BuiltAgent | None = None
        self._last_patterns: list[str] = []
        self.turns = 0
        self._background: list[Any] = []
        self.learn_from_failures = learn_from_failures

    @property
    def built(self) -> BuiltAgent:
        if self._built is None:
            self._built = build(
                self.ws, self.run, agent=self.agent_name, store=self._store, model=self._model
            )
        return self._built

    def switch_agent(self, agent: str) -> None:
        self.agent_name = agent
        self._built = None
        self.new_thread()

    def new_thread(self) -> None:
        self.thread_id = uuid.uuid4().hex[:12]

    def ask(self, text: str) -> TurnResult:
        built = self.built
        if self._last_patterns and CORRECTION.search(text):
            invalidate_ids(self.store, self._last_patterns)  # the user corrected that SQL
        self._last_patterns = []
        run_id = self.audit.start_run(self.agent_name, self.session_id, text, built.model_name)
        self.run.run_id = run_id
        self.run.tool_events = []
        status = "error"
        self.audit.message(run_id, "user", text)
        config = {"configurable": {"thread_id": self.thread_id}, "recursion_limit": RECURSION_LIMIT}
        final: AIMessage | None = None
        try:
            for mode, payload in built.graph.stream(
                {"messages": [HumanMessage(content=text)]},
                config=config,
                stream_mode=["messages", "values"],
            ):
                if mode == "messages":
                    chunk, meta = payload
                    if self.on_token and isinstance(chunk, AIMessageChunk) and _is_main(meta):
                        self.on_token(message_text(chunk))
                elif mode == "values":
                    msgs = payload.get("messages") or []
                    if msgs and isinstance(msgs[-1], AIMessage):
                        final = msgs[-1]
        except KeyboardInterrupt:
            status = "cancelled"
            self.audit.end_run(run_id, "cancelled", "cancelled by the user (Ctrl-C)")
            raise RunCancelled("cancelled") from None
        except OlavError as exc:
            self.audit.end_run(run_id, "error", exc.one_line())
            raise
        except Exception as exc:
            translated = translate_model_error(exc, self.ws.config, built.model_name)
            self.audit.end_run(run_id, "error", f"{type(exc).__name__}: {exc}")
            log.error("run %s failed: %s: %s", run_id, type(exc).__name__, exc)
            if translated is not None:
                raise translated from exc
            raise ModelError(f"the run failed: {type(exc).__name__}: {exc}") from exc
        else:
            status = "completed"
        finally:
            for rec in built.recallers.values():
                rec.flush(bumps=(self.turns + 1) % BUMP_EVERY_N_TURNS == 0)
            self._learn(text, run_id, status)
            self._maintain()
            self.turns += 1
            if self.turns % EVERY_N_TURNS == 0:
                self.write_episode()
        answer = message_text(final) if final is not None else ""
        self.audit.message(run_id, "assistant", answer)
        self.audit.end_run(run_id, "completed")
        return TurnResult(run_id=run_id, answer=answer, status="completed")

    @property
    def store(self) -> Any:
        return next(iter(self.built.recallers.values())).store

    def _learn(self, text: str, run_id: str, status: str) -> None:
        """L1 capture after every run; trace learning in the background after failures."""
        events = self.run.tool_events
        try:
            new = capture(
                self.store, events, question=text if status == "completed" else "", run_id=run_id
            )
            self._last_patterns = [i for i in new if i.startswith("qp_")]
        except Exception as exc:  # learning must never break the chat
            log.warning("capture failed for run %s: %s", run_id, exc)
        if status in ("error", "cancelled") and self.learn_from_failures:
            self._background.append(start_trace_learning(self.ws, self.store))

    def _maintain(self) -> None:
        """Compact the memory table in the background once writes (captures, access-count
        bumps) have left it in many small fragments; each one slows every search."""
        import threading

        try:
            if not self.store.needs_maintenance():
                return
        except Exception as exc:
            log.warning("memory stats failed: %s", exc)
            return

        def work() -> None:
            try:
                self.store.maintain()
            except Exception as exc:  # another process may hold the lock; try next time
                log.warning("memory maintenance failed: %s", exc)

        thread = threading.Thread(target=work, name="olav-maintain")
        thread.start()
        self._background.append(thread)

    def write_episode(self) -> str | None:
        """Store this session's episode (what was asked, done, left open)."""
        from olav.memory.episodes import write_episode

        if self._built is None or self.turns == 0:
            return None
        try:
            return write_episode(self.store, self.audit, self.session_id, self.agent_name)
        except Exception as exc:  # an episode is a nicety; never break the chat for it
            log.warning("episode for session %s not written: %s", self.session_id, exc)
            return None

    def close(self) -> None:
        """End of the session: write pending access counts, wait for background learning and
        write the episode."""
        if self._built is not None:
            for rec in self._built.recallers.values():
                rec.flush()
        self.wait_background()
        self.write_episode()

    def wait_background(self, timeout: float = 120.0) -> None:
        """Wait for background learning started by failed runs (tests, clean exit)."""
        pending, self._background = self._background, []
        for thread in pending:
            thread.join(timeout)
