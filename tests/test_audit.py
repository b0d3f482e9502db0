from __future__ import annotations

from pathlib import Path

import pytest

from olav.audit.db import MIGRATIONS, connect, migrate
from olav.audit.recorder import AuditRecorder


def test_migrations_are_numbered_recorded_and_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "audit.duckdb"
    assert migrate(db) == [v for v, _, _ in MIGRATIONS]
    assert migrate(db) == []
    with connect(db) as con:
        cols = con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs' "
            "ORDER BY ordinal_position"
        ).fetchall()
        versions = con.execute("SELECT version FROM schema_migrations").fetchall()
    assert [c[0] for c in cols] == [
        "id",
        "agent",
        "session_id",
        "status",
        "query",
        "model",
        "error",
        "started_at",
        "ended_at",
        "outcome",
        "thread_id",
        "operator",
        "pid",
        "host",
        "process",
    ]
    assert [v[0] for v in versions] == [v for v, _, _ in MIGRATIONS]


def test_migration_3_gives_old_runs_an_outcome_and_keeps_their_status(tmp_path: Path) -> None:
    db = tmp_path / "audit.duckdb"
    with connect(db) as con:  # a database made by olav before run outcomes existed
        done = [m for m in MIGRATIONS if m[0] <= 2]
        con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR)")
        for version, name, sql in done:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?)", [version, name])
        for rid, status in (
            ("a", "completed"),
            ("b", "error"),
            ("c", "cancelled"),
            ("d", "running"),
        ):
            con.execute(
                "INSERT INTO runs (id, agent, status, started_at) VALUES (?, 'core', ?, now())",
                [rid, status],
            )
    assert migrate(db) == [v for v, _, _ in MIGRATIONS if v > 2]
    with connect(db) as con:
        rows = con.execute("SELECT id, status, outcome FROM runs ORDER BY id").fetchall()
    assert rows == [
        ("a", "completed", "completed"),
        ("b", "error", "failed"),
        ("c", "cancelled", "cancelled"),
        ("d", "running", None),
    ]


def test_end_run_records_the_outcome_next_to_the_status(tmp_path: Path) -> None:
    db = tmp_path / "audit.duckdb"
    migrate(db)
    audit = AuditRecorder(db)
    narrated, failed = (
        audit.start_run("core", "s", "back up r1", "m"),
        audit.start_run("core", "s", "x", "m"),
    )
    audit.end_run(narrated, "completed", outcome="narrated")
    audit.end_run(failed, "error", "boom")
    rows = dict(audit.query("SELECT id, status || '/' || outcome FROM runs"))
    assert rows == {narrated: "completed/narrated", failed: "error/failed"}
    # old readers that select on status still see exactly the errored run
    assert audit.query("SELECT id FROM runs WHERE status = 'error'") == [(failed,)]
    with pytest.raises(ValueError, match="unknown run outcome 'meh'"):
        audit.end_run(narrated, "completed", outcome="meh")


def test_a_batch_writes_a_runs_rows_through_one_connection_of_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside batch() this thread's writes share one opening of the file; another thread's
    writes meanwhile open their own, and every row lands."""
    import threading
    from contextlib import contextmanager

    import olav.audit.recorder as recorder

    db = tmp_path / "audit.duckdb"
    migrate(db)
    opened: list[str] = []
    real = recorder.connect

    @contextmanager
    def counted(path: Path, **kw: object):  # type: ignore[no-untyped-def]
        opened.append(threading.current_thread().name)
        with real(path, **kw) as con:  # type: ignore[arg-type]
            yield con

    monkeypatch.setattr(recorder, "connect", counted)
    rec = AuditRecorder(db)
    with rec.batch():
        run_id = rec.start_run("core", "s1", "hello", "m")
        rec.message(run_id, "user", "hello")
        other = threading.Thread(target=rec.message, args=(run_id, "tool", "x"), name="other")
        other.start()
        other.join()
        rec.end_run(run_id, "completed", outcome="completed")
    assert opened == ["MainThread", "other"]
    rec.message(run_id, "assistant", "after")  # outside the block: its own opening
    assert opened == ["MainThread", "other", "MainThread"]
    with connect(db) as con:
        rows = con.execute("SELECT role FROM messages ORDER BY created_at").fetchall()
        status = con.execute("SELECT status FROM runs").fetchall()
    assert sorted(r[0] for r in rows) == ["assistant", "tool", "user"]
    assert status == [("completed",)]


_OTHER_PROCESS_OPENS = (
    "import sys, duckdb\n"
    "try:\n"
    "    duckdb.connect(sys.argv[1]).close()\n"
    "except duckdb.IOException as exc:\n"
    "    print('locked' if 'lock' in str(exc).lower() else exc)\n"
    "else:\n"
    "    print('opened')\n"
)


def _other_process_opens(db: Path) -> str:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS_OPENS, str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_the_file_is_locked_inside_a_block_and_free_for_another_process_after_it(
    tmp_path: Path,
) -> None:
    """The file is attached to this process's DuckDB only while a connection is open: another
    process is refused inside the block and opens it the moment the block ends, with the rows
    written in it (DuckDB checkpointed them when the file was detached)."""
    db = tmp_path / "audit.duckdb"
    migrate(db)
    with connect(db) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1), (2)")
        assert _other_process_opens(db) == "locked"
    assert _other_process_opens(db) == "opened"
    assert not (tmp_path / "audit.duckdb.wal").exists()
    with connect(db, read_only=True) as con:
        assert con.execute("SELECT sum(x) FROM t").fetchone() == (3,)


def test_a_reader_shares_a_writers_file_and_a_writer_waits_for_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one process, a read-only block inside a writing one reads through the writer's
    attachment; a writer that meets a read-only attachment waits for it, as it waits for
    another process, and a writer that waits too long gets the one-line busy error."""
    import threading

    import olav.audit.host as host
    from olav.audit.db import AuditBusyError

    db = tmp_path / "audit.duckdb"
    migrate(db)
    with connect(db) as writer:
        writer.execute("CREATE TABLE t (x INTEGER)")
        writer.execute("INSERT INTO t VALUES (7)")
        with connect(db, read_only=True) as reader:
            assert reader.execute("SELECT x FROM t").fetchone() == (7,)

    refused, written = threading.Event(), threading.Event()
    real_attach = host.attach

    def attach(path: str, *, read_only: bool) -> object:
        try:
            return real_attach(path, read_only=read_only)
        except host.InUseReadOnly:
            refused.set()
            raise

    monkeypatch.setattr(host, "attach", attach)

    def write() -> None:
        with connect(db) as con:
            con.execute("INSERT INTO t VALUES (8)")
        written.set()

    with connect(db, read_only=True) as reader:
        with (
            pytest.raises(AuditBusyError, match="is locked by another process"),
            connect(db, attempts=2),
        ):
            pass
        refused.clear()
        other = threading.Thread(target=write)
        other.start()
        assert refused.wait(timeout=60)  # it tried, and waits for the reader
        assert not written.is_set()
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (1,)
    other.join(timeout=60)
    assert written.is_set()
    with connect(db) as con:
        assert con.execute("SELECT sum(x) FROM t").fetchone() == (15,)


def test_a_forked_process_opens_the_file_with_a_duckdb_of_its_own(tmp_path: Path) -> None:
    """DuckDB's state does not survive a fork: a child writes through an instance of its own,
    and the parent, whose instance was made before the fork, reads what the child wrote."""
    import multiprocessing

    db = tmp_path / "audit.duckdb"
    migrate(db)
    with connect(db) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    child = multiprocessing.get_context("fork").Process(target=_child_writes, args=(db,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    with connect(db) as con:
        assert con.execute("SELECT x FROM t").fetchall() == [(42,)]


def _child_writes(db: Path) -> None:
    with connect(db) as con:
        con.execute("INSERT INTO t VALUES (42)")
