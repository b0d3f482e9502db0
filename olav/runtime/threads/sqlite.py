"""The workspace's own file, ``.olav/databases/threads.sqlite``: WAL mode with a busy timeout,
so processes that write at once wait for each other instead of failing."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from olav.core.private import private_file
from olav.core.procs import pid_alive

BUSY_TIMEOUT_MS = 10_000


class SqliteBackend:
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

    @property
    def where(self) -> str:
        return str(self.path)

    def setup_lock(self) -> AbstractContextManager[None]:
        return nullcontext()  # the set-up is one IMMEDIATE transaction

    def reconnect(self) -> None:
        return None

    def has_checkpoints(self) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'"
        ).fetchone()
        return row is not None

    def columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self.conn.execute(f"PRAGMA table_info({table})")}

    def tables(self) -> set[str]:
        rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(r[0]) for r in rows}

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
