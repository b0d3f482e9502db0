"""The tables olav keeps beside LangGraph's checkpoints, and their version (``olav_meta``).

Versions 2 and 3 were ``olav serve``'s run table, which the server now declares and migrates
itself (:mod:`olav.serve.records`, through :meth:`ThreadStore.keep_beside`); the number stays,
so that an older olav reads a newer file as it always did.
"""

from __future__ import annotations

import re
import time
from typing import Any

SCHEMA_VERSION = 3

OLAV_SCHEMA = """
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


_OLAV_TABLE = re.compile(r"olav_[a-z_]+")  # olav's tables (a name safe to write into SQL)


def create_tables(db: Any, con: Any, schema: str) -> None:
    """Run ``schema``'s statements, ``{real}`` the backend's timestamp type."""
    for stmt in schema.replace("{real}", db.real).split(";"):
        if stmt.strip():
            con.execute(stmt)


def kept_per_thread(db: Any) -> list[str]:
    """The tables of olav's kept per thread (``olav_*`` with a ``thread_id``): its turns, and
    what other packages keep beside the threads (olav serve's runs)."""
    return sorted(
        t for t in db.tables() if _OLAV_TABLE.fullmatch(t) and "thread_id" in db.columns(t)
    )


def index_checkpoints(db: Any, con: Any) -> None:
    """Register the threads a file holds only as checkpoints (a file from before the index):
    their turns are read back from the checkpoints on the first sync."""
    if not db.has_checkpoints():
        return
    now = time.time()
    for (thread_id,) in con.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall():
        con.execute(
            "INSERT INTO olav_threads (id, agent, created_at, updated_at) "
            "VALUES (?, '', ?, ?) ON CONFLICT DO NOTHING",
            [thread_id, now, now],
        )
