"""The tables olav keeps beside LangGraph's checkpoints, and their version (``olav_meta``).

``olav_runs`` belongs to ``olav serve`` (:mod:`olav.serve.records` reads and writes it); it is
declared here because the file's version covers it and a deleted thread takes its runs along.
"""

from __future__ import annotations

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

# version 2: the runs of olav serve
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
    error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS olav_runs_thread ON olav_runs (thread_id, created_at);
"""

# version 3: the stream event numbers a run's server reserved (RunRecord.events)
EVENTS_COLUMN = "ALTER TABLE olav_runs ADD COLUMN events INTEGER NOT NULL DEFAULT 0"
