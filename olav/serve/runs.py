"""Runs on the server (:class:`RunManager`): one run per thread, each on a worker thread, with
a session from the pool (:mod:`olav.serve.pool`) and its events (:mod:`olav.serve.run`). One
run per thread: a second one is refused (409) or, when the client asks for
``multitask_strategy: enqueue``, waits for the first; across processes the thread store's claim
enforces the same rule.

Every run is also kept in the thread store (``olav_runs``) when it is accepted and at each change
of its status, so a GET of it, a list of its thread's runs and a join still find it after a
restart, or on another server that shares the threads database. A kept run that says it is
pending or running, though the server that ran it is gone, is reported, and recorded, ``error``.
The store also keeps how far the run's event numbers may have gone (reserved a block ahead,
so that a stream costs a write every ``RESERVE`` events, not every token): a stream of the run
replayed after its server numbers its events after every one a client can have seen, and a
``Last-Event-ID`` resumes it exactly.

A run is its operator's: every lookup (a run, a thread's runs) names the operator, and another
operator's run is not found. Deleting a thread forgets its runs here and in the store.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from olav.audit.events import CLIENT_USER_EVENT
from olav.core.errors import OlavError
from olav.core.log import get_logger
from olav.core.procs import pid_alive
from olav.runtime.threads import ThreadNotFoundError, ThreadStore
from olav.serve.approvals import end_wait
from olav.serve.limits import WORKERS, OperatorSlots
from olav.serve.pool import SessionPool
from olav.serve.records import UNFINISHED, RunRecord, RunRecords
from olav.serve.run import RESERVE, ClientCancelled, Run, dump_values, epoch, now_iso

log = get_logger("serve.runs")
KEEP_FINISHED = 512  # finished runs kept for join, reconnect and GET
POLL_S = 0.5  # how often a join of a run that another server runs reads its status again
STOPPED = {  # why a kept run whose server is gone ended, by the status it was left in
    "pending": "the server stopped before it started",
    "running": "the server stopped while it ran",
}


class BusyError(OlavError):
    pass


class RunManager:
    def __init__(
        self, pool: SessionPool, threads: ThreadStore, slots: OperatorSlots | None = None
    ) -> None:
        self.pool = pool
        self.threads = threads
        self.records = RunRecords(threads)  # the runs kept beside the threads
        self._runs: dict[str, Run] = {}
        self._active: dict[str, str] = {}  # thread id -> its running run
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        # at most WORKERS runs at once, and a few of one operator's (the others wait, pending,
        # a bounded number per operator: OperatorSlots). Each run has a daemon thread: a model
        # call that hangs never keeps a stopped server's process alive
        self.slots = slots or OperatorSlots(WORKERS, 0)

    def runs_of(self, thread_id: str, owner: str) -> list[Run]:
        """This server's runs of the thread that are ``owner``'s."""
        with self._lock:
            return [
                r for r in self._runs.values() if r.thread_id == thread_id and r.operator == owner
            ]

    def delete_thread(self, thread_id: str) -> Any:
        """Delete the thread (its checkpoints, turns and kept runs: ThreadStore.delete) and
        forget its runs here, so whoever makes a thread with its id later finds none of
        them. Returns the thread as it was."""
        info = self.threads.delete(thread_id)
        with self._lock:
            for run_id in [r.run_id for r in self._runs.values() if r.thread_id == thread_id]:
                del self._runs[run_id]
            self._locks.pop(thread_id, None)
        return info

    # -- the runs kept in the thread store ------------------------------------------------------

    def find(self, thread_id: str, run_id: str, owner: str, *, known_as: str) -> Run | None:
        """The thread's run (``thread_id``: its key; ``known_as``: its id as ``owner`` knows
        it), ``owner``'s only: this server's, else one the store keeps."""
        run = self._runs.get(run_id)
        if run is not None:
            return run if run.thread_id == thread_id and run.operator == owner else None
        rec = self.records.get(run_id, thread_id=thread_id, owner=owner)
        return Run.from_record(self._settle(rec), known_as) if rec is not None else None

    def thread_runs(
        self,
        thread_id: str,
        owner: str,
        *,
        known_as: str,
        limit: int = 10,
        offset: int = 0,
        status: str | None = None,
    ) -> list[Run]:
        """The thread's runs, newest first: this server's, and the ones the store keeps."""
        for rec in self.records.of_thread(thread_id, owner=owner, status=UNFINISHED, limit=1000):
            self._settle(rec)
        mine = self.runs_of(thread_id, owner)
        kept = self.records.of_thread(
            thread_id,
            owner=owner,
            status=(status,) if status else (),
            limit=offset + limit + len(mine),
        )
        found = {rec.run_id: Run.from_record(rec, known_as) for rec in kept}
        found.update({run.run_id: run for run in mine})
        runs = sorted(found.values(), key=lambda r: epoch(r.created_at), reverse=True)
        return [r for r in runs if status in (None, r.status)][offset : offset + limit]

    async def finished(self, run: Run) -> Run:
        """A kept run once it has finished: another server runs it, so its status is read
        from the store again every ``POLL_S`` (a run of this server is returned as it is)."""
        import anyio

        while run.stored and run.status in UNFINISHED:
            await anyio.sleep(POLL_S)
            again = await anyio.to_thread.run_sync(self._again, run)
            if again is None:
                raise ThreadNotFoundError(f"run {run.run_id} is gone: its thread was deleted")
            run = again
        return run

    def _again(self, run: Run) -> Run | None:
        """A kept run read from the store again (None: its thread was deleted)."""
        return self.find(run.thread_id, run.run_id, run.operator, known_as=run.known_as)

    def _settle(self, rec: RunRecord) -> RunRecord:
        """A kept run that says it is pending or running, though its server is gone, is
        ``error``, with the reason: in the store too, so that every server says the same."""
        if rec.status not in UNFINISHED or not self._orphaned(rec):
            return rec
        why = (
            f"{STOPPED[rec.status]} (pid {rec.pid} on {rec.host or 'an unknown host'}); "
            "the thread keeps its last completed step"
        )
        self.records.update(rec.run_id, "error", why, only_from=UNFINISHED)
        return self.records.get(rec.run_id) or rec

    def _orphaned(self, rec: RunRecord) -> bool:
        """Whether the server process that kept ``rec`` is gone. This process's runs in
        progress are all in memory, so one it does not hold is an earlier process's (with the
        same pid); another process of this machine is gone when its pid is; one of another
        machine cannot be seen, so it is gone when no live run holds its thread (the claim)."""
        if rec.run_id in self._runs:
            return False
        if rec.host == socket.gethostname():
            return rec.pid is None or rec.pid == os.getpid() or not pid_alive(int(rec.pid))
        return not self.threads.held(rec.thread_id)

    def _keep(self, run: Run) -> None:
        """The run, accepted, in the store (a stateless run's thread is deleted with it: it
        is not kept). A store that fails costs the run nothing but its durability."""
        if run.stateless:
            return
        run.reserved = RESERVE  # the first block of event numbers, with the run itself
        run.reserve = lambda upto: self.records.reserve_events(run.run_id, upto)
        try:
            self.records.record(run.record())
        except Exception as exc:
            log.warning("run %s: not kept in the thread store (%s)", run.run_id, exc)

    def _note(self, run: Run) -> None:
        """The run's new status in the store."""
        if run.stateless:
            return
        try:
            self.records.update(run.run_id, run.status, run.error)
        except Exception as exc:
            log.warning("run %s: its status %s not kept (%s)", run.run_id, run.status, exc)

    def active(self, thread_id: str) -> Run | None:
        """The thread's run in progress, else one accepted that waits for its turn."""
        with self._lock:
            rid = self._active.get(thread_id)
            if rid and rid in self._runs:
                return self._runs[rid]
            return next(
                (
                    r
                    for r in self._runs.values()
                    if r.thread_id == thread_id and not r.done.is_set()
                ),
                None,
            )

    def start(self, run: Run, on_done: Callable[[Run], None] | None = None) -> Run:
        """Queue ``run``; :class:`BusyError` when its thread runs another and the client did
        not ask to enqueue; :class:`~olav.serve.limits.TooMany` when its operator has as many
        runs running and waiting as the limits allow."""
        with self._lock:
            # busy from the moment a run is accepted, not from when its worker starts: two
            # requests at once never both get in
            other = next(
                (
                    r
                    for r in self._runs.values()
                    if r.thread_id == run.thread_id and not r.done.is_set()
                ),
                None,
            )
            if other is not None and run.multitask_strategy != "enqueue":
                raise BusyError(
                    f"thread {run.known_as} already has a run in progress ({other.run_id})",
                    hint="One run per thread: wait for it (join), cancel it, or send "
                    "multitask_strategy 'enqueue'",
                )
            self.slots.admit(run.operator)
            self._runs[run.run_id] = run
            self._forget_old()
            lock = self._locks.setdefault(run.thread_id, threading.Lock())
        self._keep(run)
        run.emit("metadata", {"run_id": run.run_id, "attempt": 1})
        worker = threading.Thread(
            target=self._execute,
            args=(run, lock, on_done),
            name=f"olav-run-{run.run_id[:8]}",
            daemon=True,
        )
        try:
            worker.start()
        except BaseException:
            self.slots.release(run.operator)
            raise
        return run

    def _forget_old(self) -> None:
        finished = [r for r in self._runs.values() if r.done.is_set()]
        for run in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            self._runs.pop(run.run_id, None)

    def _execute(
        self, run: Run, lock: threading.Lock, on_done: Callable[[Run], None] | None
    ) -> None:
        try:
            self._execute_in_slot(run, lock, on_done)
        finally:
            self.slots.release(run.operator)

    def _execute_in_slot(
        self, run: Run, lock: threading.Lock, on_done: Callable[[Run], None] | None
    ) -> None:
        # enqueued runs wait here for the one before them, then for a slot of their operator's
        with lock, self.slots.slot(run.operator):
            with self._lock:
                self._active[run.thread_id] = run.run_id
            try:
                self._run(run)
                if not run.done.is_set():  # else stop() ended it, and kept that
                    self._note(run)
            finally:
                with self._lock:
                    if self._active.get(run.thread_id) == run.run_id:
                        del self._active[run.thread_id]
                if on_done is not None:
                    try:
                        on_done(run)
                    except Exception:
                        log.exception("after run %s", run.run_id)
                run.close()

    def _run(self, run: Run) -> None:
        from olav.runtime.runner import RunCancelled

        if run.cancel.is_set():
            run.finish("interrupted")
            return
        run.status = "running"
        run.updated_at = now_iso()
        self._note(run)
        started = time.perf_counter()
        try:
            with self.pool.session(run.operator, run.assistant_id) as pooled:
                pooled.sink.run = run
                session = pooled.session
                session.run.asked = dict(run.asked)  # every run sets it: a pooled one's is gone
                session.thread_id = run.thread_id
                session.step_modes = run.graph_modes()
                run.on_start()
                if run.history:
                    session.seed(run.history)
                if run.resume is not None:
                    result = session.answer(run.resume)
                elif run.resolve:
                    result = end_wait(session, run)
                elif run.checkpoint and not run.text:
                    result = session.regenerate(run.checkpoint)
                else:
                    result = session.ask(run.text, checkpoint=run.checkpoint)
                run.interrupts = list(result.interrupts)
                if run.interrupts:
                    run.values = {**run.values, "__interrupt__": run.interrupts}
                    if "updates" in run.stream_modes:
                        run.emit("updates", {"__interrupt__": run.interrupts})
                    if "values" in run.stream_modes:
                        run.emit("values", run.values)
                run.answer, run.outcome = result.answer, result.outcome
                run.unshown, run.usage = result.unshown, dict(result.rescue)
                run.audit_run_id = result.run_id
                if run.metadata.get("end_user") and result.run_id:  # /v1's user: who asked
                    detail = {"end_user": run.metadata["end_user"]}
                    session.audit.event(result.run_id, CLIENT_USER_EVENT, detail)
                if not run.values:
                    run.values = dump_values({"messages": session.thread_messages()})
                run.on_end()
            run.finish("success")
        except (RunCancelled, ClientCancelled):
            run.error = "cancelled by the client"
            run.finish("interrupted")
        except OlavError as exc:  # a busy thread's names its key: the client sees its id
            run.error = _shown(run, exc.one_line())
            run.emit("error", {"error": type(exc).__name__, "message": run.error})
            run.finish("error")
        except Exception as exc:  # a run's failure is the client's to see, not the server's
            log.exception("run %s failed", run.run_id)
            run.error = _shown(run, f"{type(exc).__name__}: {exc}")
            run.emit("error", {"error": type(exc).__name__, "message": run.error})
            run.finish("error")
        finally:
            log.info(
                "run %s %s in %.0f ms",
                run.run_id,
                run.status,
                (time.perf_counter() - started) * 1000,
            )

    def cancel(self, run: Run) -> None:
        run.cancel.set()

    def stop(self) -> None:
        """The server is stopping: every run not ended is cancelled and ended now
        (``interrupted``, after an ``error`` event that says why), so its streams and joins
        end instead of holding the shutdown up for as long as a model call lasts. The thread
        keeps its last completed step, as after a ``kill -9``."""
        with self._lock:
            running = [r for r in self._runs.values() if not r.done.is_set()]
        for run in running:
            run.cancel.set()
            run.error = "the server stopped; the thread keeps its last completed step"
            run.emit("error", {"error": "ServerStopped", "message": run.error})
            run.finish("interrupted")
            self._note(run)
            run.close()

    def shutdown(self) -> None:
        self.stop()
        self.pool.close()


def _shown(run: Run, text: str) -> str:
    """An error's ``text`` with the run's thread named by the id its client knows, not its key
    (a thread busy in another process names its key)."""
    return text.replace(run.thread_id, run.known_as)
