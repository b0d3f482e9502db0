"""A chat session: runs turns through the agent graph and records them in the audit log."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from olav.audit.events import INTERRUPT_EVENT
from olav.audit.recorder import AuditRecorder, prepare_audit
from olav.core.config import Workspace
from olav.core.errors import ModelError, OlavError
from olav.core.log import configure as configure_logging
from olav.core.log import get_logger
from olav.llm.models import never_reached, translate_model_error
from olav.memory.decisions import DecisionBuffer
from olav.memory.policy import policy_for
from olav.memory.store.scopes import user_name
from olav.memory.store.writer import shared_writer
from olav.runtime import aftermath
from olav.runtime.builder import BuiltAgent, build, load_agents
from olav.runtime.cancel import Cancel, CancelledByPerson, Relay, stream_in_worker
from olav.runtime.hooks import Callbacks, Hooks, RunEnd, Waitable
from olav.runtime.middleware import ApprovalDecision, RunContext, message_text
from olav.runtime.request_size import check_fits
from olav.runtime.shown import ShownText, is_main
from olav.runtime.skills import ORCHESTRATOR, capture_choices
from olav.runtime.threads import ThreadInfo, ThreadStore, new_thread_id
from olav.runtime.tools import ToolSpec

log = get_logger("runner")

RECURSION_LIMIT = 80
# access-count bumps are written every this many runs and when the session closes
BUMP_EVERY_N_TURNS = 5


class RunCancelled(OlavError):
    exit_code = 130


@dataclass
class TurnResult:
    run_id: str
    answer: str
    status: str
    outcome: str = "completed"  # see olav.runtime.outcome
    unshown: str = ""  # the end of the answer that streaming held back (print it after)
    rescue: dict[str, Any] = field(default_factory=dict)  # RescueState.summary() and timings
    # what the run waits for when it paused (status "interrupted"): [{"id", "value"}], the
    # person's answer continues it (Session.answer)
    interrupts: list[dict[str, Any]] = field(default_factory=list)


_NO_RESUME: Any = object()  # ask(): a new request, not the answer to an interrupt


def _resume_text(value: Any) -> str:
    """The audit's request text of a run that answers an interrupt."""
    import json

    shown = value if isinstance(value, str) else json.dumps(value, default=str)
    return f"(answer to the approval: {shown[:200]})"


class Session:
    def __init__(
        self,
        ws: Workspace,
        *,
        agent: str = "core",
        callbacks: Callbacks = Callbacks(),
        model: Any = None,
        store: Any = None,
        store_opener: Callable[[RunContext], Any] | None = None,
        interrupts: bool = False,
        hooks: Hooks | None = None,
        tools: Mapping[str, ToolSpec] | None = None,
        thread: str | None = None,
        recall: bool = True,
    ) -> None:
        """``callbacks`` are the person's side (approval, streaming, each graph step);
        ``hooks`` (after each run) and ``tools`` (beyond the registry's) are the composer's
        (olav.compose adds learning). ``thread`` continues that thread. ``store`` is the
        memory store, or ``store_opener`` opens it from the run context (a server shares one
        per operator). ``interrupts``: a dangerous tool waits for approval as a LangGraph
        interrupt (olav serve), not asking ``approver`` at once. ``recall`` False: recall
        finds nothing (bench steer's memory-off arm). Built on first use, or by :meth:`build`."""
        self.ws = ws
        configure_logging(ws.logs)
        # an older olav's audit gains the new columns, and a killed process's runs are settled
        prepared = prepare_audit(ws.audit_path)
        self.audit = AuditRecorder(ws.audit_path, operator=user_name(ws.config), migrated=prepared)
        # memory's decisions made on the background writer, written here (olav.memory.decisions)
        self.decisions = DecisionBuffer()
        self.run = RunContext(
            audit=self.audit,
            approver=(
                self._on_caller(callbacks.approver)
                if callbacks.approver is not None and callbacks.approver_reads_terminal
                else callbacks.approver
            ),
            on_tool_start=callbacks.on_tool_start,
            on_tool_end=callbacks.on_tool_end,
            on_warning=callbacks.on_warning,
        )
        self.run.interrupts = interrupts
        self.on_token = callbacks.on_token
        # (mode, payload) of each graph step, "values" and "updates" (olav serve streams them)
        self.on_step: Callable[[str, Any], None] | None = callbacks.on_step
        # more of LangGraph's stream modes for on_step ("custom", "tasks", "checkpoints",
        # "debug"), per run; and the id of the message whose token on_token gets now
        self.step_modes: tuple[str, ...] = ()
        self._view = ShownText(None, self.run.rescue)  # the run's text as it streams
        self._from: str | None = None  # the checkpoint this run starts from (None: the last)
        self._model = model
        self._store = store if store_opener is None else store_opener(self.run)
        self.agent_name = agent
        self.session_id = uuid.uuid4().hex[:12]
        self._threads: ThreadStore | None = None
        self.thread_id = self.session_id
        if thread is not None:
            self.resume(thread)
        self._built: BuiltAgent | None = None
        self._recall = recall
        self._capture: dict[tuple[str, str], bool] = {}
        self._tools: set[str] = set()
        self._last_patterns: list[str] = []
        self._last_injected: tuple[str, list[str]] = ("", [])  # the last run, what it injected
        self.turns = 0
        self._background: list[Waitable] = []
        self._writer = shared_writer()
        self.hooks = hooks or Hooks()
        self.tools = dict(tools or {})

    @property
    def token_id(self) -> str:
        """The id of the message whose token ``on_token`` gets now."""
        return self._view.token_id

    @property
    def built(self) -> BuiltAgent:
        """The agent, built on first use (:meth:`build`)."""
        return self.build()

    def build(self) -> BuiltAgent:
        """Build the agent now (its graph, memory and embedder), so that a failure is the
        caller's at this point rather than the first request's; once."""
        if self._built is None:
            self._built = build(
                self.ws,
                self.run,
                agent=self.agent_name,
                store=self._store,
                model=self._model,
                tools=self.tools,
                checkpointer=self.threads.checkpointer,
                recall=self._recall,
            )
            self._read_skills()
        return self._built

    def _read_skills(self) -> None:
        """The SKILL.md facts that learning needs: the capture choices of every agent and
        the tools this session's agent can reach (its own, and its sub-agents')."""
        agents = load_agents(self.ws)
        reach = list(agents.values()) if self.agent_name == ORCHESTRATOR else []
        reach = reach or [agents[self.agent_name]]
        self._capture = capture_choices(list(agents.values()))
        self._tools = {tool for a in reach for tool in a.spec.tools}

    def switch_agent(self, agent: str) -> None:
        self.agent_name = agent
        self._built = None
        self.new_thread()

    @property
    def threads(self) -> ThreadStore:
        if self._threads is None:
            self._threads = ThreadStore.for_workspace(self.ws)
        return self._threads

    def new_thread(self) -> None:
        self.thread_id = new_thread_id()

    def resume(self, thread_id: str) -> ThreadInfo:
        """Continue a thread of this workspace (its agent becomes this session's)."""
        info = self.threads.get(thread_id)
        if info.agent and info.agent != self.agent_name:
            self.agent_name = info.agent
            self._built = None
        self.thread_id = info.id
        return info

    def seed(self, messages: list[Any]) -> None:
        """Put earlier messages into this (new) thread, as if they had been said in it: a
        client that sends the whole conversation each time (the OpenAI API) continues it."""
        if messages:
            self.built.graph.update_state(self._config(), {"messages": messages})

    def continue_last(self) -> ThreadInfo | None:
        """Continue this agent's most recent thread; None when it has none."""
        info = self.threads.last(self.agent_name)
        if info is not None:
            self.thread_id = info.id
        return info

    def answer(self, value: Any) -> TurnResult:
        """Continue a run that paused for a person's answer (an approval asked as an
        interrupt: olav serve), with ``value``; a new run of the same thread."""
        return self.ask(_resume_text(value), resume=value)

    def pending(self) -> list[dict[str, Any]]:
        """The interrupts this thread waits on ([] when none)."""
        state = self.built.graph.get_state(self._config())
        return [{"id": i.id, "value": i.value} for i in (state.interrupts or ())]

    def regenerate(self, checkpoint: str) -> TurnResult:
        """Run the thread again from ``checkpoint`` (one of its checkpoints), without a new
        request: a new branch that starts there (the request is the one it holds)."""
        state = self.built.graph.get_state(self._config(checkpoint))
        humans = [
            m for m in (state.values or {}).get("messages") or [] if isinstance(m, HumanMessage)
        ]
        text = message_text(humans[-1]) if humans else ""
        return self.ask(text, checkpoint=checkpoint, resume=None)

    def ask(
        self, text: str, *, resume: Any = _NO_RESUME, checkpoint: str | None = None
    ) -> TurnResult:
        """Run ``text`` on the thread (``checkpoint``: from that checkpoint of it, a new
        branch; with ``resume`` None as well, nothing is added: regenerate)."""
        built = self.built
        check_fits(built.window, text)
        aftermath.on_correction(self, text)  # the last run's patterns and memories answer
        claim = uuid.uuid4().hex
        owner = user_name(self.ws.config)
        self.threads.claim(self.thread_id, claim, self.agent_name, owner)  # one run per thread
        try:
            self._from = checkpoint
            return self._ask(built, text, claim, resume)
        finally:
            self.threads.release(self.thread_id, claim)

    def _ask(self, built: BuiltAgent, text: str, claim: str, resume: Any) -> TurnResult:
        with self.audit.batch():  # the run's start, in one opening of the audit
            self.decisions.drain(self.audit)  # the previous run's, off its reply path
            run_id = self.audit.start_run(
                self.agent_name, self.session_id, text, built.model_name, thread_id=self.thread_id
            )
            self.audit.message(run_id, "user", text)
        self.run.begin(run_id)
        first_recall = self.run.rescue.first_recall
        outcome = "failed"
        unreachable = False
        started = time.perf_counter()
        ending = ExitStack()
        try:
            final = self._stream(built, text, started, resume)
            waiting = self._waiting(built)
        except (KeyboardInterrupt, CancelledByPerson):
            outcome = "cancelled"
            kept = self._keep_cancelled(built)
            if kept:
                self.audit.message(run_id, "assistant", kept)
            self.audit.end_run(run_id, "cancelled", "cancelled by the user (Ctrl-C)")
            raise RunCancelled("cancelled") from None
        except OlavError as exc:
            self.audit.end_run(run_id, "error", exc.one_line())
            raise
        except Exception as exc:
            unreachable = never_reached(exc) and self.run.rescue.first_token_s is None
            raise self._model_failure(run_id, exc, built.model_name) from exc
        else:
            # the run's end (its answer, events, outcome and steps) in one opening of the audit
            ending.enter_context(self.audit.batch())
            if waiting:  # paused for a person's answer: nothing is final yet
                answer, outcome = "", "interrupted"
                self.audit.event(run_id, INTERRUPT_EVENT, {"interrupts": waiting})
                self.audit.end_run(run_id, "completed", outcome="interrupted")
            else:
                answer = message_text(final) if final is not None else ""
                outcome = aftermath.record_outcome(  # recorded, and what it amounts to
                    self.run,
                    self.audit,
                    run_id=run_id,
                    text=text,
                    answer=answer,
                    recalls=self.run.recalls[first_recall:],
                    tools=self._tools,
                )
        finally:
            # a cancelled run's steps are its request and what the person saw, both already
            # in the audit: the prompt comes back without a third write
            with ending:
                self._record_thread(built, text, run_id, steps=outcome != "cancelled")
            injected = [
                c.hit.record.id for r in self.run.recalls[first_recall:] for c in r.injected
            ]
            self._after_run(text, run_id, outcome, unreachable=unreachable, injected=injected)
        rescue = {**self.run.rescue.summary(), "seconds": round(time.perf_counter() - started, 3)}
        rescue["first_token_s"] = self.run.rescue.first_token_s
        return TurnResult(
            run_id=run_id,
            answer=answer,
            status="interrupted" if waiting else "completed",
            outcome=outcome,
            unshown=self._view.unshown(answer) if not waiting else "",
            rescue=rescue,
            interrupts=waiting,
        )

    def _waiting(self, built: BuiltAgent) -> list[dict[str, Any]]:
        """The interrupts the run stopped at (only a graph that can pause has any)."""
        if self.run.approver is None or not getattr(self.run, "interrupts", False):
            return []
        state = built.graph.get_state(self._config())
        return [{"id": i.id, "value": i.value} for i in (state.interrupts or ())]

    def _config(self, checkpoint: str | None = None) -> dict[str, Any]:
        where: dict[str, Any] = {"thread_id": self.thread_id}
        if checkpoint:
            where["checkpoint_id"] = checkpoint
        return {"configurable": where, "recursion_limit": RECURSION_LIMIT}

    def thread_messages(self) -> list[Any]:
        """The thread's messages as the checkpoint holds them."""
        state = self.built.graph.get_state(self._config())
        return list((state.values or {}).get("messages") or [])

    def _record_thread(
        self, built: BuiltAgent, text: str, run_id: str, *, steps: bool = True
    ) -> None:
        """After a run (finished or not): the thread's index catches up with its checkpoint,
        and the audit keeps the run's steps (olav.runtime.aftermath)."""
        aftermath.record_thread(
            built.graph,
            self._config(),
            self.threads,
            self.audit,
            text=text,
            run_id=run_id,
            branch=bool(self._from),
            steps=steps,
        )

    def _stream(
        self, built: BuiltAgent, text: str, started: float, resume: Any = None
    ) -> AIMessage | None:
        """Run the graph, streaming the top-level agent's tokens (without reasoning or a
        tool call written as text: olav.runtime.rescue.stream); the last AI message."""
        cancel = Cancel()
        config = {**self._config(self._from), "callbacks": [cancel]}
        final: AIMessage | None = None
        self._view = view = ShownText(self.on_token, self.run.rescue)
        modes = ["messages", "values", *(["updates"] if self.on_step else []), *self.step_modes]
        graph_input: Any = None  # resume None: again from the checkpoint (regenerate)
        if resume is _NO_RESUME:
            graph_input = {"messages": [HumanMessage(content=text)]}
        elif resume is not None:
            from langgraph.types import Command

            graph_input = Command(resume=resume)

        def produce(relay: Relay) -> Any:
            self._relay = relay
            return built.graph.stream(graph_input, config=config, stream_mode=modes)

        # the graph runs in a worker: Ctrl-C reaches this thread at once and stops the model
        # call itself (olav.runtime.cancel), instead of waiting for it to return
        for mode, payload in stream_in_worker(produce, cancel):
            if mode == "values":
                view.settled(payload)
            if self.on_step is not None and mode != "messages":
                self.on_step(mode, payload)
            if mode == "messages":
                chunk, meta = payload
                if isinstance(chunk, AIMessageChunk) and is_main(meta):
                    if view.retry(chunk, meta):
                        continue  # the rescue layer asked again: the answer shows once
                    view.token(chunk, started)
            elif mode == "values":
                msgs = payload.get("messages") or []
                if msgs and isinstance(msgs[-1], AIMessage):
                    final = msgs[-1]
        view.final_id = final.id if final is not None else None
        return final

    def _on_caller(
        self, approver: Callable[[str, dict[str, Any]], bool | ApprovalDecision]
    ) -> Callable[[str, dict[str, Any]], bool | ApprovalDecision]:
        """``approver`` asked on the thread that streams the run (the terminal's)."""

        def asked(name: str, args: dict[str, Any]) -> bool | ApprovalDecision:
            relay = getattr(self, "_relay", None)
            answer = relay.call(approver, name, args) if relay else approver(name, args)
            return answer if isinstance(answer, ApprovalDecision) else bool(answer)

        return asked

    def _keep_cancelled(self, built: BuiltAgent) -> str:
        """What the thread keeps of a cancelled run (olav.runtime.aftermath)."""
        return aftermath.keep_cancelled(built.graph, self._config(), self._view.seen())

    def _model_failure(self, run_id: str, exc: Exception, model_name: str) -> OlavError:
        """Record a run that the model (or the graph) broke; the error to raise instead."""
        self.audit.end_run(run_id, "error", f"{type(exc).__name__}: {exc}")
        log.error("run %s failed: %s: %s", run_id, type(exc).__name__, exc)
        answering = self.run.rescue.first_token_s is not None
        translated = translate_model_error(exc, self.ws.config, model_name, answering=answering)
        if translated is not None:
            return translated
        return ModelError(f"the run failed: {type(exc).__name__}: {exc}")

    def _after_run(
        self, text: str, run_id: str, outcome: str, *, unreachable: bool = False, injected: Any = ()
    ) -> None:
        """The run's bookkeeping. Only what is cheap happens here; embeddings and writes go
        to the background writer (olav.memory.store.writer), in order, and nobody waits for them
        before the next prompt. What the run injected answers for its outcome."""
        for rec in self.built.recallers.values():
            rec.flush(bumps=(self.turns + 1) % BUMP_EVERY_N_TURNS == 0, wait=False)
        self._last_injected = (run_id, list(injected))
        aftermath.judge_injected(self._writer, self.store, self._last_injected, outcome, self)
        self._capture_run(text, run_id, outcome)
        self._run_hooks(run_id, outcome, unreachable=unreachable)
        self.turns += 1
        if self.turns % policy_for(self.ws.config).episode_every_turns == 0:
            self._writer.submit("episode", self.write_episode)
        self._writer.submit("memory maintenance", self._maintain)

    @property
    def store(self) -> Any:
        return next(iter(self.built.recallers.values())).store

    def _capture_run(self, text: str, run_id: str, outcome: str) -> None:
        """L1 capture after every run, on the background writer (olav.runtime.aftermath)."""
        used = aftermath.capture_run(
            self.run,
            config=self.ws.config,
            declared=self._capture,
            writer=self._writer,
            store=self.store,
            decisions=self.decisions,
            text=text,
            run_id=run_id,
            outcome=outcome,
        )
        if used is not None:
            self._last_patterns = used

    def _run_hooks(self, run_id: str, outcome: str, *, unreachable: bool = False) -> None:
        """The composer's after-run hooks; what they start is waited for by wait_background.
        ``unreachable``: the run failed because the model server could not be reached."""
        end = RunEnd(self.ws, self.store, run_id, outcome, model_unreachable=unreachable)
        self._background.extend(self.hooks.run_after(end))

    def _maintain(self) -> None:
        """The memory table's maintenance, on the writer after the run's own writes."""
        aftermath.maintain(self.store)

    def write_episode(self) -> str | None:
        """Store this session's episode (what was asked, done, left open)."""
        if self._built is None or self.turns == 0:
            return None
        return aftermath.episode(self, self.store)

    def close(self) -> None:
        """End of the session: write pending access counts, wait for the background writes
        and learning, and write the episode."""
        self.wait_background()
        self.write_episode()
        self.decisions.drain(self.audit)
        self.release()

    def release(self) -> None:
        """Close the thread store's connections (its file's, or the PostgreSQL server's): the
        end of ``olav ask``, which writes no episode, and of ``close``. A session used after
        this opens them again."""
        threads, self._threads = self._threads, None
        if threads is not None:
            self._built = None  # its graph holds the checkpointer closed here
            threads.close()

    def wait_background(self, timeout: float = 120.0) -> None:
        """Wait for the memory writes of the runs so far (captures, bumps, the recall log)
        and for the background work the after-run hooks started (clean exit, tests)."""
        if self._built is not None:
            for rec in self._built.recallers.values():
                rec.flush()
        self._writer.flush(timeout)
        pending, self._background = self._background, []
        for thread in pending:
            thread.join(timeout)
        self.decisions.drain(self.audit)
