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


def gc_workspace(ws: Any, store: Any = None) -> Any:
    """Memory's gc pass (olav.memory.lifecycle.decay.gc) with the workspace's policy, its
    lifecycle decisions in the workspace's audit: `olav memory gc` and the `gc` job."""
    from olav.audit.queries import last_decision_at
    from olav.audit.recorder import AuditRecorder
    from olav.memory.lifecycle.archive import enforce_capacity
    from olav.memory.lifecycle.decay import gc
    from olav.memory.policy import policy_for
    from olav.memory.store.table import MemoryStore

    store = store if store is not None else MemoryStore.for_workspace(ws)
    since = last_decision_at(ws.audit_path, "lifecycle", "collected")
    log = AuditRecorder(ws.audit_path)
    policy = policy_for(ws.config)
    report = gc(store, policy=policy, log=log, since=since)
    report.archived = len(enforce_capacity(store, policy, log=log))
    return report


def run_gc(ws: Any) -> str:
    """The `gc` cron job."""
    report = gc_workspace(ws)
    return (
        f"purged {report.expired_purged} expired rows; {report.rows_after} rows remain; "
        "old versions cleaned"
    )
