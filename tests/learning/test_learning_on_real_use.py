"""The learning loop fires on real use: the template's write tools become precedents, and a
run where the model only narrates is classified, learned from, and recalled next time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from olav.audit.recorder import AuditRecorder
from olav.compose import agent_session
from olav.core.config import Workspace
from olav.learning.trace_learner import failed_runs, learn_from_traces
from olav.llm.models import ScriptedChatModel
from olav.memory.store.scopes import private_scope
from olav.memory.store.table import MemoryStore
from olav.runtime.runner import Session
from olav.runtime.skills import SkillError, load_agent
from tests.helpers import OlavCli, OlavMain, scripted_ws

# the second narration answers the rescue layer's nudge: the run stays narrated
NARRATION = [{"content": "I will back up the router config now."}] * 2
REQUEST = "back up the config of sh1-border01"
LESSON = (
    "When asked to back up router configs, call backup_device_config; do not describe the steps."
)


def narrated_run(root: Path, **kw: Any) -> tuple[Session, str]:
    session = agent_session(
        scripted_ws(root, NARRATION), model=ScriptedChatModel(turns=NARRATION), **kw
    )
    result = session.ask(REQUEST)
    assert result.answer == NARRATION[0]["content"] and result.outcome == "narrated"
    return session, result.run_id


def script_model_answer(root: Path, turn: dict[str, Any]) -> None:
    """What the scripted model configured in olav.yaml answers next (trace-review's model)."""
    (root / "script.yaml").write_text(yaml.safe_dump([turn], allow_unicode=True))


def injected(olav: Any, query: str) -> list[str]:
    res = olav("memory", "why", query, "--json")
    assert res.exit_code == 0, res.output
    return list(json.loads(res.stdout)["injected"])


def test_a_narrated_run_becomes_a_lesson_recalled_for_a_similar_request(
    e5_ws: Path, olav: OlavCli
) -> None:
    session, run_id = narrated_run(e5_ws, learn_from_failures=False)
    rows = session.audit.query("SELECT status, outcome FROM runs WHERE id = ?", [run_id])
    assert rows == [("completed", "narrated")]
    (detail,) = session.audit.query(
        "SELECT detail FROM events WHERE run_id = ? AND kind = 'narrated'", [run_id]
    )
    assert "backup_device_config" in json.loads(detail[0])["tools"]  # core reaches netops'

    # the model answers with the lesson only when the prompt carries the narrated run
    script_model_answer(
        e5_ws,
        {"when": '"outcome": "narrated"', "content": json.dumps([LESSON]), "otherwise": {}},
    )
    res = olav("learn", "trace-review", "--json")
    assert res.exit_code == 0, res.output
    (learned,) = json.loads(res.stdout)
    assert learned["lesson"] == LESSON and learned["stored"] is True
    assert json.loads(olav("learn", "trace-review", "--json").stdout) == []  # learned once

    similar = "back up the running config of sh1-core02 before my change"
    assert learned["id"] in injected(olav, similar)
    assert learned["id"] not in injected(olav, "tell me a joke about cats")


def test_the_trace_learner_sees_what_was_said_and_which_tools_could_act(hash_ws: Path) -> None:
    narrated_run(hash_ws, learn_from_failures=False)
    ws = Workspace.open(hash_ws)
    model = ScriptedChatModel(turns=[{"content": json.dumps([LESSON])}])
    (lesson,) = learn_from_traces(ws, MemoryStore.for_workspace(ws), model)
    assert lesson.added and lesson.text == LESSON
    prompt = str(model.calls[0][-1].content)
    run = json.loads(next(ln for ln in prompt.splitlines() if ln.startswith('{"run_id"')))
    assert run["outcome"] == "narrated" and run["request"] == REQUEST
    assert run["answer"] == NARRATION[0]["content"]
    assert "backup_device_config" in run["tools_available"]
    assert "call <tool>; do not describe the steps" in prompt


def test_narrated_runs_start_background_learning_like_failures(hash_ws: Path) -> None:
    session = agent_session(
        scripted_ws(hash_ws, NARRATION), model=ScriptedChatModel(turns=NARRATION)
    )  # learn_from_failures is on by default
    script_model_answer(hash_ws, {"content": json.dumps([LESSON])})
    run_id = session.ask(REQUEST).run_id
    session.wait_background()  # joins the trace-learner thread
    store = MemoryStore.for_workspace(Workspace.open(hash_ws))
    (row,) = store.list_rows("category = 'reflection'")
    assert row.text == LESSON and row.metadata["source"] == "trace_learner"
    learned = session.audit.query(
        "SELECT count(*) FROM events WHERE kind = 'trace_learned' AND run_id = ?", [run_id]
    )
    assert learned == [(1,)]


def test_every_outcome_but_completed_is_reviewed(hash_ws: Path) -> None:
    audit = AuditRecorder(Workspace.open(hash_ws).audit_path)
    ids = {}
    for status, outcome in (
        ("completed", "completed"),
        ("completed", "narrated"),
        ("completed", "tool_error"),
        ("error", "failed"),
        ("cancelled", "cancelled"),
    ):
        ids[outcome] = audit.start_run("core", "s", f"a {outcome} run", "m")
        audit.end_run(ids[outcome], status, outcome=outcome)
    reviewed = failed_runs(hash_ws / ".olav/databases/audit.duckdb", hours=1, limit=10)
    assert {r["outcome"] for r in reviewed} == {"narrated", "tool_error", "failed", "cancelled"}
    assert {r["run_id"] for r in reviewed} == set(ids.values()) - {ids["completed"]}


def test_the_template_backup_is_captured_as_a_lasting_precedent(hash_ws: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "list_devices", "args": {"site": "sh1"}}]},
        {"tool_calls": [{"name": "backup_device_config", "args": {"device": "sh1-border01"}}]},
        {"content": "Saved exports/backups/sh1-border01.cfg"},
    ]
    ws = scripted_ws(hash_ws, turns)
    session = agent_session(
        ws, agent="netops", model=ScriptedChatModel(turns=turns), learn_from_failures=False
    )
    assert session.ask(REQUEST).outcome == "completed"
    session.wait_background()  # the capture is written by the background writer
    store = MemoryStore.for_workspace(ws)
    (event,) = store.list_rows("category = 'operational_event'")  # list_devices is a read
    assert event.metadata["tool"] == "backup_device_config"
    assert event.scope == private_scope(ws.config)  # the operator's, until promoted
    assert "exports/backups/" in event.text  # the result names the artifact ...
    month = datetime.now(UTC) + timedelta(days=30)
    assert event.expires_at is None or event.expires_at >= month  # ... and it still stays


def test_template_declares_capture_for_its_write_tools(hash_ws: Path) -> None:
    spec = load_agent(hash_ws / "netops").spec
    assert spec.capture == {"backup_device_config": True, "take_snapshot": True}
    assert spec.tools == [
        "list_devices",
        "backup_device_config",
        "take_snapshot",
        "format_and_export",
        "db_query",
    ]


def test_a_bad_capture_value_is_one_line_naming_the_file_and_field(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    skill = hash_ws / "netops" / "SKILL.md"
    skill.write_text(
        skill.read_text().replace("take_snapshot, capture: true", "take_snapshot, capture: maybe")
    )
    with pytest.raises(SkillError) as err:
        load_agent(hash_ws / "netops")
    assert str(err.value) == (
        f"{skill}: field 'tools.2.capture' is 'maybe'. Write capture: true or false"
    )
    res = olav_main("agent", "list")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "SKILL.md: field 'tools.2.capture' is 'maybe'" in line
