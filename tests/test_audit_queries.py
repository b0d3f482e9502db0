"""olav.audit.queries: the reads on audit.duckdb, against a database the recorder wrote."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from olav.audit.db import migrate
from olav.audit.queries import (
    errors_since,
    memory_events,
    recent_recalls,
    run_start,
    runs_tool_calls,
    session_runs,
)
from olav.audit.recorder import AuditRecorder, ToolCallEntry


@dataclass
class FakeRecall:
    query: str
    injected_ids: list[str]
    latency_ms: float = 3.0
    candidates: tuple[()] = ()


@pytest.fixture
def audit(tmp_path: Path) -> AuditRecorder:
    path = tmp_path / "audit.duckdb"
    migrate(path)
    return AuditRecorder(path)


def test_a_sessions_runs_and_their_tool_calls_oldest_first(audit: AuditRecorder) -> None:
    first = audit.start_run("core", "s1", "list devices", "m")
    audit.tool_call(
        first, "core", ToolCallEntry("list_devices", {"role": "core"}, "3 rows", "success", 1.0)
    )
    second = audit.start_run("core", "s1", "back them up", "m")
    audit.tool_call(
        second, "core", ToolCallEntry("backup_device_config", {}, "Error: no", "error", 1.0)
    )
    audit.end_run(second, "error", "boom")
    audit.start_run("core", "other", "elsewhere", "m")

    runs = session_runs(audit.path, "s1")
    assert [r[0] for r in runs] == [first, second]
    assert [(r[1], r[2], r[3]) for r in runs] == [
        ("core", "running", "list devices"),
        ("core", "error", "back them up"),
    ]
    calls = runs_tool_calls(audit.path, [first, second])
    assert [(c[0], c[1]) for c in calls] == [
        ("list_devices", "success"),
        ("backup_device_config", "error"),
    ]
    assert runs_tool_calls(audit.path, []) == []
    assert session_runs(audit.path, "nobody") == []


def test_run_start_names_the_run_or_the_newest_running_one(audit: AuditRecorder) -> None:
    done = audit.start_run("core", "s1", "q", "m")
    audit.end_run(done, "completed")
    running = audit.start_run("core", "s1", "q2", "m")
    found = run_start(audit.path, done)
    assert found is not None and found[0] == done
    assert abs(found[1] - datetime.now(UTC).timestamp()) < 600
    newest = run_start(audit.path, None)
    assert newest is not None and newest[0] == running
    assert run_start(audit.path, "no-such-run") is None


def test_errors_since_reads_failed_runs_and_tool_calls(audit: AuditRecorder) -> None:
    rid = audit.start_run("netops", "s1", "q", "m")
    audit.end_run(rid, "error", "Conflicting lock on domain.duckdb")
    audit.tool_call(rid, "netops", ToolCallEntry("db_query", {}, "no column x", "error", 1.0))
    audit.event(rid, "note", {"what": "not an error"})
    found = errors_since(audit.path, datetime.now(UTC) - timedelta(hours=1))
    assert sorted(source for _text, _agent, source in found) == [
        "audit:runs",
        "audit:tool_calls",
    ]
    assert ("Conflicting lock on domain.duckdb", "netops", "audit:runs") in found
    assert ("db_query: no column x", "netops", "audit:tool_calls") in found
    assert errors_since(audit.path, datetime.now(UTC) + timedelta(hours=1)) == []


def test_memory_events_and_recent_recalls(audit: AuditRecorder) -> None:
    audit.memory_event("m1", "add", "user", {})
    audit.memory_event("m2", "supersede", "curator", {})
    audit.memory_event("m3", "add", "user", {})
    events = memory_events(audit.path, ["m1", "m2"])
    assert [(e[0], e[1], e[2]) for e in events] == [
        ("m1", "add", "user"),
        ("m2", "supersede", "curator"),
    ]
    assert memory_events(audit.path, []) == []

    audit.recall("r1", "core", FakeRecall("first", ["a"]))
    audit.recall("r2", "core", FakeRecall("second", ["b", "c"]))
    newest = recent_recalls(audit.path, run_id=None, limit=1)
    assert [(r[0], r[2]) for r in newest] == [("r2", "second")]
    only_r1 = recent_recalls(audit.path, run_id="r1", limit=10)
    assert [(r[0], r[2], r[3]) for r in only_r1] == [("r1", "first", '["a"]')]
