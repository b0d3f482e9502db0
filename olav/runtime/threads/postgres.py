"""A PostgreSQL database shared by a team's processes and machines (psycopg 3,
``threads.uri: postgresql://…``). A claim is also a session advisory lock held by the claiming
process's connection: the server drops it the moment that process dies, on whatever machine it
ran, so a crashed host's claim is taken over at once instead of holding forever."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from olav.core.errors import OlavError

_LOCK_SPACE = 0x6F6C6176
_SETUP_LOCK = 0  # the schema's set-up, so that two processes do not create it at once


class PostgresBackend:
    """A PostgreSQL database shared by a team's processes and machines (psycopg 3)."""

    real = "DOUBLE PRECISION"
    for_update = " FOR UPDATE"

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.shown = postgres_where(uri)
        self.conn = self._connect()
        self._locks: set[str] = set()  # the threads this process's connection has locked

    def _connect(self) -> Any:
        psycopg = _psycopg()
        try:
            return psycopg.connect(self.uri, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise OlavError(
                f"threads.uri: cannot connect to PostgreSQL at {self.shown}: "
                + (str(exc).strip().splitlines() or ["no answer"])[0],
                hint="Start the server or fix threads.uri in .olav/olav.yaml "
                "(a password belongs in PGPASSWORD or ~/.pgpass, not in the file)",
            ) from None

    @property
    def where(self) -> str:
        return f"postgresql://{self.shown}"

    def reconnect(self) -> None:
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
        self.reconnect()
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

    def tables(self) -> set[str]:
        rows = self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
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
        self.reconnect()
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
