"""`olav mcp` without the protocol: the schema's enums and categories, draft ids, outcome checks,
and the CLI's one-line errors (the server itself: test_mcp_stdio.py, test_mcp_http.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest

from olav.audit.events import FINAL_OUTCOMES
from olav.mcp.server import Category, Outcome, RememberCategory
from olav.mcp.service import REMEMBER_CATEGORIES, ToolCall, check_outcome, draft_intent
from olav.memory.store.schema import CATEGORIES

# -- without the protocol -----------------------------------------------------------------------


def test_schema_enums_are_the_ones_olav_uses() -> None:
    assert get_args(Category) == CATEGORIES
    assert get_args(Outcome) == FINAL_OUTCOMES
    assert get_args(RememberCategory) == REMEMBER_CATEGORIES
    assert "document" not in REMEMBER_CATEGORIES and "topology" not in REMEMBER_CATEGORIES


def test_draft_ids_are_stable_and_distinct() -> None:
    first = draft_intent("The R1 loopback is 10.0.0.1")
    assert first == draft_intent("The  R1 loopback is 10.0.0.1")
    assert first != draft_intent("The R1 loopback is 10.0.0.2")
    assert first.startswith("r1_loopback_")
    assert re.fullmatch(r"memory_[0-9a-f]{6}", draft_intent("备份配置用 SCP"[:4]))


@pytest.mark.parametrize(
    ("calls", "outcome", "error", "problem"),
    [
        ([], "tool_error", None, "needs a call with status error"),
        (
            [ToolCall("save_config", {}, "Error: disk full", "error")],
            "completed",
            None,
            "tool_error",
        ),
        ([ToolCall("save_config")], "narrated", None, "no tool was called"),
        ([], "failed", None, "needs the error"),
        ([], "finished", None, "outcome must be one of"),
    ],
)
def test_an_outcome_that_contradicts_its_calls_is_refused(
    calls: list[ToolCall], outcome: str, error: str | None, problem: str
) -> None:
    from olav.mcp.service import McpArgumentError

    with pytest.raises(McpArgumentError, match=problem):
        check_outcome(calls, outcome, error)
    check_outcome([ToolCall("task")], "narrated", None)  # delegating is not acting


def test_unknown_agent_and_stray_port_are_one_line_errors(e5_ws: Path, olav: Any) -> None:
    result = olav("mcp", "--agent", "nosuch")
    assert result.exit_code == 1
    assert "there is no agent 'nosuch'" in str(result.exception)
    assert "core" in str(result.exception) and "netops" in str(result.exception)
    result = olav("mcp", "--port", "9999")
    assert result.exit_code == 1 and "--http" in str(result.exception)


def test_the_category_schema_is_the_tables() -> None:
    """The MCP schema spells the categories out for clients; it must follow the table's."""
    from typing import get_args

    from olav.mcp.server import Category
    from olav.memory.store.schema import CATEGORIES

    assert get_args(Category) == CATEGORIES
