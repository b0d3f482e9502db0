"""The tables olav keeps beside LangGraph's checkpoints, and their version (``olav_meta``).

Versions 2 and 3 were ``olav serve``'s run table, which the server now declares and migrates
itself (:mod:`olav.serve.records`, through :meth:`ThreadStore.keep_beside`); the number stays,
so that an older olav reads a newer file as it always did.

Version 4: thread ids are per owner. A thread's ``id`` is its key (what its checkpoints, turns
and runs are stored under); ``known_as`` is the id its owner gave it when that differs from
the key (another owner had that id first), NULL otherwise. An owner's ids are unique
(``olav_threads_known``); a row an older olav writes has no ``known_as`` and is known by its key.
"""

from __future__ import annotations

import re
import time
from typing import Any

SCHEMA_VERSION = 4

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
    run_since {real},
    known_as TEXT
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


# version 4: an owner's thread ids are unique, each the id it was given or else its key
KNOWN_AS_COLUMN = "ALTER TABLE olav_threads ADD COLUMN known_as TEXT"
KNOWN_AS_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS olav_threads_known "
    "ON olav_threads (owner, (COALESCE(known_as, id)))"
)


def ids_per_owner(db: Any, con: Any) -> None:
    """Version 4 on a file from before it: the column and the index (nothing else changes: a
    thread made before is known by its key, which is the id it was given)."""
    if "known_as" not in db.columns("olav_threads"):
        con.execute(KNOWN_AS_COLUMN)
    con.execute(KNOWN_AS_INDEX)


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


def like_prefix(text: str) -> str:
    """``text`` as a LIKE prefix pattern, its wildcards taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
