"""The agent runtime with the scripted model: tools, recall injection, guardrails, audit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from olav.memory.store.scopes import EVERYONE
from olav.runtime.hooks import Callbacks
from olav.runtime.skills import SkillError, load_agent
from olav.runtime.tools import strip_quote_leak
from tests.helpers import SessionFor, audit_rows

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def test_tool_call_result_and_final_answer_are_audited(
    session_for: SessionFor, hash_ws: Path
) -> None:
    session, model = session_for(
        [
            {
                "tool_calls": [
                    {
                        "name": "format_and_export",
                        "args": {"data": "# Audit\n| a | b |", "format": "md", "filename": "audit"},
                    }
                ]
            },
            {"content": "Saved exports/audit.md"},
        ]
    )
    result = session.ask("write the audit report to a file")
    assert result.answer == "Saved exports/audit.md"
    assert (hash_ws / "exports" / "audit.md").read_text() == "# Audit\n| a | b |"
    # the model saw the tool result before answering
    assert "Saved exports/audit.md" in str(model.calls[1][-1].content)
    runs = audit_rows(hash_ws, "SELECT id, agent, status, query, ended_at FROM runs")
    assert [(r[1], r[2], r[3]) for r in runs] == [
        ("core", "completed", "write the audit report to a file")
    ]
    assert runs[0][4] is not None
    calls = audit_rows(hash_ws, "SELECT run_id, tool, status, args FROM tool_calls")
    assert [(c[0], c[1], c[2]) for c in calls] == [(runs[0][0], "format_and_export", "success")]
    assert json.loads(calls[0][3])["filename"] == "audit"
    roles = audit_rows(hash_ws, "SELECT role FROM messages ORDER BY created_at")
    assert [r[0] for r in roles] == ["user", "assistant"]


def test_recall_block_reaches_the_model_but_not_the_history(
    session_for: SessionFor, hash_ws: Path
) -> None:
    session, model = session_for([{"content": "done"}])
    session.ask("please save the report with format_and_export")
    seen = model.calls[0]
    human = [m for m in seen if isinstance(m, HumanMessage)][-1]
    text = str(human.content)
    assert text.startswith("<relevant-memories>")
    assert text.endswith("please save the report with format_and_export")
    block = text.split("</relevant-memories>")[0] + "</relevant-memories>"
    golden = GOLDEN / "recall_block_export.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":  # regenerate deliberately, review the diff
        golden.write_text(block)
    assert block == golden.read_text()
    # the keyword boost: memories that name the snake_case tool from the query come first
    assert "[directive: export_when_asked_to_save]" in block
    names = ["format_and_export" in item for item in block.split("\n\n[")[1:]]
    assert names[0] and names == sorted(names, reverse=True)
    state = session.built.graph.get_state({"configurable": {"thread_id": session.thread_id}})
    stored = [m for m in state.values["messages"] if isinstance(m, HumanMessage)]
    assert [m.content for m in stored] == ["please save the report with format_and_export"]
    recalls = audit_rows(hash_ws, "SELECT agent, query, injected, candidates FROM recalls")
    assert recalls[0][0] == "core"
    injected = json.loads(recalls[0][2])
    assert "guide_core_export_when_asked_to_save" in injected
    assert any(c["decision"] == "injected" for c in json.loads(recalls[0][3]))
    from olav.core.config import Workspace
    from olav.memory.store.table import MemoryStore

    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    guide = "guide_core_export_when_asked_to_save"
    assert store.read(guide, EVERYONE).access_count == 0  # type: ignore[union-attr]  # batched
    session.close()  # the session writes its access-count bumps at the end
    assert store.read(guide, EVERYONE).access_count == 1  # type: ignore[union-attr]


def test_static_context_l0_always_and_l1_on_intent(session_for: SessionFor, hash_ws: Path) -> None:
    netops = hash_ws / "netops"
    spec = load_agent(netops).spec
    assert spec.static_context and spec.on_intent
    l0 = (netops / spec.static_context[0]).read_text().strip().splitlines()[0]
    l1_file = spec.on_intent[0]
    l1 = (netops / l1_file.file).read_text().strip().splitlines()[0]
    session, model = session_for([{"content": "a"}, {"content": "b"}], agent="netops")
    session.ask("list the devices in sh1")
    system = str(model.calls[0][0].content)
    assert l0 in system and l1 not in system
    first = len(model.calls)  # the recalled guide names list_devices: the run may be nudged
    session.ask(f"why is the {l1_file.keywords[0]} session down?")
    system = str(model.calls[first][0].content)
    assert l0 in system and l1 in system


def test_tool_cap_is_a_build_time_error_naming_the_agent(tmp_path: Path) -> None:
    agent = tmp_path / "bloated"
    agent.mkdir()
    (agent / "SKILL.md").write_text(
        "---\nname: bloated\ndescription: too many tools\ntools: [a, b, c, d, e, f]\n---\n"
    )
    with pytest.raises(SkillError, match=r"agent bloated has 6 tools; .* at most 5"):
        load_agent(agent)


def test_unknown_tool_in_skill_is_a_build_error(session_for: SessionFor, hash_ws: Path) -> None:
    skill = hash_ws / "admin" / "SKILL.md"
    skill.write_text(skill.read_text().replace("memory_stats", "memory_statz"))
    session, _ = session_for([{"content": "x"}])
    from olav.core.errors import OlavError

    with pytest.raises(OlavError, match="agent admin lists unknown tool 'memory_statz'"):
        session.ask("hi")


@pytest.mark.parametrize("approve", [True, False])
def test_dangerous_tool_needs_approval_and_both_answers_are_audited(
    session_for: SessionFor, hash_ws: Path, approve: bool
) -> None:
    asked: list[str] = []

    def approver(name: str, args: dict) -> bool:  # type: ignore[type-arg]
        asked.append(name)
        return approve

    session, model = session_for(
        [
            {"tool_calls": [{"name": "take_snapshot", "args": {"devices": ["sh1-border01"]}}]},
            {"content": "finished"},
        ],
        agent="netops",
        callbacks=Callbacks(approver=approver),
    )
    session.ask("take a snapshot of sh1-border01")
    assert asked == ["take_snapshot"]
    snaps = list((hash_ws / "exports" / "snapshots").glob("*.json")) if approve else []
    assert bool(snaps) is approve
    tool_result = str(model.calls[1][-1].content)
    assert ("denied" in tool_result) is (not approve)
    events = audit_rows(hash_ws, "SELECT kind FROM events WHERE kind <> 'run_stats'")
    assert [e[0] for e in events] == ["approval" if approve else "denial"]
    status = audit_rows(hash_ws, "SELECT status FROM tool_calls")[0][0]
    assert status == ("success" if approve else "error")


def test_quote_leak_is_stripped() -> None:
    assert strip_quote_leak('"reports"') == "reports"
    assert strip_quote_leak("'\"x\"'") == "x"
    assert strip_quote_leak(" “报告” ") == "报告"
    assert strip_quote_leak('say "hi" now') == 'say "hi" now'


def test_writes_outside_exports_are_denied(session_for: SessionFor, hash_ws: Path) -> None:
    session, model = session_for(
        [
            {
                "tool_calls": [
                    {
                        "name": "format_and_export",
                        "args": {"data": "x", "format": "txt", "filename": "../core/AGENT.md"},
                    },
                    {
                        "name": "write_file",
                        "args": {"file_path": "/core/AGENT.md", "content": "pwned"},
                    },
                ]
            },
            {"content": "ok"},
        ]
    )
    before = (hash_ws / "core" / "AGENT.md").read_text()
    session.ask("overwrite the core agent file")
    assert (hash_ws / "core" / "AGENT.md").read_text() == before
    results = [str(m.content) for m in model.calls[1] if m.type == "tool"]
    assert any("outside exports/" in r for r in results)
    assert any("'write_file' is not available" in r for r in results)
    statuses = audit_rows(hash_ws, "SELECT tool, status FROM tool_calls ORDER BY tool")
    assert statuses == [("format_and_export", "error"), ("write_file", "error")]


def test_core_delegates_to_a_subagent_with_its_own_recall(
    session_for: SessionFor, hash_ws: Path
) -> None:
    session, model = session_for(
        [
            {
                "tool_calls": [
                    {
                        "name": "task",
                        "args": {
                            "subagent_type": "netops",
                            "description": "备份路由器配置 for sh1",
                        },
                    }
                ]
            },
            {"tool_calls": [{"name": "list_devices", "args": {"site": "sh1", "role": "border"}}]},
            {"content": "sh1 has two border routers"},
            {"content": "netops reports: sh1 has two border routers"},
        ]
    )
    result = session.ask("备份 sh1 的路由器配置")
    assert result.answer == "netops reports: sh1 has two border routers"
    sub_view = model.calls[1]
    sub_human = [m for m in sub_view if isinstance(m, HumanMessage)][-1]
    assert "<relevant-memories>" in str(sub_human.content)
    agents = audit_rows(hash_ws, "SELECT DISTINCT agent FROM recalls ORDER BY 1")
    assert [a[0] for a in agents] == ["core", "netops"]
    calls = audit_rows(hash_ws, "SELECT agent, tool, status FROM tool_calls ORDER BY created_at")
    assert ("netops", "list_devices", "success") in calls
    assert ("core", "task", "success") in calls


def test_db_query_is_read_only_and_describe_table_helps(
    session_for: SessionFor, hash_ws: Path
) -> None:
    session, model = session_for(
        [
            {
                "tool_calls": [
                    {"name": "db_query", "args": {"sql": "DROP TABLE devices"}},
                    {"name": "db_query", "args": {"sql": "SELECT nme FROM devices"}},
                    {"name": "describe_table", "args": {"name": "devices"}},
                    {
                        "name": "db_query",
                        "args": {"sql": "SELECT count(*) AS n FROM devices WHERE role = 'border'"},
                    },
                    {"name": "db_query", "args": {"sql": "SELECT * FROM read_csv('/etc/passwd')"}},
                ]
            },
            {"content": "done"},
        ]
    )
    session.ask("how many border routers?")
    results = [str(m.content) for m in model.calls[1] if m.type == "tool"]
    assert "read-only" in results[0]
    assert "describe_table" in results[1]
    assert results[2].startswith("devices: hostname")
    assert results[3].splitlines()[1] == "4"
    assert results[4].startswith("Error")
