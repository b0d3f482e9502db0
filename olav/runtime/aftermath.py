"""After a run: its record, and what memory learns from it.

- The record: the answer, the reasoning apart from it, and the outcome in the audit
  (:func:`record_outcome`); the thread's index caught up with its checkpoint and the run's
  steps (:func:`record_thread`).
- What memory learns, off the person's reply path: L1 capture of the run's tool calls
  (:mod:`olav.memory.ingest.capture`), the table's maintenance, and the session's episode.
  Each runs on the background writer (:mod:`olav.memory.store.writer`), in order.

None of it may break the chat: a failure is one log line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from olav.audit.queries import NARRATED_EVENT
from olav.core.log import get_logger
from olav.memory.ingest.capture import apply_capture, plan_capture
from olav.memory.policy import policy_for
from olav.memory.store.scopes import private_scope
from olav.runtime.builder import MemoryOff
from olav.runtime.outcome import DIRECTIVE_CATEGORIES, classify, directive, named_tools
from olav.runtime.rescue.middleware import REASONING_ROLE, RUN_STATS_EVENT

log = get_logger("runner")
CANCELLED_NOTE = "(cancelled by the user)"  # ends what a cancelled run's thread keeps


def keep_cancelled(graph: Any, config: dict[str, Any], seen: str) -> str:
    """A cancelled run's thread keeps what the person saw of the answer (``seen``), marked as
    cancelled, as the run's last message: the next request is a turn of its own, and the
    model knows the answer before it was cut off. Returns that message ("" if not kept)."""
    text = f"{seen}\n\n{CANCELLED_NOTE}" if seen else CANCELLED_NOTE
    try:
        state = graph.get_state(config)
        messages = list((state.values or {}).get("messages") or [])
        if not messages or not isinstance(messages[-1], HumanMessage):
            return ""  # cancelled after its answer was kept (or before the request was)
        note = AIMessage(content=text, response_metadata={"olav_cancelled": True})
        graph.update_state(config, {"messages": [note]})
    except Exception as exc:  # the thread stays as it was; the run is cancelled anyway
        thread_id = config["configurable"]["thread_id"]
        log.warning("thread %s: the cancelled answer was not kept: %s", thread_id, exc)
        return ""
    return text


def record_outcome(
    ran: Any,
    audit: Any,
    *,
    run_id: str,
    text: str,
    answer: str,
    recalls: Sequence[Any],
    tools: set[str],
) -> str:
    """Record the answer and the outcome of a run that completed (``ran``: its RunContext;
    ``recalls``: this run's recall results; ``tools``: the tools the agent can reach);
    returns the outcome. Reasoning goes to the audit apart from the answer; a run the loop
    guard stopped ends ``tool_error``."""
    for thought in ran.rescue.reasoning:
        audit.message(run_id, REASONING_ROLE, thought)
    audit.message(run_id, "assistant", answer)
    recalled = [
        directive(c.hit.record)
        for result in recalls
        for c in result.injected
        if c.hit.record.category in DIRECTIVE_CATEGORIES
    ]
    named = named_tools(recalled, text, tools)
    outcome = classify("completed", text, ran.tool_events, named)
    if ran.rescue.loop_stopped:
        outcome = "tool_error"
    audit.event(run_id, RUN_STATS_EVENT, ran.rescue.summary())
    if outcome == "narrated":  # what trace_learner needs to name the tool to call
        audit.event(run_id, NARRATED_EVENT, {"named_tools": named, "tools": sorted(tools)})
    audit.end_run(run_id, "completed", outcome=outcome)
    return outcome


def record_thread(
    graph: Any,
    config: dict[str, Any],
    threads: Any,
    audit: Any,
    *,
    text: str,
    run_id: str,
    branch: bool,
    steps: bool = True,
) -> None:
    """After a run (finished or not): the thread's index catches up with its checkpoint
    (``branch``: the run started from an earlier checkpoint, so the index is its messages),
    and the audit keeps the run's ``steps``. Neither may break the run."""
    thread_id = config["configurable"]["thread_id"]
    try:
        messages = list((graph.get_state(config).values or {}).get("messages") or [])
        threads.sync(thread_id, messages, since=0 if branch else None)
        start = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if isinstance(messages[i], HumanMessage) and messages[i].content == text
            ),
            None,
        )
        if start is None:  # the answer to an interrupt: the run it continues, whole
            humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
            start = humans[-1] if humans else None
        if start is not None and steps:
            audit.steps(run_id, messages[start:])
    except Exception as exc:
        log.warning("thread %s not indexed after run %s: %s", thread_id, run_id, exc)


def capture_run(
    ran: Any,
    *,
    config: Any,
    declared: Any,
    writer: Any,
    store: Any,
    decisions: Any,
    text: str,
    run_id: str,
    outcome: str,
) -> list[str] | None:
    """Plan the capture of run ``run_id`` (``ran``: its RunContext, with its tool events;
    ``declared``: the skills' capture choices) and hand it to ``writer``. Returns the patterns
    the run used (new or already stored: a correction in the next request invalidates them),
    None when the plan failed."""
    finished = outcome not in ("failed", "cancelled")
    try:
        plan = plan_capture(
            ran.tool_events,
            question=text if finished else "",
            run_id=run_id,
            declared=declared,
            scope=private_scope(config),
            policy=policy_for(config),
            evidence=outcome == "completed",  # confirms an earlier run's same action
        )
    except Exception as exc:  # learning must never break the chat
        log.warning("capture failed for run %s: %s", run_id, exc)
        return None
    if plan:
        writer.submit(f"capture of run {run_id}", apply_capture, store, plan, decisions)
    return list(plan.pattern_ids)


def on_correction(session: Any, text: str) -> None:
    """When ``text`` corrects the session's last answer: the query patterns that run used are
    invalidated, the memories it injected suppressed (olav.memory.lifecycle.outcomes). Either
    way the last run's lists are cleared: a correction speaks of the answer just before it."""
    from olav.memory.ingest.capture import CORRECTION, invalidate_ids
    from olav.memory.lifecycle.outcomes import corrected

    last_run, injected = session._last_injected
    if CORRECTION.search(text) and (session._last_patterns or injected):
        session.decisions.drain(session.audit)  # the previous run's, before the correction's
        why = "the user corrected its SQL in the next message"
        invalidate_ids(session.store, session._last_patterns, session.audit, reason=why)
        corrected(session.store, injected, run_id=last_run, log=session.audit)
    session._last_patterns = []
    session._last_injected = ("", [])


def judge_injected(
    writer: Any, store: Any, last: tuple[str, list[str]], outcome: str, session: Any
) -> None:
    """The memories run ``last[0]`` injected (``last[1]``) answer for its ``outcome``: a run
    that went wrong weakens them and, past the policy's count, suppresses them, on the
    background writer (olav.memory.lifecycle.outcomes)."""
    from olav.memory.lifecycle.outcomes import BAD_OUTCOMES, bad_run

    run_id, injected = last
    if not injected or outcome not in BAD_OUTCOMES or isinstance(store, MemoryOff):
        return
    policy = policy_for(session.ws.config)
    writer.submit(
        f"outcome of run {run_id}",
        bad_run,
        store,
        list(injected),
        run_id=run_id,
        outcome=outcome,
        policy=policy,
        log=session.decisions,
    )


def maintain(store: Any) -> None:
    """Compact the memory table once writes (captures, access-count bumps) have left it in
    many small fragments; each one slows every search. Then reload the in-process vector
    snapshot, so that the next request finds it current."""
    if isinstance(store, MemoryOff):
        return
    try:
        if store.needs_maintenance():
            store.maintain()
        store.maintenance.refresh_snapshot()
    except Exception as exc:  # another process may hold the lock; try next time
        log.warning("memory maintenance failed: %s", exc)


def episode(session: Any, store: Any) -> str | None:
    """Store the session's episode (what was asked, done, left open); its id, or None."""
    from olav.audit.queries import runs_tool_calls, session_runs
    from olav.memory.recall.episodes import SessionLog, write_episode

    try:
        runs = session_runs(session.audit.path, session.session_id)
        calls = runs_tool_calls(session.audit.path, [r[0] for r in runs])
        log_rows = SessionLog(session.session_id, runs, calls)
        policy = policy_for(session.ws.config)
        return write_episode(
            store,
            log_rows,
            session.agent_name,
            scope=private_scope(session.ws.config),  # it quotes its operator's requests
            policy=policy,
            decisions=session.decisions,
        )
    except Exception as exc:  # an episode is a nicety; never break the chat for it
        log.warning("episode for session %s not written: %s", session.session_id, exc)
        return None
