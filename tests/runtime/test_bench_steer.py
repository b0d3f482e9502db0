"""``olav bench steer``: the memory on/off harness, through the scripted model, the real Ollama
client against the stub server, and the CLI."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from olav.bench.steer import (
    DEFAULT_SCENARIOS,
    check_scenarios,
    load_scenarios,
    markdown_steer,
    run_steer,
)
from olav.core.config import Workspace
from olav.core.errors import ModelError, OlavError
from olav.memory.store.table import MemoryStore
from tests.helpers import OlavMain, ollama_workspace, scripted_ws
from tests.stubs.ollama_stub import StubState, ollama_stub

MARK = "<relevant-memories>"
PROMPT = "write a script to back up every router's config and save it to exports/"
SCRIPT = "import os\nPASSWORD = os.environ['ROUTER_PASSWORD']\n# back up sh1-border01 ...\n"
NARRATION = "I will now write a Python script that backs up every router's configuration."
EXPORT = {
    "name": "format_and_export",
    "args": {"data": SCRIPT, "format": "txt", "filename": "backup_routers.py"},
}
# The model calls the tool only when the recall block sits next to the request.
STEERED = [
    {"when": MARK, "tool_calls": [EXPORT], "otherwise": {"content": NARRATION}},
    {"content": "Saved exports/backup_routers.py"},
]


def scenario_file(root: Path, text: str | None = None) -> Path:
    path = root / "steer.yaml"
    path.write_text(
        text
        or f"""
scenarios:
  - id: script_env
    agent: netops
    prompt: "{PROMPT}"
    expect_tool: format_and_export
    expect_artifact: exports/*.py
    expect_contains: os.environ
  - id: script_as_shell
    agent: netops
    prompt: "{PROMPT}"
    expect_tool: format_and_export
    expect_artifact: exports/*.sh
""",
        encoding="utf-8",
    )
    return path


def memory_rows(ws: Workspace) -> int:
    return MemoryStore.for_workspace(ws).size()


def without_nudge(ws: Workspace) -> Workspace:
    """Memory's own effect: the rescue layer's nudge off (it would rescue the narration)."""
    cfg = ws.olav_dir / "olav.yaml"
    data = yaml.safe_load(cfg.read_text()) or {}
    data.setdefault("runtime", {})["nudge"] = False
    cfg.write_text(yaml.safe_dump(data))
    return Workspace.open(ws.root)


def test_memory_on_calls_the_tool_and_memory_off_narrates(hash_ws: Path, tmp_path: Path) -> None:
    ws = without_nudge(scripted_ws(hash_ws, STEERED))
    rows_before = memory_rows(ws)
    scenarios = load_scenarios(scenario_file(tmp_path))
    seen: list[str] = []
    report = run_steer(ws, scenarios, runs=2, progress=seen.append)

    assert json.loads(json.dumps(report)) == report
    assert len(seen) == 2 * 2 * 2 and seen[0].startswith("[1/8] script_env: memory on")
    env, shell = report["scenarios"]
    assert env["id"] == "script_env" and shell["id"] == "script_as_shell"
    on, off = env["on"], env["off"]
    assert (on["runs"], on["tool_called"], on["tool_calls_mean"], on["artifact"]) == (2, 1, 1, 1)
    assert (off["runs"], off["tool_called"], off["tool_calls_mean"], off["artifact"]) == (
        2,
        0,
        0,
        0,
    )
    assert on["errors"] == off["errors"] == 0
    for run in on["results"]:
        assert run["tools"] == ["format_and_export"]
        assert run["artifacts"] == ["exports/backup_routers.py"]
        assert run["answer"] == "Saved exports/backup_routers.py"
        assert run["recalled"]  # the ids of the memories injected
    for run in off["results"]:
        assert (run["tools"], run["artifacts"], run["recalled"]) == ([], [], [])
        assert run["answer"] == NARRATION
        assert (run["outcome"], run["nudged"], run["salvaged"]) == ("narrated", False, [])
    assert (off["outcomes"], on["outcomes"]) == ({"narrated": 2}, {"completed": 2})
    # the tool is called, but no *.sh artifact appears
    assert (shell["on"]["tool_called"], shell["on"]["artifact"]) == (1, 0)
    assert shell["on"]["results"][0]["artifacts"] == []

    summary = report["summary"]
    assert summary["on"]["runs"] == summary["off"]["runs"] == 4
    assert (summary["on"]["tool_called"], summary["on"]["artifact"]) == (1, 0.5)
    assert (summary["off"]["tool_called"], summary["off"]["artifact"]) == (0, 0)
    assert (summary["tool_called_delta"], summary["artifact_delta"]) == (1, 0.5)
    assert "memory adds +100 pp tool calls, +50 pp artifacts" in summary["line"]
    for mode in ("on", "off"):
        assert 0 <= summary[mode]["seconds_mean"] <= summary[mode]["seconds_p95"]

    # isolation: every run recalled the same memories (no capture leaked from an earlier run),
    # and the real workspace gained no file, memory or audited run
    recalled = {tuple(r["recalled"]) for s in report["scenarios"] for r in s["on"]["results"]}
    assert len(recalled) == 1
    assert not (hash_ws / "exports" / "backup_routers.py").exists()
    assert memory_rows(ws) == rows_before
    assert report["models"] == ["qwen3:8b"] and report["provider"] == "scripted"
    logs = [getattr(h, "baseFilename", None) for h in logging.getLogger("olav").handlers]
    assert all(Path(f).parent.is_dir() for f in logs if f)  # no handler left on a deleted sandbox

    md = markdown_steer(report)
    assert "| script_env | netops | on | 100% | 1.00 | 100% |" in md
    assert "| script_env | netops | off | 0% | 0.00 | 0% |" in md
    assert summary["line"] in md


def test_a_question_is_answered_from_memory_and_not_without_it(
    hash_ws: Path, tmp_path: Path
) -> None:
    said = "The sh1 management subnet is 10.10.0.0/24."
    ws = without_nudge(
        scripted_ws(
            hash_ws, [{"when": MARK, "content": said, "otherwise": {"content": "No idea."}}]
        )
    )
    path = tmp_path / "questions.yaml"
    path.write_text(
        "scenarios:\n  - id: subnet\n    agent: netops\n"
        "    prompt: Which management subnet does the sh1 site use?\n"
        '    expect_answer: ["10.10.0.0/24"]\n',
        encoding="utf-8",
    )
    report = run_steer(ws, load_scenarios(path), runs=2)
    (question,) = report["scenarios"]
    assert (question["on"]["answered"], question["off"]["answered"]) == (1, 0)
    assert question["on"]["tool_called"] is None and question["on"]["artifact"] is None
    summary = report["summary"]
    assert summary["answered_delta"] == 1 and summary["tool_called_delta"] is None
    assert "memory on: answered 100%" in summary["line"]
    assert "memory adds +100 pp right answers" in summary["line"]
    assert "tool called" not in summary["line"]
    assert "| subnet | netops | on | - | 0.00 | - | 100% |" in markdown_steer(report)


def test_the_shipped_questions_are_answered_by_the_template_guides(hash_ws: Path) -> None:
    from olav.bench.steer import DEFAULT_SCENARIOS as TOOLS

    questions = load_scenarios(TOOLS.parent / "guide_answers.yaml")
    assert len(questions) >= 8 and all(q.expect_answer for q in questions)
    check_scenarios(Workspace.open(hash_ws), questions)
    for q in questions:  # each answer is in a guide of its agent: memory can answer it
        guides = " ".join(p.read_text() for p in (hash_ws / q.agent / "guides").glob("*.yaml"))
        assert any(a.strip(".") in guides for a in q.expect_answer or []), q.id


def test_a_failing_run_is_counted_not_fatal(hash_ws: Path, tmp_path: Path) -> None:
    ws = scripted_ws(hash_ws, [{"error": "the model crashed"}])
    scenarios = load_scenarios(scenario_file(tmp_path))[:1]
    report = run_steer(ws, scenarios, runs=1)
    for mode in ("on", "off"):
        stats = report["scenarios"][0][mode]
        assert (stats["errors"], stats["tool_called"], stats["artifact"]) == (1, 0, 0)
        assert "the model crashed" in stats["results"][0]["error"]


def _stub_reply(request: dict[str, Any]) -> dict[str, Any]:
    messages = request["messages"]
    if messages[-1]["role"] == "tool":
        return {"content": "Saved exports/backup_routers.py"}
    user = [m for m in messages if m["role"] == "user"][-1]["content"]
    return {"tool_calls": [EXPORT]} if MARK in user else {"content": NARRATION}


def stub_ws(root: Path, url: str) -> Workspace:
    return Workspace.open(ollama_workspace(root, url))


@pytest.mark.slow
def test_through_the_real_ollama_client(tmp_path: Path) -> None:
    state = StubState(chat_reply=_stub_reply)
    with ollama_stub(state) as (url, _):
        ws = stub_ws(tmp_path / "ws", url)
        scenarios = load_scenarios(scenario_file(tmp_path))[:1]
        state.requests.clear()
        report = run_steer(ws, scenarios, runs=1)
    on, off = report["scenarios"][0]["on"], report["scenarios"][0]["off"]
    assert (on["tool_called"], on["tool_calls_mean"], on["artifact"]) == (1, 1, 1)
    assert (off["tool_called"], off["tool_calls_mean"], off["artifact"]) == (0, 0, 0)
    # the narration was nudged once; this stub narrates again, so the run stays narrated
    assert (off["nudged"], off["outcomes"], on["nudged"]) == (1, {"narrated": 1}, 0)
    assert report["models"] == ["qwen3:8b"] and report["provider"] == "ollama"
    chats = [body for path, body in state.requests if path == "/api/chat"]
    users = [[m for m in c["messages"] if m["role"] == "user"][-1]["content"] for c in chats]
    # run 1: memory on (tool call, then the answer), then memory off (a narrating reply,
    # the nudge naming the tool, a second narration)
    assert [MARK in u for u in users] == [True, True, False, False]
    assert all(u.endswith(PROMPT) for u in users[:3])
    assert (
        users[3].startswith("[olav] You described the action") and "format_and_export" in users[3]
    )
    # the nudge is for that call only: the narration before it is not kept
    assert [m["role"] for m in chats[3]["messages"]][-2:] == ["assistant", "user"]
    assert all(c["model"] == "qwen3:8b" for c in chats)
    assert not (ws.root / "exports" / "backup_routers.py").exists()


def test_no_server_aborts_with_the_ollama_serve_hint(hash_ws: Path, tmp_path: Path) -> None:
    scenarios = load_scenarios(scenario_file(tmp_path))
    with pytest.raises(ModelError) as err:
        run_steer(Workspace.open(hash_ws), scenarios, runs=3)
    line = str(err.value)
    assert "\n" not in line and "ollama serve" in line and "llm.base_url" in line


def test_shipped_scenarios_fit_the_template_workspace(hash_ws: Path) -> None:
    scenarios = load_scenarios(DEFAULT_SCENARIOS)
    assert 4 <= len(scenarios) <= 8
    cjk = re.compile(r"[\u4e00-\u9fff]")
    assert any(cjk.search(s.prompt) for s in scenarios)
    assert any(not cjk.search(s.prompt) for s in scenarios)
    assert any(
        s.expect_tool == "format_and_export" and s.expect_artifact == "exports/*.py"
        for s in scenarios
    )
    check_scenarios(Workspace.open(hash_ws), scenarios)  # agents and tools exist


GOOD = """\
scenarios:
  - id: one
    agent: netops
    prompt: back up sh1-border01
    expect_tool: backup_device_config
    expect_artifact: exports/backups/*.cfg
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("    expect_tool: backup_device_config\n", ""), ["'one'", "'expect_tool'"]),
        (GOOD + "    expect_tol: x\n", ["'one'", "'expect_tol'", "Extra inputs"]),
        (GOOD.replace("prompt: back up sh1-border01", "prompt: 42"), ["'one'", "'prompt'"]),
        (GOOD.replace("exports/backups/*.cfg", "/etc/*.cfg"), ["'one'", "'expect_artifact'"]),
        (GOOD.replace("exports/backups/*.cfg", "../x/*.cfg"), ["'one'", "'expect_artifact'"]),
        (GOOD.replace("backup_device_config", "back up"), ["'one'", "'expect_tool'"]),
        (GOOD.replace("id: one", "agent: two"), ["line 3", "duplicate key 'agent'"]),
        (GOOD.replace("  - id: one\n", "  - agent_x: 1\n"), ["scenario #1", "'id'"]),
        (GOOD + GOOD.split("\n", 1)[1], ["'one'", "'id'", "duplicate id"]),
        ("scenarios: []\n", ["'scenarios'"]),
        ("scenario:\n  - id: one\n", ["field 'scenario"]),
        ("scenarios: [\n", ["not valid YAML"]),
        ("- just a list\n", ["mapping"]),
    ],
)
def test_bad_scenario_files_name_file_scenario_and_field(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = scenario_file(tmp_path, text)
    with pytest.raises(OlavError) as err:
        load_scenarios(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(path))
    for part in expected:
        assert part in line, line


def test_unknown_agent_or_unreachable_tool_is_refused(hash_ws: Path, tmp_path: Path) -> None:
    ws = Workspace.open(hash_ws)
    wrong_agent = load_scenarios(scenario_file(tmp_path, GOOD.replace("netops", "nobody")))
    with pytest.raises(OlavError, match="'one': field 'agent': no agent named 'nobody'"):
        run_steer(ws, wrong_agent)
    wrong_tool = load_scenarios(scenario_file(tmp_path, GOOD.replace("netops", "admin")))
    with pytest.raises(OlavError, match="field 'expect_tool': admin cannot call"):
        run_steer(ws, wrong_tool)
    assert load_scenarios(scenario_file(tmp_path, GOOD))[0].agent == "netops"


@pytest.mark.slow
def test_cli_json_and_table(hash_ws: Path, tmp_path: Path, olav_main: OlavMain) -> None:
    scripted_ws(hash_ws, STEERED)
    path = scenario_file(tmp_path)
    res = olav_main("bench", "steer", "--scenarios", str(path), "--runs", "1", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["scenarios_file"] == str(path)
    env = report["scenarios"][0]
    assert (env["on"]["tool_called"], env["on"]["artifact"]) == (1, 1)
    assert (env["off"]["tool_called"], env["off"]["artifact"]) == (0, 0)

    res = olav_main("bench", "steer", "--scenarios", str(path), "--agent", "core")
    assert res.returncode == 1
    assert res.stderr.strip().count("\n") == 0 and "no scenario in" in res.stderr


def test_cli_table(hash_ws: Path, tmp_path: Path, olav: Any) -> None:
    scripted_ws(hash_ws, STEERED)
    path = scenario_file(tmp_path)
    result = olav("bench", "steer", "--scenarios", str(path), "--runs", "1", "-a", "netops")
    assert result.exit_code == 0, result.output
    assert "memory on vs off" in result.output
    assert "script_env" in result.output and "script_as_shell" in result.output
    assert "memory adds +100 pp tool calls, +50 pp artifacts" in result.output


def test_cli_without_a_server_prints_the_one_line_hint(hash_ws: Path, olav_main: OlavMain) -> None:
    res = olav_main("bench", "steer", "--runs", "1")
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "ollama serve" in lines[0] and "llm.base_url" in lines[0]


def test_cli_bad_scenario_file_is_one_line(
    hash_ws: Path, tmp_path: Path, olav_main: OlavMain
) -> None:
    path = scenario_file(tmp_path, GOOD.replace("expect_artifact", "expect_artefact"))
    res = olav_main("bench", "steer", "--scenarios", str(path))
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "'one'" in lines[0]


def test_session_with_recall_off_recalls_nothing(hash_ws: Path) -> None:
    """The memory-off arm is a constructor parameter of Session (no client patches its
    recallers): every recall comes back empty, also after the agent is rebuilt."""
    from olav.compose import agent_session
    from olav.runtime.hooks import Callbacks

    ws = without_nudge(scripted_ws(hash_ws, STEERED + STEERED))
    seen: dict[bool, list[Any]] = {}
    for recall in (True, False):
        session = agent_session(
            ws,
            agent="netops",
            callbacks=Callbacks(approver=lambda name, args: False),
            learn_from_failures=False,
            recall=recall,
        )
        assert session.build() is session.build()  # built once
        session.ask(PROMPT)
        session.wait_background()
        seen[recall] = list(session.run.recalls)
        if not recall:
            session.switch_agent("netops")  # a rebuilt agent keeps recall off
            rec = session.build().recallers["netops"]
            assert not rec.recall(PROMPT).block
        session.close()
    assert any(r.block for r in seen[True])
    assert seen[False] and not any(r.block or r.injected_ids for r in seen[False])
