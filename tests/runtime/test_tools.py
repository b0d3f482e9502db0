"""Built-in tools: what the model is told about SQL results, locked databases and failures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from olav.runtime.tools import build_tools, data
from tests.helpers import tool_context


def _call(tool: object, args: dict[str, object]) -> ToolMessage:
    msg = tool.invoke({"name": "t", "args": args, "id": "c1", "type": "tool_call"})  # type: ignore[attr-defined]
    assert isinstance(msg, ToolMessage)
    return msg


def test_db_query_reports_the_exact_row_count(hash_ws: Path) -> None:
    out = data.db_query(tool_context(hash_ws), "SELECT range AS n FROM range(1234)")
    assert out.endswith("(1234 rows, first 50 shown)")
    assert len(out.splitlines()) == 1 + 50 + 1  # header, the rows shown, the count
    small = data.db_query(tool_context(hash_ws), "SELECT 1 AS one")
    assert small.endswith("(1 rows)")


def test_a_database_another_process_holds_is_an_error_not_a_missing_schema(
    hash_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = tool_context(hash_ws)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
            "sys.stdin.readline()",
            str(ctx.domain_db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        monkeypatch.setattr(data, "ATTACH_TRIES", 2)
        out = data.db_query(ctx, "SELECT count(*) FROM devices")
    finally:
        holder.communicate("done\n", timeout=30)
    assert out.startswith("Error: the domain database")
    assert "retry in a moment" in out
    assert "devices" not in out.split("Error")[0]


def test_failure_is_the_tools_status_not_the_first_word_of_its_result(hash_ws: Path) -> None:
    (query,) = build_tools(["db_query"], tool_context(hash_ws))
    fine = _call(query, {"sql": "SELECT 'none' AS \"Error rate\""})
    assert fine.status == "success" and str(fine.content).startswith("Error rate")
    bad = _call(query, {"sql": "DELETE FROM devices"})
    assert bad.status == "error" and "read-only" in str(bad.content)
