"""The workspace's threads (:class:`ThreadStore`): olav's index of them beside LangGraph's
checkpoints, one run at a time per thread, and their turns as text for listing, showing and
searching without unpickling checkpoints."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from olav.runtime.threads.backend import Backend
from olav.runtime.threads.model import (
    OWNED,
    PREVIEW_CHARS,
    THREAD_COLUMNS,
    ThreadBusyError,
    ThreadHit,
    ThreadInfo,
    ThreadNotFoundError,
    Turn,
    busy_error,
    dump_object,
    marks,
    new_thread_id,
    thread_of,
    turn_of,
)
from olav.runtime.threads.postgres import check_uri
from olav.runtime.threads.schema import (
    OLAV_SCHEMA,
    SCHEMA_VERSION,
    create_tables,
    ids_per_owner,
    index_checkpoints,
    kept_per_thread,
    like_prefix,
)
from olav.runtime.threads.sqlite import SqliteBackend


class ThreadStore:
    """The workspace's threads. One instance per process is enough; it is thread-safe."""

    def __init__(self, path: Path | None = None, *, uri: str = "") -> None:
        if uri:
            from olav.runtime.threads.postgres import PostgresBackend

            self.db: Backend = PostgresBackend(check_uri(uri))
            self.path: Path | None = None
        elif path is not None:
            self.db = SqliteBackend(path)
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
        return self.db.where

    # -- schema -------------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        """One transaction. In SQLite it takes the write lock at the start (BEGIN IMMEDIATE);
        in PostgreSQL a claim locks its row (SELECT … FOR UPDATE). Either way two claims of one
        thread are ordered, never interleaved; between the threads of one process the store's
        lock orders them too (the connection holds one transaction at a time)."""
        with self._lock, self.db.transaction():
            yield self.db

    def transaction(self) -> AbstractContextManager[Any]:
        """One transaction on the threads' database (its connection as the value), for what
        others keep beside the threads (:mod:`olav.serve.records`)."""
        return self._tx()

    def keep_beside(
        self, schema: str, migrate: Callable[[Any, Callable[[str], set[str]]], None] | None = None
    ) -> None:
        """Set up a table another package keeps beside the threads (``CREATE ... IF NOT
        EXISTS``, ``{real}`` for a timestamp's type), then ``migrate(con, columns)`` in the
        same transaction (``columns(table)``: the names a table has), under the lock that keeps
        two processes from setting up at once. A table named ``olav_*`` with a ``thread_id``
        column goes with its thread (:meth:`delete`)."""
        with self._lock, self.db.setup_lock(), self._tx() as con:
            create_tables(self.db, con, schema)
            if migrate is not None:
                migrate(con, self.db.columns)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one SELECT (``?`` placeholders) on the threads' database."""
        return self._rows(sql, params)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            self.db.reconnect()
            return list(self.db.execute(sql, params).fetchall())

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _migrate(self) -> None:
        with self._lock, self.db.setup_lock():
            self._migrate_schema()

    def _migrate_schema(self) -> None:
        with self._tx() as con:
            create_tables(self.db, con, OLAV_SCHEMA)
            row = con.execute("SELECT value FROM olav_meta WHERE key = 'schema'").fetchone()
            version = int(row[0]) if row else 0
            if version < 1:
                self.migrated.append("1: the index of threads")
                index_checkpoints(self.db, con)
            # versions 2 and 3: olav serve's runs, which it sets up itself (keep_beside)
            if version < 4:
                if version:
                    self.migrated.append("4: thread ids per owner")
                ids_per_owner(self.db, con)
            if version < SCHEMA_VERSION:  # a newer olav's file keeps its version
                con.execute(
                    "INSERT INTO olav_meta (key, value) VALUES ('schema', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [str(SCHEMA_VERSION)],
                )
        # LangGraph's own tables (and its own migrations) are set up on the checkpointer's
        # first use: listing and showing threads need no langgraph import

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
        """The thread, made now, or the one ``owner`` already has with this id (unchanged)."""
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
        """Make ``owner``'s thread ``thread_id`` (None: a new id) and say whether this call made
        it (False: ``owner`` had it already, and it is left as it was).

        Thread ids are per owner: another owner's thread with this id changes nothing, and is
        never told. The thread is stored under the id itself when no thread has that key, else
        under a key of its own (``known_as`` the id): either way the caller sees the same
        answer. One transaction, so of two processes that make one owner's id at once exactly
        one makes it (the owner's ids are unique: ``olav_threads_known``)."""
        tid = thread_id or new_thread_id()
        now = time.time()
        meta = dump_object(metadata or {})
        made = 0
        with self._tx() as con:
            for key in (tid, uuid.uuid4().hex, uuid.uuid4().hex):  # a second key: collisions
                made = con.execute(
                    "INSERT INTO olav_threads (id, agent, owner, name, created_at, updated_at, "
                    "metadata, known_as) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    [key, agent, owner, name.strip(), now, now, meta, None if key == tid else tid],
                ).rowcount
                row = con.execute(OWNED, [owner, tid]).fetchone()
                if row is not None:
                    break
            else:  # pragma: no cover - three taken keys, two of them random
                raise RuntimeError(f"no key for thread {tid!r}")
        return thread_of(row), bool(made)

    def owned(self, owner: str, thread_id: str) -> ThreadInfo | None:
        """``owner``'s thread with exactly this id (the id they gave it), None when they have
        none: what olav serve looks a client's thread up by."""
        row = self._one(OWNED, [owner, thread_id])
        return thread_of(row) if row else None

    def known_as(self, owner: str, keys: Sequence[str]) -> dict[str, str]:
        """The id ``owner`` knows each of these threads by (by key), for those that are theirs
        (the audit names a run's thread by its key)."""
        wanted = list(dict.fromkeys(keys))[:1000]
        if not wanted:
            return {}
        rows = self._rows(
            f"SELECT id, COALESCE(known_as, id) FROM olav_threads WHERE owner = ? "
            f"AND id IN ({marks(wanted)})",
            [owner, *wanted],
        )
        return {str(key): str(known) for key, known in rows}

    def find(self, thread_id: str, *, owner: str | None = None) -> ThreadInfo | None:
        """A thread by its key or by a unique prefix of it (as `olav threads list` prints), or
        by the id its owner gave it; ``owner``: only that operator's threads. An exact key
        wins."""
        sql = (
            f"SELECT {THREAD_COLUMNS} FROM olav_threads WHERE (id = ? OR id LIKE ? ESCAPE '\\' "
            "OR known_as = ?)"
        )
        params: list[Any] = [thread_id, like_prefix(thread_id), thread_id]
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
        return thread_of(rows[0])

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
        sql = f"SELECT {THREAD_COLUMNS} FROM olav_threads WHERE 1 = 1"
        params: list[Any] = []
        if agent:
            sql += " AND agent = ?"
            params.append(agent)
        if owner is not None:
            sql += " AND owner = ?"
            params.append(owner)
        sql += " ORDER BY updated_at DESC, id LIMIT ? OFFSET ?"
        params += [limit, offset]
        return [thread_of(r) for r in self._rows(sql, params)]

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
            f"SELECT {THREAD_COLUMNS} FROM olav_threads WHERE agent = ? AND turns > 0 "
            "ORDER BY updated_at DESC LIMIT 1",
            [agent],
        )
        return thread_of(row) if row else None

    def set_metadata(self, thread_id: str, metadata: dict[str, Any]) -> ThreadInfo:
        """Merge ``metadata`` into the thread's (a client's labels: olav serve's PATCH)."""
        info = self.get(thread_id)
        merged = {**info.metadata, **metadata}
        with self._tx() as con:
            con.execute(
                "UPDATE olav_threads SET metadata = ?, updated_at = ? WHERE id = ?",
                [dump_object(merged), time.time(), info.id],
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
            for table in kept_per_thread(
                self.db
            ):  # its turns, and what others keep of it (its runs)
                con.execute(f"DELETE FROM {table} WHERE thread_id = ?", [info.id])
            con.execute("DELETE FROM olav_threads WHERE id = ?", [info.id])
        return info

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
                raise busy_error(thread_id, row[1], row[3])
            if not self.db.take(thread_id):  # a claim whose row is not yet visible here
                raise busy_error(thread_id, None, None)
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
                raise busy_error(thread_id, row[1], row[3])

    # -- turns --------------------------------------------------------------------------------

    def sync(self, thread_id: str, messages: Sequence[Any], *, since: int | None = None) -> int:
        """Index the thread's messages (the graph state's, in order) from the first one not yet
        indexed; returns how many were added. ``since``: the index is rewritten from that
        message on (a run from an earlier checkpoint: the thread's branch is now another)."""
        rows = [t for t in (turn_of(i, m) for i, m in enumerate(messages)) if t is not None]
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
