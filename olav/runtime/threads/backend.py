"""What the thread store asks of its database: SQLite (:mod:`.sqlite`, the workspace's own
file) and PostgreSQL (:mod:`.postgres`, a team's) behind one protocol. SQL is written with
``?`` placeholders; a backend translates what it must."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Backend(Protocol):
    real: str  # the column type of a timestamp
    for_update: str  # what a SELECT appends to lock the row it reads in a transaction
    conn: Any

    @property
    def where(self) -> str:
        """Where the threads are, for messages (never a password)."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def transaction(self) -> AbstractContextManager[None]:
        """One transaction that takes the write lock (SQLite) or row locks (PostgreSQL)."""
        ...

    def setup_lock(self) -> AbstractContextManager[None]:
        """Held while the schema is set up, so that two processes do not create it at once."""
        ...

    def reconnect(self) -> None:
        """A new connection when the server dropped this one (no-op for a file)."""
        ...

    def has_checkpoints(self) -> bool: ...

    def columns(self, table: str) -> set[str]: ...

    def tables(self) -> set[str]:
        """The tables of the threads' database (its current schema)."""
        ...

    def checkpointer(self) -> Any:
        """LangGraph's saver on the same database, on its own connection."""
        ...

    def take(self, thread_id: str) -> bool:
        """Hold the thread for this process beyond the claim's row (False: another holds it)."""
        ...

    def give(self, thread_id: str) -> None: ...

    def holder_alive(self, thread_id: str, pid: int | None, host: str | None) -> bool:
        """Whether the process a claim names still holds it."""
        ...

    def close(self) -> None: ...
