"""Conversations that last: every conversation is a thread, kept in one SQLite file under
``.olav/databases/threads.sqlite``, or, for a team whose servers share their threads, in a
PostgreSQL database (``threads.uri: postgresql://…``).

Two things share that file (or database):

- **LangGraph's checkpoints** (``langgraph-checkpoint-sqlite``): the agent graph's state after
  every step, which is what the model sees when a thread continues. A ``kill -9`` mid-run leaves
  the thread at its last completed step.
- **olav's index of threads** (``olav_threads``, ``olav_turns``): who a thread belongs to, its
  name, its turns as text for listing, showing and searching without unpickling checkpoints,
  and the claim that makes a thread run one run at a time.
- **the runs of ``olav serve``** (``olav_runs``): each Agent Protocol run's status and the
  server process that ran it, so that a run id outlives its server (a restart, or another
  server on the same database).

One active run per thread (the Agent Protocol's rule): :meth:`ThreadStore.claim` takes the thread
in an immediate transaction, so a second process that tries to run it at the same moment gets
:class:`ThreadBusyError`. A claim left by a process that died (``kill -9``) is taken over once
that process is gone.

The file is opened in WAL mode with a busy timeout, so processes that write at once wait for each
other instead of failing. In PostgreSQL the claim is also a session advisory lock held by the
claiming process's connection: the server drops it the moment that process dies, on whatever
machine it ran, so a crashed host's claim is taken over at once instead of holding forever.

The schema carries a version (``olav_meta``): a file from an older olav, or one that holds only
checkpoints, is migrated in place, and its threads are indexed from the checkpoints; nothing is
dropped (version 1 is the index of threads, version 2 adds ``olav_runs``, version 3 the
number of stream events each run may have sent). Processes that set up a new PostgreSQL
database at once take turns (an advisory lock).

A thread id is its owner's from the moment it is made: :meth:`ThreadStore.insert` makes the row
and tells who owns it in one transaction, so of two processes that make one id at once exactly
one gets it, and the other is told (:class:`ThreadExistsError` when it is another operator's).
Deleting a thread deletes its checkpoints, its turns and its runs, so an id taken again later
shows nothing of its earlier owner.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError
from olav.core.private import private_file
from olav.core.procs import pid_alive

SCHEMA_VERSION = 3
BUSY_TIMEOUT_MS = 10_000
PREVIEW_CHARS = 80
TOOL_TEXT_CHARS = 2000  # a tool result in the index (search and show); the checkpoint has all


class ThreadBusyError(OlavError):
    pass


class ThreadNotFoundError(OlavError):
    pass


class ThreadExistsError(OlavError):
    """A thread with this id exists and is another operator's (olav serve answers 409)."""


@dataclass(frozen=True)
class ThreadInfo:
    id: str
    agent: str
    owner: str  # the operator whose conversation it is ('' for one indexed from checkpoints)
    name: str
    created_at: float
    updated_at: float
    turns: int  # the person's messages
    preview: str  # the first of them
    running: str  # the run that holds the thread now ("" when none)
    metadata: dict[str, Any] = field(default_factory=dict)  # a client's (olav serve)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent": self.agent,
            "owner": self.owner,
            "name": self.name,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "turns": self.turns,
            "preview": self.preview,
            "running": self.running,
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class Turn:
    seq: int
    role: str  # user | assistant | tool
    content: str
    name: str = ""  # the tool's name, for tool messages and calls
    created_at: float = 0.0


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


UNFINISHED = ("pending", "running")


@dataclass(frozen=True)
class ThreadHit:
    thread: ThreadInfo
    turn: Turn
    before: Turn | None
    after: Turn | None


_OLAV_SCHEMA = """
CREATE TABLE IF NOT EXISTS olav_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS olav_threads (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL DEFAULT '',
    created_at {real} NOT NULL,
    updated_at {real} NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    preview TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    run_id TEXT,
    run_pid INTEGER,
    run_host TEXT,
    run_since {real}
);
CREATE INDEX IF NOT EXISTS olav_threads_agent ON olav_threads (agent, updated_at);
CREATE TABLE IF NOT EXISTS olav_turns (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL,
    created_at {real} NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
"""

# version 2: the runs of olav serve
_RUNS_SCHEMA = """
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
    error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS olav_runs_thread ON olav_runs (thread_id, created_at);
"""

# version 3: the stream event numbers a run's server reserved (RunRecord.events)
_EVENTS_COLUMN = "ALTER TABLE olav_runs ADD COLUMN events INTEGER NOT NULL DEFAULT 0"


def new_thread_id() -> str:
    return uuid.uuid4().hex[:12]


# -- the two databases -------------------------------------------------------------------------


class _Sqlite:
    """The workspace's own file. SQL is written for it (``?`` placeholders)."""

    real = "REAL"
    for_update = ""  # BEGIN IMMEDIATE has already taken the file's write lock

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # 0600: SQLite gives its -wal and -shm the same mode
            # only a new file: closing any descriptor of an open database drops this
            # process's locks on it, and another process closing its last connection would
            # then delete the -wal this one still writes (every write since lost)
            private_file(path)
        self.conn = sqlite3.connect(
            str(path), check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
        )
        self.conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, list(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def has_checkpoints(self) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'"
        ).fetchone()
        return row is not None

    def columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self.conn.execute(f"PRAGMA table_info({table})")}

    def checkpointer(self) -> Any:
        """LangGraph's SqliteSaver on this file (its own connection: it commits per call)."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(
            str(self.path), check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        return SqliteSaver(conn)

    # a claim's holder: a live process of this machine; another machine's cannot be checked
    def take(self, thread_id: str) -> bool:
        return True

    def give(self, thread_id: str) -> None:
        return None

    def holder_alive(self, thread_id: str, pid: int | None, host: str | None) -> bool:
        if pid is None:
            return False
        if host and host != socket.gethostname():
            return True  # another machine's process: it cannot be checked, so it holds
        return pid_alive(int(pid))

    def close(self) -> None:
        self.conn.close()


# the advisory locks' first key ("olav"); the second is the thread id's hash
_LOCK_SPACE = 0x6F6C6176
_SETUP_LOCK = 0  # the schema's set-up, so that two processes do not create it at once


class _Postgres:
    """A PostgreSQL database shared by a team's processes and machines (psycopg 3)."""

    real = "DOUBLE PRECISION"
    for_update = " FOR UPDATE"

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.where = postgres_where(uri)
        self.conn = self._connect()
        self._locks: set[str] = set()  # the threads this process's connection has locked

    def _connect(self) -> Any:
        psycopg = _psycopg()
        try:
            return psycopg.connect(self.uri, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise OlavError(
                f"threads.uri: cannot connect to PostgreSQL at {self.where}: "
                + (str(exc).strip().splitlines() or ["no answer"])[0],
                hint="Start the server or fix threads.uri in .olav/olav.yaml "
                "(a password belongs in PGPASSWORD or ~/.pgpass, not in the file)",
            ) from None

    def _reconnect(self) -> None:
        """A new connection when the server dropped this one (a restart): the locks it held
        are gone with it, so this process's claims no longer hold."""
        if self.conn.closed or self.conn.broken:
            self._locks.clear()
            self.conn = self._connect()

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("?", "%s").replace("instr(", "strpos(")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), list(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(self._sql(sql), rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self._reconnect()
        with self.conn.transaction():
            yield

    @contextmanager
    def setup_lock(self) -> Iterator[None]:
        self.conn.execute("SELECT pg_advisory_lock(%s, %s)", [_LOCK_SPACE, _SETUP_LOCK])
        try:
            yield
        finally:
            self.conn.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_SPACE, _SETUP_LOCK])

    def has_checkpoints(self) -> bool:
        row = self.conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL").fetchone()
        return bool(row and row[0])

    def columns(self, table: str) -> set[str]:
        rows = self.conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s",
            [table],
        ).fetchall()
        return {str(r[0]) for r in rows}

    def checkpointer(self) -> Any:
        """LangGraph's PostgresSaver on its own connection, its tables set up once."""
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise _needs_extra() from None
        from psycopg.rows import dict_row

        psycopg = _psycopg()
        conn = psycopg.connect(self.uri, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn)
        with self.setup_lock():
            saver.setup()
        return saver

    def take(self, thread_id: str) -> bool:
        """The thread's advisory lock for this process's connection (False: another holds it).
        Taken once per thread: a second claim from this process is refused before this."""
        if thread_id in self._locks:
            return True
        if self._try_lock(thread_id):
            self._locks.add(thread_id)
            return True
        return False

    def give(self, thread_id: str) -> None:
        if thread_id in self._locks:
            self._locks.discard(thread_id)
            self._unlock(thread_id)

    def _try_lock(self, thread_id: str) -> bool:
        row = self.conn.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s))", [_LOCK_SPACE, thread_id]
        ).fetchone()
        return bool(row and row[0])

    def _unlock(self, thread_id: str) -> None:
        self.conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [_LOCK_SPACE, thread_id])

    def holder_alive(self, thread_id: str, pid: int | None, host: str | None) -> bool:
        """Whether the process named by a claim still holds it: this process, or any whose
        connection keeps the thread's lock (the server drops it when that process dies)."""
        if pid is None:
            return False
        if thread_id in self._locks:
            return True  # this process's run: it took the lock with the claim
        self._reconnect()
        if not self._try_lock(thread_id):
            return True
        self._unlock(thread_id)  # nobody held it: the claim's process is gone
        return False

    def close(self) -> None:
        self.conn.close()


def postgres_where(uri: str) -> str:
    """``host:port/dbname`` of a PostgreSQL URI, for messages (never its user or password)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(uri)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "an unreadable threads.uri"
    return f"{host}:{port}{parts.path or '/'}"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise _needs_extra() from None
    return psycopg


def _needs_extra() -> OlavError:
    return OlavError(
        "threads.uri names a PostgreSQL database, but PostgreSQL support is not installed",
        hint="Install it with: pip install 'olav[postgres]'",
    )


def check_uri(uri: str) -> str:
    """``threads.uri`` as given, or a one-line error naming what is wrong with it."""
    from olav.core.errors import ConfigError

    if not uri.startswith(("postgresql://", "postgres://")):
        shown = uri.split("@")[-1] if "@" in uri else uri
        raise ConfigError(
            f"threads.uri: {shown!r} is not a PostgreSQL URI",
            hint="Use postgresql://USER@HOST:PORT/DBNAME, or leave it empty for the "
            "workspace's own file",
        )
    return uri


class ThreadStore:
    """The workspace's threads. One instance per process is enough; it is thread-safe."""

    def __init__(self, path: Path | None = None, *, uri: str = "") -> None:
        if uri:
            self.db: _Sqlite | _Postgres = _Postgres(check_uri(uri))
            self.path: Path | None = None
        elif path is not None:
            self.db = _Sqlite(path)
            self.path = path
        else:
            raise ValueError("a ThreadStore needs a file or a PostgreSQL URI")
        self._saver: Any = None
        self._lock = threading.RLock()
        self.migrated: list[str] = []
        self._migrate()

    @classmethod
    def for_workspace(cls, ws: Any) -> ThreadStore:
        uri = str(ws.config["threads.uri"] or "").strip()
        if uri:
            return cls(uri=uri)
        return cls(ws.databases / "threads.sqlite")

    @property
    def conn(self) -> Any:
        """The index's connection (sqlite3, or psycopg for PostgreSQL)."""
        return self.db.conn

    @property
    def where(self) -> str:
        """Where the threads are, for messages: the file, or the database's host and name."""
        if isinstance(self.db, _Postgres):
            return f"postgresql://{self.db.where}"
        return str(self.path)

    # -- schema -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """One transaction. In SQLite it takes the write lock at the start (BEGIN IMMEDIATE);
        in PostgreSQL a claim locks its row (SELECT … FOR UPDATE). Either way two claims of one
        thread are ordered, never interleaved; between the threads of one process the store's
        lock orders them too (the connection holds one transaction at a time)."""
        with self._lock, self.db.transaction():
            yield self.db

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            if isinstance(self.db, _Postgres):
                self.db._reconnect()
            return list(self.db.execute(sql, params).fetchall())

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _migrate(self) -> None:
        if isinstance(self.db, _Postgres):
            with self._lock, self.db.setup_lock():
                self._migrate_schema()
        else:
            self._migrate_schema()

    def _migrate_schema(self) -> None:
        with self._tx() as con:
            self._create(con, _OLAV_SCHEMA)
            row = con.execute("SELECT value FROM olav_meta WHERE key = 'schema'").fetchone()
            version = int(row[0]) if row else 0
            if version < 1:
                self.migrated.append("1: the index of threads")
                self._index_checkpoints(con)
            if version < 2:
                self.migrated.append("2: the runs of olav serve")
            self._create(con, _RUNS_SCHEMA)  # IF NOT EXISTS: a no-op from version 2 on
            if version < 3:
                self.migrated.append("3: the stream events of a run")
                # a file whose index was lost (version 0) may keep a newer olav_runs
                if "events" not in self.db.columns("olav_runs"):
                    con.execute(_EVENTS_COLUMN)
            if version < SCHEMA_VERSION:  # a newer olav's file keeps its version
                con.execute(
                    "INSERT INTO olav_meta (key, value) VALUES ('schema', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [str(SCHEMA_VERSION)],
                )
        # LangGraph's own tables (and its own migrations) are set up on the checkpointer's
        # first use: listing and showing threads need no langgraph import

    def _create(self, con: Any, schema: str) -> None:
        for stmt in schema.replace("{real}", self.db.real).split(";"):
            if stmt.strip():
                con.execute(stmt)

    def _index_checkpoints(self, con: Any) -> None:
        """Register the threads a file holds only as checkpoints (a file from before the
        index): their turns are read back from the checkpoints on the first sync."""
        if not self.db.has_checkpoints():
            return
        now = time.time()
        for (thread_id,) in con.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall():
            con.execute(
                "INSERT INTO olav_threads (id, agent, created_at, updated_at) "
                "VALUES (?, '', ?, ?) ON CONFLICT DO NOTHING",
                [thread_id, now, now],
            )

    @property
    def checkpointer(self) -> Any:
        """LangGraph's saver on the same file or database (its own connection)."""
        if self._saver is None:
            self._saver = self.db.checkpointer()
        return self._saver

    def close(self) -> None:
        if self._saver is not None:
            self._saver.conn.close()
            self._saver = None
        self.db.close()

    # -- threads ------------------------------------------------------------------------------

    def create(
        self,
        agent: str,
        thread_id: str | None = None,
        name: str = "",
        owner: str = "",
        *,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadInfo:
        """The thread, made now, or the one ``owner`` already has with this id (unchanged);
        :class:`ThreadExistsError` when another operator has it."""
        return self.insert(agent, thread_id, name, owner, metadata=metadata)[0]

    def insert(
        self,
        agent: str,
        thread_id: str | None = None,
        name: str = "",
        owner: str = "",
        *,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[ThreadInfo, bool]:
        """Make a thread and say whether this call made it (False: ``owner`` had it already,
        and it is left as it was). The row is inserted and its owner read in one
        transaction, so of two processes that make one id at once exactly one makes it; when
        the id is another operator's, :class:`ThreadExistsError` (nothing is changed)."""
        tid = thread_id or new_thread_id()
        now = time.time()
        with self._tx() as con:
            made = con.execute(
                "INSERT INTO olav_threads (id, agent, owner, name, created_at, updated_at, "
                "metadata) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [tid, agent, owner, name.strip(), now, now, _dump(metadata or {})],
            ).rowcount
            row = con.execute(f"SELECT {_COLUMNS} FROM olav_threads WHERE id = ?", [tid]).fetchone()
        info = _info(row)
        if info.owner != owner:
            raise ThreadExistsError(
                f"thread {tid!r} exists",
                hint="Pick another thread id, or leave it out and one is made for you",
            )
        return info, bool(made)

    def find(self, thread_id: str, *, owner: str | None = None) -> ThreadInfo | None:
        """A thread by id or by a unique prefix of it (as `olav threads list` prints);
        ``owner``: only that operator's threads (olav serve)."""
        sql = f"SELECT {_COLUMNS} FROM olav_threads WHERE (id = ? OR id LIKE ? ESCAPE '\\')"
        params: list[Any] = [thread_id, _like_prefix(thread_id)]
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        rows = self._rows(sql + " ORDER BY id = ? DESC", [*params, thread_id])
        if not rows:
            return None
        if len(rows) > 1 and rows[0][0] != thread_id:
            raise ThreadNotFoundError(
                f"thread id {thread_id!r} is ambiguous: it starts {len(rows)} threads",
                hint="Give more of the id (see `olav threads list`)",
            )
        return _info(rows[0])

    def get(self, thread_id: str, *, owner: str | None = None) -> ThreadInfo:
        found = self.find(thread_id, owner=owner)
        if found is None:
            raise ThreadNotFoundError(
                f"no thread {thread_id!r} in this workspace",
                hint="See `olav threads list` for the threads there are",
            )
        return found

    def recent(
        self,
        *,
        agent: str | None = None,
        owner: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[ThreadInfo]:
        sql = f"SELECT {_COLUMNS} FROM olav_threads WHERE 1 = 1"
        params: list[Any] = []
        if agent:
            sql += " AND agent = ?"
            params.append(agent)
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        sql += " ORDER BY updated_at DESC, id LIMIT ? OFFSET ?"
        params += [limit, offset]
        return [_info(r) for r in self._rows(sql, params)]

    def owners(self) -> dict[str, str]:
        """Every thread's owner by thread id ("" for a thread nobody owns: one from before
        owners were recorded)."""
        return {
            str(tid): str(owner or "")
            for tid, owner in self._rows("SELECT id, owner FROM olav_threads")
        }

    def last(self, agent: str) -> ThreadInfo | None:
        """The agent's most recent thread that has turns."""
        row = self._one(
            f"SELECT {_COLUMNS} FROM olav_threads WHERE agent = ? AND turns > 0 "
            "ORDER BY updated_at DESC LIMIT 1",
            [agent],
        )
        return _info(row) if row else None

    def set_metadata(self, thread_id: str, metadata: dict[str, Any]) -> ThreadInfo:
        """Merge ``metadata`` into the thread's (a client's labels: olav serve's PATCH)."""
        info = self.get(thread_id)
        merged = {**info.metadata, **metadata}
        with self._tx() as con:
            con.execute(
                "UPDATE olav_threads SET metadata = ?, updated_at = ? WHERE id = ?",
                [_dump(merged), time.time(), info.id],
            )
        return self.get(info.id)

    def rename(self, thread_id: str, name: str) -> ThreadInfo:
        info = self.get(thread_id)
        with self._tx() as con:
            con.execute("UPDATE olav_threads SET name = ? WHERE id = ?", [name.strip(), info.id])
        return self.get(info.id)

    def delete(self, thread_id: str) -> ThreadInfo:
        """Delete a thread, its turns, its runs and its checkpoints (not while a run holds
        it): nothing of it is left for whoever takes its id next."""
        info = self.get(thread_id)
        self._check_free(info.id)
        self.checkpointer.delete_thread(info.id)
        with self._tx() as con:
            con.execute("DELETE FROM olav_runs WHERE thread_id = ?", [info.id])
            con.execute("DELETE FROM olav_turns WHERE thread_id = ?", [info.id])
            con.execute("DELETE FROM olav_threads WHERE id = ?", [info.id])
        return info

    # -- the runs of olav serve ---------------------------------------------------------------

    def record_run(self, run: RunRecord) -> None:
        """Keep ``run`` (a run accepted), or bring its status up to date."""
        with self._tx() as con:
            con.execute(
                f"INSERT INTO olav_runs ({_RUN_COLUMNS}) "
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
                    _dump(run.metadata),
                    _dump(run.kwargs),
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
        with self._tx() as con:
            con.execute(
                "UPDATE olav_runs SET events = ? WHERE run_id = ? AND events < ?",
                [events, run_id, events],
            )

    def update_run(
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
            sql += f" AND status IN ({_marks(only_from)})"
            params += list(only_from)
        with self._tx() as con:
            return bool(con.execute(sql, params).rowcount)

    def get_run(
        self, run_id: str, *, thread_id: str | None = None, owner: str | None = None
    ) -> RunRecord | None:
        """A kept run by its exact id (``thread_id``, ``owner``: only when it is that thread's
        and that operator's)."""
        sql = f"SELECT {_RUN_COLUMNS} FROM olav_runs WHERE run_id = ?"
        params: list[Any] = [run_id]
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params.append(thread_id)
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        row = self._one(sql, params)
        return _run_record(row) if row else None

    def runs(
        self,
        thread_id: str,
        *,
        owner: str | None = None,
        status: Sequence[str] = (),
        limit: int = 10,
        offset: int = 0,
    ) -> list[RunRecord]:
        """A thread's kept runs, newest first (``status``: only those in one of these)."""
        sql = f"SELECT {_RUN_COLUMNS} FROM olav_runs WHERE thread_id = ?"
        params: list[Any] = [thread_id]
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        if status:
            sql += f" AND status IN ({_marks(status)})"
            params += list(status)
        sql += " ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?"
        params += [limit, offset]
        return [_run_record(r) for r in self._rows(sql, params)]

    # -- one run at a time --------------------------------------------------------------------

    def claim(self, thread_id: str, run_id: str, agent: str, owner: str = "") -> None:
        """Take the thread for ``run_id`` (creating it for ``agent`` and ``owner`` when new);
        raise :class:`ThreadBusyError` when a live run holds it."""
        now = time.time()
        with self._tx() as con:
            con.execute(
                "INSERT INTO olav_threads (id, agent, owner, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [thread_id, agent, owner, now, now],
            )
            row = con.execute(
                "SELECT run_id, run_pid, run_host, run_since, agent FROM olav_threads "
                "WHERE id = ?" + self.db.for_update,
                [thread_id],
            ).fetchone()
            if row[0] and self.db.holder_alive(thread_id, row[1], row[2]):
                raise _busy(thread_id, row[1], row[3])
            if not self.db.take(thread_id):  # a claim whose row is not yet visible here
                raise _busy(thread_id, None, None)
            try:
                if not row[4]:  # indexed from bare checkpoints: the first run names its agent
                    con.execute(
                        "UPDATE olav_threads SET agent = ?, owner = ? WHERE id = ?",
                        [agent, owner, thread_id],
                    )
                con.execute(
                    "UPDATE olav_threads SET run_id = ?, run_pid = ?, run_host = ?, "
                    "run_since = ? WHERE id = ?",
                    [run_id, os.getpid(), socket.gethostname(), now, thread_id],
                )
            except BaseException:
                self.db.give(thread_id)
                raise

    def release(self, thread_id: str, run_id: str) -> None:
        with self._tx() as con:
            done = con.execute(
                "UPDATE olav_threads SET run_id = NULL, run_pid = NULL, run_host = NULL, "
                "run_since = NULL WHERE id = ? AND run_id = ?",
                [thread_id, run_id],
            )
            if done.rowcount:
                self.db.give(thread_id)

    def held(self, thread_id: str) -> bool:
        """Whether a live run holds the thread (a dead process's claim holds nothing)."""
        try:
            self._check_free(thread_id)
        except ThreadBusyError:
            return True
        return False

    def _check_free(self, thread_id: str) -> None:
        with self._lock:
            row = self._one(
                "SELECT run_id, run_pid, run_host, run_since FROM olav_threads WHERE id = ?",
                [thread_id],
            )
            if row and row[0] and self.db.holder_alive(thread_id, row[1], row[2]):
                raise _busy(thread_id, row[1], row[3])

    # -- turns --------------------------------------------------------------------------------

    def sync(self, thread_id: str, messages: Sequence[Any], *, since: int | None = None) -> int:
        """Index the thread's messages (the graph state's, in order) from the first one not yet
        indexed; returns how many were added. ``since``: the index is rewritten from that
        message on (a run from an earlier checkpoint: the thread's branch is now another)."""
        rows = [t for t in (_turn_of(i, m) for i, m in enumerate(messages)) if t is not None]
        with self._tx() as con:
            if since is not None:
                con.execute(
                    "DELETE FROM olav_turns WHERE thread_id = ? AND seq >= ?", [thread_id, since]
                )
            (known,) = con.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM olav_turns WHERE thread_id = ?",
                [thread_id],
            ).fetchone()
            fresh = [t for t in rows if t.seq >= known]
            now = time.time()
            con.executemany(
                "INSERT INTO olav_turns (thread_id, seq, role, name, content, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, seq) DO UPDATE SET "
                "role = excluded.role, name = excluded.name, content = excluded.content, "
                "created_at = excluded.created_at",
                [(thread_id, t.seq, t.role, t.name, t.content, now) for t in fresh],
            )
            (turns,) = con.execute(
                "SELECT COUNT(*) FROM olav_turns WHERE thread_id = ? AND role = 'user'",
                [thread_id],
            ).fetchone()
            first = con.execute(
                "SELECT content FROM olav_turns WHERE thread_id = ? AND role = 'user' "
                "ORDER BY seq LIMIT 1",
                [thread_id],
            ).fetchone()
            preview = " ".join(str(first[0]).split())[:PREVIEW_CHARS] if first else ""
            con.execute(
                "UPDATE olav_threads SET turns = ?, preview = ?, updated_at = ? WHERE id = ?",
                [turns, preview, now, thread_id],
            )
        return len(fresh)

    def turns(self, thread_id: str, *, last: int | None = None) -> list[Turn]:
        """The thread's turns in order (``last``: only the last ``last`` user turns and what
        followed them)."""
        if last is not None:
            row = self._one(
                "SELECT seq FROM olav_turns WHERE thread_id = ? AND role = 'user' "
                "ORDER BY seq DESC LIMIT 1 OFFSET ?",
                [thread_id, max(0, last - 1)],
            )
            start = int(row[0]) if row else 0
        else:
            start = 0
        rows = self._rows(
            "SELECT seq, role, content, name, created_at FROM olav_turns "
            "WHERE thread_id = ? AND seq >= ? ORDER BY seq",
            [thread_id, start],
        )
        return [Turn(seq=r[0], role=r[1], content=r[2], name=r[3], created_at=r[4]) for r in rows]

    def search(
        self, text: str, *, agent: str | None = None, owner: str | None = None, limit: int = 20
    ) -> list[ThreadHit]:
        """Turns (user, assistant and tool) whose text contains ``text``, case-insensitively,
        newest threads first, each with the turns around it."""
        needle = text.strip()
        if not needle:
            return []
        sql = (
            "SELECT t.thread_id, t.seq FROM olav_turns t JOIN olav_threads h ON h.id = t.thread_id "
            "WHERE instr(lower(t.content), lower(?)) > 0"
        )
        params: list[Any] = [needle]
        if agent:
            sql += " AND h.agent = ?"
            params.append(agent)
        if owner is not None:
            sql += " AND h.owner = ?"
            params.append(owner)
        sql += " ORDER BY h.updated_at DESC, t.seq LIMIT ?"
        params.append(limit)
        hits: list[ThreadHit] = []
        infos: dict[str, ThreadInfo] = {}
        for thread_id, seq in self._rows(sql, params):
            info = infos.get(thread_id) or self.get(thread_id)
            infos[thread_id] = info
            near = {
                t.seq: t
                for t in (
                    Turn(seq=r[0], role=r[1], content=r[2], name=r[3], created_at=r[4])
                    for r in self._rows(
                        "SELECT seq, role, content, name, created_at FROM olav_turns "
                        "WHERE thread_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                        [thread_id, seq - 1, seq + 1],
                    )
                )
            }
            hits.append(ThreadHit(info, near[seq], near.get(seq - 1), near.get(seq + 1)))
        return hits


_COLUMNS = "id, agent, owner, name, created_at, updated_at, turns, preview, run_id, metadata"
_RUN_COLUMNS = (
    "run_id, thread_id, assistant_id, owner, status, metadata, kwargs, multitask_strategy, "
    "created_at, updated_at, server_pid, server_host, error, events"
)


def _like_prefix(text: str) -> str:
    """``text`` as a LIKE prefix pattern, its wildcards taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _busy(thread_id: str, pid: int | None, since: float | None) -> ThreadBusyError:
    when = time.strftime("%H:%M:%S", time.localtime(since)) if since else "now"
    who = f"pid {pid}, since {when}" if pid is not None else "just claimed"
    return ThreadBusyError(
        f"thread {thread_id} is running in another process ({who})",
        hint="One run per thread: wait for it to finish, or start a new thread (/new)",
    )


def _info(row: Sequence[Any]) -> ThreadInfo:
    return ThreadInfo(
        id=row[0],
        agent=row[1],
        owner=row[2],
        name=row[3],
        created_at=row[4],
        updated_at=row[5],
        turns=row[6],
        preview=row[7],
        running=row[8] or "",
        metadata=_meta(row[9]),
    )


def _run_record(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        thread_id=row[1],
        assistant_id=row[2],
        owner=row[3],
        status=row[4],
        metadata=_meta(row[5]),
        kwargs=_meta(row[6]),
        multitask_strategy=row[7],
        created_at=row[8],
        updated_at=row[9],
        pid=row[10],
        host=row[11],
        error=row[12],
        events=int(row[13] or 0),
    )


def _marks(values: Sequence[Any]) -> str:
    """The placeholders of an ``IN (…)`` list."""
    return ", ".join("?" for _ in values)


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _meta(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _turn_of(seq: int, message: Any) -> Turn | None:
    """A graph message as a turn of the index (system messages and empty ones are not)."""
    kind = getattr(message, "type", "")
    text = _text(getattr(message, "content", ""))
    if kind == "human":
        return Turn(seq, "user", text)
    if kind == "ai":
        calls = getattr(message, "tool_calls", None) or []
        if calls:
            shown = "; ".join(
                f"{c['name']}({json.dumps(c.get('args') or {}, ensure_ascii=False)[:300]})"
                for c in calls
            )
            text = (text + "\n" if text else "") + "→ " + shown
            return Turn(seq, "assistant", text, name=",".join(c["name"] for c in calls))
        return Turn(seq, "assistant", text) if text else None
    if kind == "tool":
        return Turn(seq, "tool", text[:TOOL_TEXT_CHARS], name=str(getattr(message, "name", "")))
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content or "")
