"""audit.duckdb: numbered schema migrations and short-lived, retrying connections.

DuckDB lets only one process open a database file at a time ("Conflicting lock"), even
read-only. So every operation opens a connection, does its work and closes it, retrying with
jittered back-off while another process holds the file. Opening is attaching the file to the
process's one DuckDB instance (olav.audit.host), not building an instance each time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from olav.core.errors import OlavError
from olav.core.private import tighten

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "runs, tool calls and recalls",
        """
        CREATE TABLE runs (
            id VARCHAR PRIMARY KEY,
            agent VARCHAR NOT NULL,
            session_id VARCHAR,
            status VARCHAR NOT NULL,          -- running | completed | error | cancelled
            query VARCHAR,
            model VARCHAR,
            error VARCHAR,
            started_at TIMESTAMPTZ NOT NULL,
            ended_at TIMESTAMPTZ
        );
        CREATE TABLE tool_calls (
            id VARCHAR PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            agent VARCHAR,
            tool VARCHAR NOT NULL,
            args JSON,
            result VARCHAR,
            status VARCHAR NOT NULL,          -- success | error
            duration_ms DOUBLE,
            created_at TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE recalls (
            id VARCHAR PRIMARY KEY,
            run_id VARCHAR,
            agent VARCHAR,
            query VARCHAR,
            candidates JSON,                  -- [{id, category, distance, fts_score, score}]
            injected JSON,                    -- [id, ...]
            latency_ms DOUBLE,
            created_at TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE memory_events (
            id VARCHAR PRIMARY KEY,
            memory_id VARCHAR,
            action VARCHAR NOT NULL,          -- add | update | delete | commit | supersede ...
            actor VARCHAR,
            detail JSON,
            created_at TIMESTAMPTZ NOT NULL
        );
        """,
    ),
    (
        2,
        "messages and run events",
        """
        CREATE TABLE messages (
            id VARCHAR PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            role VARCHAR NOT NULL,            -- user | assistant | tool
            content VARCHAR,                  -- secrets redacted
            created_at TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE events (
            id VARCHAR PRIMARY KEY,
            run_id VARCHAR,
            kind VARCHAR NOT NULL,            -- approval | denial | error | ...
            detail JSON,
            created_at TIMESTAMPTZ NOT NULL
        );
        """,
    ),
    (
        3,
        "run outcomes",
        # status stays what it was (running | completed | error | cancelled); outcome says
        # what a finished run achieved: completed | narrated | tool_error | failed | cancelled
        """
        ALTER TABLE runs ADD COLUMN outcome VARCHAR;
        UPDATE runs SET outcome = CASE status
            WHEN 'completed' THEN 'completed'
            WHEN 'error' THEN 'failed'
            WHEN 'cancelled' THEN 'cancelled'
        END;
        """,
    ),
    (
        4,
        "threads and run steps",
        # runs.thread_id: the conversation a run belongs to (olav.runtime.threads); steps: a
        # run's messages as the model saw them, tool calls with their ids, in order (what
        # `olav log export` turns into datasets); recalls.block: the block that was injected
        """
        ALTER TABLE runs ADD COLUMN thread_id VARCHAR;
        ALTER TABLE recalls ADD COLUMN block VARCHAR;
        CREATE TABLE steps (
            run_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            role VARCHAR NOT NULL,            -- user | assistant | tool
            content VARCHAR,                  -- secrets redacted
            tool_calls JSON,                  -- [{id, name, args}] on assistant steps
            tool_call_id VARCHAR,             -- on tool steps: the call it answers
            name VARCHAR,                     -- on tool steps: the tool
            status VARCHAR,                   -- on tool steps: success | error
            reasoning VARCHAR,                -- on assistant steps: the model's reasoning
            created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, seq)
        );
        """,
    ),
    (
        5,
        "memory decisions",
        # the control plane's own log (olav.memory.decisions): write, conflict and lifecycle
        # decisions with their reasons; recall's stay in recalls
        """
        CREATE TABLE memory_decisions (
            id VARCHAR PRIMARY KEY,
            run_id VARCHAR,
            kind VARCHAR NOT NULL,            -- write | conflict | lifecycle
            action VARCHAR NOT NULL,          -- captured | skipped | superseded | expired ...
            memory_id VARCHAR,
            category VARCHAR,
            other_id VARCHAR,                 -- the row it was decided against
            reason VARCHAR NOT NULL,
            detail JSON,
            created_at TIMESTAMPTZ NOT NULL,
            seq INTEGER NOT NULL              -- its place among the decisions written with it
        );
        """,
    ),
    (
        6,
        "who ran a run, and which process",
        # operator: whose run it is (memory.user, a token's operator for olav serve), so a
        # run is shown by its own operator, not by whoever owns its thread id now; pid, host
        # and process (olav.core.procs.this_process): a run a killed process left 'running'
        # is told from one still running, and settled (olav.audit.recorder.settle_orphans)
        """
        ALTER TABLE runs ADD COLUMN operator VARCHAR;
        ALTER TABLE runs ADD COLUMN pid INTEGER;
        ALTER TABLE runs ADD COLUMN host VARCHAR;
        ALTER TABLE runs ADD COLUMN process VARCHAR;
        """,
    ),
)


class AuditBusyError(OlavError):
    pass


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text or "conflicting" in text or "file handle conflict" in text


@contextmanager
def connect(path: Path, *, attempts: int = 60, read_only: bool = False) -> Iterator[Any]:
    """A short-lived connection, retried with jittered back-off while the file is locked
    (olav.audit.host: the file is attached to this process's DuckDB while it is used)."""
    import duckdb

    from olav.audit.host import InUseReadOnly, attach, detach

    key = str(path)
    delay = 0.01
    for attempt in range(attempts):
        try:
            created = not read_only and not path.exists()
            con = attach(key, read_only=read_only)
            if created:  # DuckDB makes it 0644; it holds every operator's runs
                tighten(path)
            break
        except (duckdb.IOException, duckdb.ResourceInUseException, InUseReadOnly) as exc:
            locked = isinstance(exc, InUseReadOnly) or _is_lock_error(exc)
            if not locked or attempt == attempts - 1:
                raise AuditBusyError(
                    f"audit database {path} is locked by another process",
                    hint="Retry in a moment; if it persists, stop the other olav process",
                ) from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)
    try:
        yield con
    finally:
        detach(key, con)


def applied_versions(con: Any) -> list[int]:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMPTZ DEFAULT now())"
    )
    return [
        r[0] for r in con.execute("SELECT version FROM schema_migrations ORDER BY 1").fetchall()
    ]


def migrate(path: Path) -> list[int]:
    """Apply pending migrations in order, each in a transaction. Returns the versions applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with connect(path) as con:
        return apply_migrations(con)


def apply_migrations(con: Any) -> list[int]:
    """:func:`migrate` on a connection already open (one opening for several jobs)."""
    applied: list[int] = []
    done = set(applied_versions(con))
    for version, name, sql in MIGRATIONS:
        if version in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [version, name]
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        applied.append(version)
    return applied


# rows per INSERT statement in insert_rows (DuckDB binds at most 65,535 parameters a statement)
_ROWS_PER_INSERT = 500


def insert_rows(con: Any, head: str, rows: Sequence[Sequence[Any]]) -> None:
    """``head`` (``INSERT [OR REPLACE] INTO t (a, b, ...)``) with ``rows`` as the VALUES of one
    statement per few hundred rows. DuckDB's ``executemany`` runs the statement once a row:
    a run's four steps took 25 ms that way, and 4 ms as one statement."""
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        one = "(" + ", ".join("?" * len(chunk[0])) + ")"
        con.execute(
            f"{head} VALUES " + ", ".join([one] * len(chunk)), [v for r in chunk for v in r]
        )


def with_audit(path: Path, fn: Callable[[Any], Any]) -> Any:
    with connect(path) as con:
        return fn(con)
