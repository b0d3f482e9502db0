from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from olav.core.redact import redact, redact_text
from olav.memory.ingest.capture import (
    ToolEvent,
    capture,
    event_id,
    invalidate_sql,
    is_write_tool,
    should_capture,
)
from olav.memory.policy import DEFAULTS
from olav.memory.store.filters import SearchFilter
from olav.memory.store.schema import CATEGORIES
from olav.memory.store.scopes import EVERYONE
from tests.helpers import hash_store


def test_write_verbs_match_snake_case_segments() -> None:
    for name in (
        "register_service",
        "format_and_export",
        "push_config",
        "exec_command",
        "create",
        "user_update",
    ):
        assert is_write_tool(name), name
    for name in (
        "list_devices",
        "db_query",
        "backup_device_config",
        "registry_lookup",
        "take_snapshot",
        "updates_feed",
    ):
        assert not is_write_tool(name), name


def test_secrets_are_redacted_by_key_and_by_shape() -> None:
    args = {
        "name": "influx",
        "api_key": "k-123",
        "auth_header": "Basic xyz",
        "nested": {"db_password": "pw", "url": "https://bob:hunter2@db.internal/x"},
        "note": "Authorization: Bearer abcdefghijklmnop token=sk_live_abcdefghijklmnopqrstu",
    }
    out = redact(args)
    flat = str(out)
    for secret in (
        "k-123",
        "Basic xyz",
        "'pw'",
        "hunter2",
        "abcdefghijklmnop",
        "sk_live_abcdefghijklmnopqrstu",
    ):
        assert secret not in flat, secret
    assert out["name"] == "influx" and "bob:" in out["nested"]["url"]
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"
    assert "MIIEow" not in redact_text(f"key: {pem}")
    assert "AKIAABCDEFGHIJKLMNOP" not in redact_text("aws AKIAABCDEFGHIJKLMNOP here")
    jwt = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n"
    assert jwt not in redact_text(f"token {jwt}")


def test_capture_stores_successful_writes_once_and_skips_failures(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    events = [
        ToolEvent(
            "services",
            "register_service",
            {"name": "influx", "token": "s3cr3t"},
            "registered influx on 10.0.0.5:8086",
            "success",
        ),
        ToolEvent("services", "register_service", {"name": "bad"}, "Error: port taken", "error"),
        ToolEvent("services", "register_service", {"name": "x"}, "boom", "error"),
        ToolEvent("services", "list_services", {}, "influx", "success"),
        # the tool node decides failure (status), not the first word of a result
        ToolEvent("services", "export_report", {"of": "errors"}, "Error rates saved", "success"),
    ]
    new = capture(store, events, question="register influx", run_id="r1")
    assert new == [
        event_id("register_service", {"name": "influx", "token": "s3cr3t"}),
        event_id("export_report", {"of": "errors"}),
    ]
    row = store.read(new[0], EVERYONE)
    assert row is not None
    assert row.category == "operational_event" and row.scope == "services"
    assert "s3cr3t" not in row.text and "Action: register_service" in row.text
    assert row.metadata["run_id"] == "r1" and row.metadata["tool"] == "register_service"
    assert row.expires_at is None
    assert capture(store, events, question="again", run_id="r2") == []  # replay: nothing new
    assert store.size() == 2


def test_expiry_follows_the_category_not_words_in_the_result(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    export = ToolEvent(
        "core",
        "format_and_export",
        {"filename": "a.md", "format": "md", "data": "x"},
        "Saved exports/a.md (1 bytes)",
        "success",
    )
    sql = ToolEvent("core", "db_query", {"sql": "SELECT 1"}, "1\n(1 rows)", "success")
    ids = capture(store, [export, sql], question="save it", run_id="r1")
    rows = {r.category: r for r in (store.read(i, EVERYONE) for i in ids) if r is not None}
    assert set(rows) == {"operational_event", "query_pattern"}
    assert all(r.expires_at is None for r in rows.values())  # no 24 h expiry for exports
    ttl = DEFAULTS.ttl
    assert ttl["operational_event"] is None and ttl["query_pattern"] is None
    assert set(ttl) == set(CATEGORIES)  # one table covers every category
    lesson = DEFAULTS.expiry_for("reflection", datetime(2026, 1, 1, tzinfo=UTC))
    assert lesson == datetime(2026, 1, 31, tzinfo=UTC)


def test_skill_declarations_override_the_verb_rule(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    backup = ToolEvent("netops", "backup_device_config", {"device": "r1"}, "Saved x", "success")
    export = ToolEvent("netops", "format_and_export", {"filename": "b.md"}, "Saved b", "success")
    listing = ToolEvent("netops", "list_devices", {}, "r1", "success")
    declared = {("netops", "backup_device_config"): True, ("netops", "format_and_export"): False}
    assert should_capture(backup, declared) and not should_capture(backup, {})
    assert not should_capture(export, declared) and should_capture(export, {})
    assert not should_capture(listing, declared)  # undeclared reads stay out
    other_agent = ToolEvent("core", "backup_device_config", {"device": "r1"}, "ok", "success")
    assert not should_capture(other_agent, declared)  # a declaration is per agent
    broken = ToolEvent("netops", "backup_device_config", {"device": "r2"}, "Error: no", "error")
    memory_tool = ToolEvent("core", "commit_to_memory", {}, "ok", "success")
    assert not should_capture(broken, declared)
    assert not should_capture(memory_tool, {("core", "commit_to_memory"): True})
    ids = capture(
        store, [backup, export, listing, broken], question="", run_id="r", declared=declared
    )
    assert ids == [event_id("backup_device_config", {"device": "r1"})]


def test_query_patterns_are_stored_once_and_invalidated_when_sql_fails(tmp_path: Path) -> None:
    store = hash_store(tmp_path / "m.lance")
    ok = ToolEvent(
        "core",
        "db_query",
        {"sql": "SELECT * FROM devices WHERE role='border'"},
        "hostname\nsh1-border01\n(1 rows)",
        "success",
    )
    q = "list the border routers"
    (pid,) = capture(store, [ok], question=q, run_id="r1")
    assert capture(store, [ok], question=q + "?", run_id="r2") == []  # same question and SQL
    row = store.read(pid, EVERYONE)
    assert row is not None and row.category == "query_pattern"
    assert "SELECT * FROM devices" in row.text and q in row.text
    empty = ToolEvent("core", "db_query", {"sql": "SELECT 1 WHERE false"}, "(0 rows)", "success")
    assert capture(store, [empty], question="", run_id="r3") == []  # no completed question
    assert invalidate_sql(store, "select *   from devices where role='border'") == 1
    assert (
        store.search(q, k=5, filter=SearchFilter(categories=["query_pattern"], reader=EVERYONE))
        == []
    )
