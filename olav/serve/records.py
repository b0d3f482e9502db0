"""The runs of ``olav serve`` as the thread store's database keeps them (``olav_runs``): each
Agent Protocol run's status and the server process that ran it, so that a run id outlives its
server (a restart, or another server on the same database). The server declares the table and
migrates it (:meth:`ThreadStore.keep_beside`); a deleted thread takes its runs along, whoever
deletes it, because the table is keyed by ``thread_id``."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from olav.runtime.threads import ThreadStore
from olav.runtime.threads.model import dump_object, load_object, marks

UNFINISHED = ("pending", "running")

RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS olav_runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    kwargs TEXT NOT NULL DEFAULT '{}',
    multitask_strategy TEXT NOT NULL DEFAULT 'reject',
    created_at {real} NOT NULL,
    updated_at {real} NOT NULL,
    server_pid INTEGER,
    server_host TEXT NOT NULL DEFAULT '',
    error TEXT NOT NULL DEFAULT '',
    events INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS olav_runs_thread ON olav_runs (thread_id, created_at);
"""
# a table made before the stream's event numbers were kept (RunRecord.events)
EVENTS_COLUMN = "ALTER TABLE olav_runs ADD COLUMN events INTEGER NOT NULL DEFAULT 0"
_COLUMNS = (
    "run_id, thread_id, assistant_id, owner, status, metadata, kwargs, multitask_strategy, "
    "created_at, updated_at, server_pid, server_host, error, events"
)


@dataclass(frozen=True)
class RunRecord:
    """A run of ``olav serve`` as the store keeps it: enough to answer a GET of it after its
    server is gone, and to tell whether that server still runs it."""

    run_id: str
    thread_id: str
    assistant_id: str
    owner: str  # the operator whose run it is (the thread's owner)
    status: str  # pending | running | success | error | interrupted | timeout
    created_at: float
    updated_at: float
    metadata: dict[str, Any] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)  # the run's options (stream_mode)
    multitask_strategy: str = "reject"
    pid: int | None = field(default_factory=os.getpid)  # the server process that ran it
    host: str = field(default_factory=socket.gethostname)
    error: str = ""  # why it failed or was interrupted
    # the stream event numbers its server had reserved: it sent none above this one, so a
    # stream replayed after that server numbers its events from here on
    events: int = 0


class RunRecords:
    """The kept runs, on a :class:`~olav.runtime.threads.ThreadStore`'s database."""

    def __init__(self, threads: ThreadStore) -> None:
        self.threads = threads
        threads.keep_beside(RUNS_SCHEMA, self._migrate)

    @staticmethod
    def _migrate(con: Any, columns: Callable[[str], set[str]]) -> None:
        if "events" not in columns("olav_runs"):
            con.execute(EVENTS_COLUMN)

    def record(self, run: RunRecord) -> None:
        """Keep ``run`` (a run accepted), or bring its status up to date."""
        with self.threads.transaction() as con:
            con.execute(
                f"INSERT INTO olav_runs ({_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
                "updated_at = excluded.updated_at, error = excluded.error, "
                "server_pid = excluded.server_pid, server_host = excluded.server_host, "
                "events = excluded.events",
                [
                    run.run_id,
                    run.thread_id,
                    run.assistant_id,
                    run.owner,
                    run.status,
                    dump_object(run.metadata),
                    dump_object(run.kwargs),
                    run.multitask_strategy,
                    run.created_at,
                    run.updated_at,
                    run.pid,
                    run.host,
                    run.error,
                    run.events,
                ],
            )

    def reserve_events(self, run_id: str, events: int) -> None:
        """A kept run's server may now send stream events numbered up to ``events``."""
        with self.threads.transaction() as con:
            con.execute(
                "UPDATE olav_runs SET events = ? WHERE run_id = ? AND events < ?",
                [events, run_id, events],
            )

    def update(
        self,
        run_id: str,
        status: str,
        error: str = "",
        *,
        only_from: Sequence[str] = (),
    ) -> bool:
        """Set a kept run's status (``only_from``: only while it is one of these); whether a
        run was changed. A run whose thread was deleted is not kept again."""
        sql = "UPDATE olav_runs SET status = ?, error = ?, updated_at = ? WHERE run_id = ?"
        params: list[Any] = [status, error, time.time(), run_id]
        if only_from:
            sql += f" AND status IN ({marks(only_from)})"
            params += list(only_from)
        with self.threads.transaction() as con:
            return bool(con.execute(sql, params).rowcount)

    def get(
        self, run_id: str, *, thread_id: str | None = None, owner: str | None = None
    ) -> RunRecord | None:
        """A kept run by its exact id (``thread_id``, ``owner``: only when it is that thread's
        and that operator's)."""
        sql = f"SELECT {_COLUMNS} FROM olav_runs WHERE run_id = ?"
        params: list[Any] = [run_id]
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params.append(thread_id)
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        rows = self.threads.query(sql, params)
        return _record(rows[0]) if rows else None

    def of_thread(
        self,
        thread_id: str,
        *,
        owner: str | None = None,
        status: Sequence[str] = (),
        limit: int = 10,
        offset: int = 0,
    ) -> list[RunRecord]:
        """A thread's kept runs, newest first (``status``: only those in one of these)."""
        sql = f"SELECT {_COLUMNS} FROM olav_runs WHERE thread_id = ?"
        params: list[Any] = [thread_id]
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        if status:
            sql += f" AND status IN ({marks(status)})"
            params += list(status)
        sql += " ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?"
        params += [limit, offset]
        return [_record(r) for r in self.threads.query(sql, params)]


def _record(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        thread_id=row[1],
        assistant_id=row[2],
        owner=row[3],
        status=row[4],
        metadata=load_object(row[5]),
        kwargs=load_object(row[6]),
        multitask_strategy=row[7],
        created_at=row[8],
        updated_at=row[9],
        pid=row[10],
        host=row[11],
        error=row[12],
        events=int(row[13] or 0),
    )
