"""The self-improvement loop end to end with the scripted model: every lesson written is
read back by recall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from olav.compose import agent_session
from olav.core.config import Workspace
from olav.learning.patterns import extract_patterns
from olav.learning.trace_learner import learn_from_traces
from olav.llm.models import ScriptedChatModel
from olav.memory.recall.recaller import Recaller
from olav.memory.store.scopes import EVERYONE, private_scope, scoped_id
from olav.memory.store.table import MemoryStore
from olav.runtime.tools import ToolContext, registry
from tests.helpers import audit_rows, scripted_ws

pytestmark = pytest.mark.slow  # a module of 10 s or more: scheduled first (conftest.py)


class RegisterArgs(BaseModel):
    name: str = Field(description="service name")
    kind: str = Field(description="service kind")
    port: int = Field(description="port")


def register_service(ctx: ToolContext, name: str, kind: str, port: int) -> str:
    return f"registered {name} ({kind}) on port {port}"


@pytest.fixture
def services_agent(e5_ws: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setitem(
        registry._SPECS,
        "register_service",
        registry.ToolSpec(register_service, RegisterArgs, "Register a service in the catalogue."),
    )
    folder = e5_ws / "services"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: services\ndescription: registers services in the catalogue\n"
        "tools: [register_service]\n---\n"
    )
    (folder / "AGENT.md").write_text("Register services when asked.\n")
    return e5_ws


def run_scripts(ws_root: Path, agent: str, runs: list[tuple[str, list[dict]]]) -> None:  # type: ignore[type-arg]
    """Each (prompt, turns) as one run on a thread of its own, in one session whose scripted
    model plays every run's turns in order; the captures are written before this returns."""
    turns = [turn for _, script in runs for turn in script]
    ws = scripted_ws(ws_root, turns)
    session = agent_session(
        ws, agent=agent, model=ScriptedChatModel(turns=turns), learn_from_failures=False
    )
    for prompt, _ in runs:
        session.new_thread()
        session.ask(prompt)
    session.wait_background()  # the captures are written by the background writer
    session.release()


def _register(name: str, kind: str, port: int, answer: str) -> list[dict]:  # type: ignore[type-arg]
    call = {"name": "register_service", "args": {"name": name, "kind": kind, "port": port}}
    return [{"tool_calls": [call]}, {"content": answer}]


SERVICES = [
    ("influx_metrics", "influxdb", 8086),
    ("grafana_dash", "grafana", 3000),
    ("redis_cache", "redis", 6379),
    ("pg_orders", "postgres", 5432),
    ("kafka_events", "kafka", 9092),
    ("loki_logs", "loki", 3100),
]


def test_captures_become_a_pattern_that_recall_puts_first(services_agent: Path) -> None:
    root = services_agent
    # the second round replays the same operations
    runs = [(f"register the {k} service", _register(n, k, p, "done")) for n, k, p in SERVICES * 2]
    run_scripts(root, "services", runs)
    ws = Workspace.open(root)
    store = MemoryStore.for_workspace(ws)
    mine = private_scope(ws.config)  # what a run derives is its operator's
    assert mine.startswith("user:")
    assert len(store.list_rows(f"category = 'operational_event' AND scope = '{mine}'")) == 6
    assert not store.list_rows("category = 'operational_event' AND scope = 'services'")

    answer = (
        "Sure! Here is the pattern:\n```json\n"
        + json.dumps(
            {
                "summary": "To register a service call register_service with name, kind and port.",
                "required_args": ["name", "kind", "port"],
                "naming_conventions": ["name is <purpose>_<noun> in snake_case"],
                "auth_pattern": "",
                "variations": ["port is the service's default port"],
            }
        )
        + "\n```"
    )
    model = ScriptedChatModel(turns=[{"content": answer}, {"content": answer}])
    first = extract_patterns(store, model, min_samples=5)
    assert [(r.tool, r.written) for r in first] == [("register_service", True)]
    again = extract_patterns(store, model, min_samples=5)
    assert again[0].written and len(store.list_rows("category = 'expert_knowledge'")) == 1
    assert len(model.calls) == 2  # exactly one model call per group per run

    recaller = Recaller.for_config(
        store, Workspace.open(root).config, agent="services", tier="medium"
    )
    result = recaller.recall("register a new prometheus service")
    assert result.injected_ids[0] == scoped_id("pattern_services_register_service", mine)
    assert store.read(result.injected_ids[0], EVERYONE).scope == mine  # type: ignore[union-attr]
    assert "<purpose>_<noun>" in result.block


def test_garbage_pattern_answers_are_rejected(services_agent: Path) -> None:
    root = services_agent
    # twice: a capture reaches the patterns once a later completed run confirms it
    runs = [("register", _register(*svc, "ok")) for svc in SERVICES[:5]] * 2
    run_scripts(root, "services", runs)
    store = MemoryStore.for_workspace(Workspace.open(root))
    for bad in ("I cannot help with that.", "```json\n{}\n```", '{"summary": ""}'):
        res = extract_patterns(store, ScriptedChatModel(turns=[{"content": bad}]))
        assert not res[0].written and res[0].error, bad
    assert len(store.list_rows("category = 'expert_knowledge'")) == 0


def test_failed_runs_become_reflections_that_recall_only_when_related(e5_ws: Path) -> None:
    for i in range(3):
        ws = scripted_ws(e5_ws, [])
        session = agent_session(
            ws,
            agent="netops",
            learn_from_failures=False,
            model=ScriptedChatModel(
                turns=[
                    {
                        "tool_calls": [
                            {"name": "take_snapshot", "args": {"devices": [f"sh9-ghost0{i}"]}}
                        ]
                    },
                    {"error": "environment mismatch: lab inventory is stale"},
                ]
            ),
        )
        with pytest.raises(Exception, match="environment mismatch"):
            session.ask(f"take a snapshot of sh9-ghost0{i}")
    ws = Workspace.open(e5_ws)
    store = MemoryStore.for_workspace(ws)
    lessons = [
        "When take_snapshot fails with an environment mismatch, do not retry it; "
        "instead ask the operator to refresh the lab inventory.",
        "When take_snapshot fails with environment mismatch, don't call it again; "
        "ask the operator to refresh the inventory instead.",
    ]
    model = ScriptedChatModel(turns=[{"content": "<think>hmm</think>" + json.dumps(lessons)}])
    learned = learn_from_traces(ws, store, model)
    assert [x.added for x in learned] == [True, False]  # the near-duplicate is skipped
    row = store.read(learned[0].memory_id, EVERYONE)
    assert row is not None and row.category == "reflection"
    assert row.scope == private_scope(ws.config)  # a lesson from my runs is mine
    assert row.expires_at is not None
    failed = audit_rows(e5_ws, "SELECT id FROM runs WHERE outcome = 'failed'")
    # the lesson names the runs it was learned from (the console's run page lists it)
    assert sorted(row.metadata["run_ids"]) == sorted(r[0] for r in failed) and len(failed) == 3
    assert learn_from_traces(ws, store, model) == []  # runs are learned once

    # the calibrated gates, as AutoRecall builds them from the workspace's settings
    recaller = Recaller.for_config(store, ws.config, agent="netops", tier="small")
    related = recaller.recall("take a snapshot of the sh1 border routers")
    assert learned[0].memory_id in related.injected_ids
    for unrelated in (
        "write a poem about spring",
        "what time is it in Paris",
        "summarise this article about cooking",
    ):
        assert learned[0].memory_id not in recaller.recall(unrelated).injected_ids, unrelated


def test_reflector_writes_only_what_each_lane_may_write(e5_ws: Path) -> None:
    from olav.audit.recorder import AuditRecorder, ToolCallEntry
    from olav.cron.builtin import run_reflector

    ws = Workspace.open(e5_ws)
    audit = AuditRecorder(ws.audit_path)
    for i in range(3):
        rid = audit.start_run("netops", "s", "snapshot", "m")
        audit.tool_call(
            rid,
            "netops",
            ToolCallEntry(
                "take_snapshot",
                {"devices": [f"d{i}"]},
                f"Error: environment mismatch for run {i} at /srv/lab/{i}",
                "error",
                5.0,
            ),
        )
        audit.end_run(rid, "error", "environment mismatch")

    def files() -> dict[str, bytes]:
        skip = (".olav/databases", ".olav/logs")
        return {
            str(p.relative_to(e5_ws)): p.read_bytes()
            for p in e5_ws.rglob("*")
            if p.is_file() and not str(p.relative_to(e5_ws)).startswith(skip)
        }

    store = MemoryStore.for_workspace(ws)
    rows_before = {r.id for r in store.list_rows()}
    files_before = files()
    model = ScriptedChatModel(
        turns=[
            {"tool_calls": [{"name": "scan_error_signatures", "args": {"days": 1}}]},
            {
                "tool_calls": [
                    {
                        "name": "record_reflection",
                        "args": {
                            "lesson": "When take_snapshot reports an "
                            "environment mismatch, do not retry it."
                        },
                    },
                    {
                        "name": "propose_guide_draft",
                        "args": {
                            "intent": "refresh_inventory_first",
                            "keywords": ["snapshot", "快照"],
                            "body": "Refresh the inventory first.",
                        },
                    },
                    {
                        "name": "draft_code_fix",
                        "args": {
                            "title": "Stale lab inventory",
                            "root_cause": "devices.csv is stale",
                            "suggested_fix": "Reload it nightly.",
                        },
                    },
                    {
                        "name": "format_and_export",
                        "args": {"data": "x", "format": "md", "filename": "sneaky.md"},
                    },
                ]
            },
            {"content": "1 signature triaged"},
        ]
    )
    assert run_reflector(ws, model=model) == "1 signature triaged"
    signatures = json.loads(str(model.calls[1][-1].content))
    by_text = {s["signature"]: s for s in signatures}
    snap = [s for t, s in by_text.items() if t.startswith("take_snapshot: Error: environment")]
    assert len(snap) == 1 and snap[0]["count"] == 3  # 3 runs, ids and paths normalised away
    assert snap[0]["agents"] == ["netops"] and snap[0]["sources"] == ["audit:tool_calls"]
    new_rows = {r.id: r for r in store.list_rows()}.keys() - rows_before
    assert [store.read(i, EVERYONE).category for i in new_rows] == ["reflection"]  # type: ignore[union-attr]
    changed = {k for k, v in files().items() if files_before.get(k) != v}
    assert {c.split("/")[0] for c in changed} == {".curator_drafts", "exports"}
    assert len([c for c in changed if c.startswith(".curator_drafts/")]) == 1
    fixes = [c for c in changed if c.startswith("exports/reflections/")]
    assert len(fixes) == 1 and len(changed) == 2
    assert not (e5_ws / "exports" / "sneaky.md").exists()
