"""The audit as the agent's SQL sees it: one operator's runs, never another's (issue 52, 1).

Bob's run asks ``db_query`` for alice's messages, recall blocks and tool calls with every shape
of SQL an attacker would try: a join on ``operator``, the catalog-qualified names, a
``UNION`` over every table, ``ATTACH`` of the file, the table functions that read files.
Nothing of alice's comes back, and bob's own rows do.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from olav.audit.recorder import AuditRecorder, ToolCallEntry, prepare_audit
from olav.core.config import Workspace
from olav.runtime.tools import data
from tests.helpers import tool_context

CANARY = "tulip-99-canary"


def _as(root: Path, operator: str) -> Any:
    ctx = tool_context(root)
    ctx.config = {"memory.user": operator}
    return ctx


def _plant(root: Path, operator: str, secret: str) -> str:
    path = Workspace.open(root).audit_path
    assert prepare_audit(path)
    audit = AuditRecorder(path, operator=operator, migrated=True)
    run = audit.start_run("core", f"s-{operator}", f"the payroll code is {secret}", "m")
    audit.message(run, "user", f"remember {secret}")
    audit.tool_call(run, "core", ToolCallEntry("db_query", {"sql": secret}, secret, "success", 1.0))
    audit.event(run, "approval", {"note": secret})
    block = SimpleNamespace(query=secret, candidates=[], injected_ids=[], latency_ms=1.0)
    audit.recall(run, "core", SimpleNamespace(**vars(block), block=f"[user:{operator}] {secret}"))
    audit.end_run(run, "completed")
    return run


@pytest.fixture
def two_operators(hash_ws: Path) -> Path:
    _plant(hash_ws, "alice", CANARY)
    _plant(hash_ws, "bob", "bob-own-marker")
    everything = AuditRecorder(Workspace.open(hash_ws).audit_path).query(
        "SELECT count(*) FROM messages WHERE content LIKE ?", [f"%{CANARY}%"]
    )
    assert everything == [(1,)]  # planted, so a leak would show
    return hash_ws


ATTACKS = [
    "SELECT m.content FROM runs r JOIN messages m ON m.run_id = r.id WHERE r.operator = 'alice'",
    "SELECT block FROM recalls",
    "SELECT * FROM audit.runs",
    "SELECT * FROM audit.main.messages",
    "SELECT args, result FROM tool_calls",
    "SELECT detail FROM events",
    "SELECT query FROM runs UNION ALL SELECT content FROM messages UNION ALL SELECT block "
    "FROM recalls UNION ALL SELECT content FROM steps",
    "SELECT * FROM olav_audit_source.runs",
    "SELECT * FROM read_text('.olav/databases/audit.duckdb')",
    "SELECT * FROM read_blob('.olav/databases/audit.duckdb')",
    "SELECT * FROM duckdb_databases()",
    "SHOW ALL TABLES",
    "SELECT * FROM memory_events",
]


@pytest.mark.parametrize("sql", ATTACKS)
def test_bob_never_reads_alices_audit(two_operators: Path, sql: str) -> None:
    out = data.db_query(_as(two_operators, "bob"), sql)
    assert CANARY not in out


def test_bob_reads_his_own_runs(two_operators: Path) -> None:
    out = data.db_query(
        _as(two_operators, "bob"),
        "SELECT m.content FROM runs r JOIN messages m ON m.run_id = r.id",
    )
    assert "bob-own-marker" in out and out.endswith("(1 rows)")
    alice = data.db_query(_as(two_operators, "alice"), "SELECT block FROM recalls")
    assert CANARY in alice and "bob-own-marker" not in alice


def test_attach_of_the_file_is_refused(two_operators: Path) -> None:
    path = "'.olav/databases/audit.duckdb'"
    for sql in (f"ATTACH {path} AS a", f"SELECT 1; ATTACH {path}"):
        out = data.db_query(_as(two_operators, "bob"), sql)
        assert out.startswith("Error:") and CANARY not in out


def test_describe_table_lists_the_audit_without_rows(two_operators: Path) -> None:
    out = data.describe_table(_as(two_operators, "bob"), "messages")
    assert out.startswith("messages: ") and "content" in out and CANARY not in out


def test_a_long_statement_is_stopped(two_operators: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "QUERY_SECONDS", 0.2)
    out = data.db_query(
        _as(two_operators, "bob"),
        "SELECT count(*) FROM range(100000000) a, range(100000000) b WHERE a.range * b.range = 7",
    )
    assert out.startswith("Error: the query ran longer than 0.2 s")


def test_a_huge_result_is_counted_up_to_the_cap(
    two_operators: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "COUNTED_ROWS", 30_000)
    out = data.db_query(_as(two_operators, "bob"), "SELECT * FROM range(10000000)")
    assert out.endswith("(more than 30,000 rows, first 50 shown)")


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    tables=st.lists(st.sampled_from(sorted(data.AUDIT_ROWS)), min_size=1, max_size=4),
    column=st.sampled_from(["*", "to_json(t)::VARCHAR", "count(*)::VARCHAR"]),
    where=st.sampled_from(["", " WHERE true", " WHERE 1=1 OR 1=0"]),
)
def test_no_query_over_the_audit_tables_returns_alices_rows(
    two_operators: Path, tables: list[str], column: str, where: str
) -> None:
    parts = [f"SELECT {column} FROM {t} t{where}" for t in tables]
    sql = " UNION ALL ".join(parts) if column != "*" else parts[0]
    assert CANARY not in data.db_query(_as(two_operators, "bob"), sql)


# -- the audit reader: the one way olav serve reads runs ----------------------------------------

RUN_READS = {
    "list_runs",
    "count_runs",
    "iter_runs",
    "load_run",
    "recall_rows",
    "recall_candidates",
    "recent_recalls",
    "run_operators",
    "run_threads",
    "runs_tool_calls",
    "session_runs",
    "runs_to_learn",
    "errors_since",
    "health_rows",
}


def test_olav_serve_and_mcp_read_runs_only_through_the_audit_reader() -> None:
    import ast

    root = Path(__file__).resolve().parents[1] / "olav"
    found = []
    for folder in ("serve", "mcp"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "olav.audit"
                ):
                    found += [
                        f"{path.relative_to(root)}: {a.name}"
                        for a in node.names
                        if a.name in RUN_READS or node.module == "olav.audit.health"
                    ]
    assert found == [], "read the audit through olav.audit.reader.AuditReader: " + str(found)


def test_the_reader_names_its_operator_and_keeps_to_their_runs(two_operators: Path) -> None:
    from olav.audit.export import RunFilter
    from olav.audit.reader import AuditReader

    path = Workspace.open(two_operators).audit_path
    for nobody in ("", "  ", None):
        with pytest.raises(ValueError, match="name one"):
            AuditReader(path, nobody)  # type: ignore[arg-type]
    bob = AuditReader(path, "bob")
    alices = AuditReader(path, "alice").runs()
    assert len(alices) == 1 and bob.run(alices[0].id) is None  # hers is missing to him
    # a filter cannot widen it: its operator fields are replaced
    wide = RunFilter(operator="alice", or_unnamed=True)
    assert {r.operator for r in bob.runs(wide)} == {"bob"} and bob.count(wide) == 1
    assert list(bob.details(alices)) == []  # another's run is never filled
    assert bob.visible([alices[0].id, "no-such-run"]) == set()
    assert bob.whose([alices[0].id]) == {alices[0].id: False}
    shown = repr(bob.recalls(limit=100)) + repr(list(bob.details(bob.runs())))
    assert CANARY not in shown and "bob-own-marker" in shown
    assert CANARY in repr(AuditReader(path, "alice").recalls(limit=100))
