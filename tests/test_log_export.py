"""`olav log`: audited runs listed, shown and exported as datasets (olav.audit.export).

The runs come from the real runner (a scripted model in a hash workspace), so the ``steps``
rows are the ones a chat writes; the edge cases a chat cannot produce on demand (a run killed
between a tool call and its result, a nudge, a run recorded before ``steps`` existed, rows
an older olav redacted less) are written with AuditRecorder or plain SQL.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from olav.audit.export import (
    ExportOptions,
    RunFilter,
    export_runs,
    list_runs,
    split_groups,
    split_test_path,
    tool_catalog,
    validate_openai,
    validate_sharegpt,
)
from olav.audit.recorder import OUTCOMES, AuditRecorder, ToolCallEntry
from tests.helpers import OlavMain, scripted_ws

# a few representative secret shapes (the reliability suite's corpus is its own): each is
# (text, the part that must not reach an export)
SECRETS = [
    ("password=Hunter2Secret!", "Hunter2Secret"),
    ("Authorization: Bearer BearerTok0123456789abc", "BearerTok0123456789abc"),
    ("aws key AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE"),
    ("clone https://alice:UrlPassw0rd@git.example.com/r.git", "UrlPassw0rd"),
    ("push with ghp_GhTok0123456789abcdefghijklmnopq", "GhTok0123456789"),
    ("enable secret 5 CiscoEnable77", "CiscoEnable77"),
]
SECRET_TEXT = "; ".join(text for text, _ in SECRETS)
NEEDLES = [needle for _, needle in SECRETS]

EXPORT_CALL = {
    "name": "format_and_export",
    "args": {"data": "# Audit\n| a | b |", "format": "md", "filename": "audit"},
}
REQUESTS = {
    "export": "write the audit report to a file",
    "follow_up": "thanks, anything else to check?",
    "secret": f"save this note: {SECRET_TEXT}",
    "salvaged": "save the device list to a file please",
    "thinking": "export the summary as markdown",
    "failed": "describe the devices table",
    "netops": "list the border devices in sh1",
    "killed": "back up every border router",
    "nudged": "take a snapshot of sh1-border01",
    "old": "an old run before steps existed",
}


@dataclass
class Audited:
    """The module's workspace and what each request's run is."""

    root: Path
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def audit(self) -> Path:
        return self.root / ".olav" / "databases" / "audit.duckdb"


def _ask(root: Path, request: str, turns: list[dict[str, Any]], *, agent: str = "core") -> str:
    """One request through a real Session on a fresh thread; the run's id."""
    from olav.compose import agent_session
    from olav.llm.models import ScriptedChatModel

    model = ScriptedChatModel(turns=turns)
    session = agent_session(
        scripted_ws(root, turns), model=model, agent=agent, learn_from_failures=False
    )
    try:
        return session.ask(request).run_id
    except Exception:  # the scripted failure: the run is recorded all the same
        return session.audit.query("SELECT id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]
    finally:
        session.close()


@pytest.fixture(scope="module")
def audited(_hash_ws_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    root = tmp_path_factory.mktemp("logexport") / "ws"
    shutil.copytree(_hash_ws_template, root)
    out = Audited(root)
    # two runs on one thread: a tool call, then a plain answer
    from olav.compose import agent_session
    from olav.llm.models import ScriptedChatModel

    turns = [
        {"tool_calls": [EXPORT_CALL]},
        {"content": "Saved exports/audit.md"},
        {"content": "No."},
    ]
    session = agent_session(
        scripted_ws(root, turns), model=ScriptedChatModel(turns=turns), learn_from_failures=False
    )
    out.ids["export"] = session.ask(REQUESTS["export"]).run_id
    out.ids["follow_up"] = session.ask(REQUESTS["follow_up"]).run_id
    session.close()
    secret_call = {
        "name": "format_and_export",
        "args": {"data": SECRET_TEXT, "format": "txt", "filename": "note", "password": "PwArg9988"},
    }
    out.ids["secret"] = _ask(
        root, REQUESTS["secret"], [{"tool_calls": [secret_call]}, {"content": "Saved note.txt"}]
    )
    hermes = "<tool_call>" + json.dumps(
        {"name": "format_and_export", "arguments": EXPORT_CALL["args"]}
    )
    out.ids["salvaged"] = _ask(
        root, REQUESTS["salvaged"], [{"content": hermes + "</tool_call>"}, {"content": "Saved."}]
    )
    out.ids["thinking"] = _ask(
        root,
        REQUESTS["thinking"],
        [
            {"content": "<think>plan the file</think>", "tool_calls": [EXPORT_CALL]},
            {"content": "<think>it worked</think>Saved exports/audit.md"},
        ],
    )
    out.ids["failed"] = _ask(
        root,
        REQUESTS["failed"],
        [
            {"tool_calls": [{"name": "describe_table", "args": {"name": "devices"}}]},
            {"error": "model server went away"},
        ],
    )
    out.ids["netops"] = _ask(
        root,
        REQUESTS["netops"],
        [
            {"tool_calls": [{"name": "list_devices", "args": {"site": "sh1", "role": "border"}}]},
            {"content": "sh1-border01"},
        ],
        agent="netops",
    )
    _recorded_edge_cases(out)
    return out


def _recorded_edge_cases(out: Audited) -> None:
    rec = AuditRecorder(out.audit)
    # killed between the tool call and its result
    rid = rec.start_run("netops", "s-killed", REQUESTS["killed"], "qwen3:8b", thread_id="t-killed")
    call = {"name": "backup_device_config", "args": {"hostname": "sh1-border01"}, "id": "c1"}
    rec.steps(rid, [HumanMessage(REQUESTS["killed"]), AIMessage(content="", tool_calls=[call])])
    rec.end_run(rid, "cancelled", "cancelled by the user (Ctrl-C)")
    out.ids["killed"] = rid
    # answered only after the rescue layer's nudge
    rid = rec.start_run("netops", "s-nudged", REQUESTS["nudged"], "qwen3:8b", thread_id="t-nudged")
    rec.steps(rid, [HumanMessage(REQUESTS["nudged"]), AIMessage(content="Done, snapshot taken.")])
    rec.event(rid, "nudge", {"agent": "netops", "tools": ["take_snapshot"], "narration": "I will"})
    rec.end_run(rid, "completed")
    out.ids["nudged"] = rid
    # recorded before migration 4: messages and tool_calls, no steps
    rid = rec.start_run("core", "s-old", REQUESTS["old"], "qwen3:8b")
    rec.message(rid, "user", REQUESTS["old"])
    rec.tool_call(rid, "core", ToolCallEntry("db_query", {"sql": "SELECT 1"}, "1", "success"))
    rec.message(rid, "assistant", "It returned 1.")
    rec.end_run(rid, "completed")
    out.ids["old"] = rid


def export(
    a: Audited, tmp_path: Path, name: str = "out.jsonl", **kw: Any
) -> tuple[Any, list[dict[str, Any]]]:
    """Export with RunFilter/ExportOptions fields in ``kw``; the summary and the lines."""
    flt_keys = set(RunFilter.__dataclass_fields__)
    flt = RunFilter(**{k: v for k, v in kw.items() if k in flt_keys})
    opts = ExportOptions(**{k: v for k, v in kw.items() if k not in flt_keys})
    target = tmp_path / name
    summary = export_runs(a.audit, target, flt=flt, opts=opts, catalog=CATALOG)
    return summary, read_lines(target)


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _catalog() -> dict[str, dict[str, Any]]:
    from olav.compose.tools import LEARNING_TOOLS
    from olav.runtime.tools import registry

    return tool_catalog({**registry._SPECS, **LEARNING_TOOLS})


CATALOG = _catalog()


def first_user(line: dict[str, Any]) -> str:
    return next(m["content"] for m in line["messages"] if m["role"] == "user")


def by_request(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """openai lines by the REQUESTS key whose text ends their first user message."""
    out = {}
    for line in lines:
        text = first_user(line).split("</relevant-memories>\n\n")[-1]
        # the secret request is redacted: its words before the colon name it
        key = next((k for k, v in REQUESTS.items() if text.startswith(v.split(":")[0])), None)
        assert key is not None, text[:200]
        out[key] = line
    return out


def trajectories(a: Audited, tmp_path: Path, **kw: Any) -> dict[str, dict[str, Any]]:
    """Trajectory lines of the runs passing ``kw``, by REQUESTS key."""
    _, lines = export(a, tmp_path, "traj.jsonl", format="trajectory", **kw)
    keys = {v: k for k, v in a.ids.items()}
    return {keys[line["run_id"]]: line for line in lines}


# -- openai ------------------------------------------------------------------------------------


def test_openai_line_of_a_real_tool_call_run_is_valid_and_round_trips(
    audited: Audited, tmp_path: Path
) -> None:
    summary, lines = export(audited, tmp_path)
    line = by_request(lines)["export"]
    assert validate_openai(line) is None
    assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]
    call = line["messages"][1]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "format_and_export"
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == EXPORT_CALL["args"]
    assert line["messages"][2]["tool_call_id"] == call["id"] and call["id"]
    assert line["messages"][2]["content"].startswith("Saved exports/audit.md")
    assert line["messages"][3] == {"role": "assistant", "content": "Saved exports/audit.md"}
    # the tools the model was offered, from the registry's argument model
    [tool] = line["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "format_and_export"
    params = tool["function"]["parameters"]
    assert set(params["properties"]) == {"data", "format", "filename"}
    assert params["properties"]["format"]["enum"] == ["md", "json", "csv", "html", "txt"]
    # every written line passes, and the summary counts what was left out
    assert all(validate_openai(x) is None for x in lines)
    assert summary.exported == len(lines)
    assert summary.files == [
        {
            "path": str(tmp_path / "out.jsonl"),
            "runs": len(lines),
            "threads": summary.files[0]["threads"],
        }
    ]


def test_a_system_message_goes_first_only_when_asked(audited: Audited, tmp_path: Path) -> None:
    _, plain = export(audited, tmp_path)
    assert all(x["messages"][0]["role"] == "user" for x in plain)
    _, lines = export(audited, tmp_path, "sys.jsonl", system="You are olav.")
    assert all(x["messages"][0] == {"role": "system", "content": "You are olav."} for x in lines)
    assert all(validate_openai(x) is None for x in lines)


def test_a_run_recorded_before_steps_is_rebuilt_from_messages(
    audited: Audited, tmp_path: Path
) -> None:
    _, lines = export(audited, tmp_path)
    line = by_request(lines)["old"]
    assert [m["role"] for m in line["messages"]] == ["user", "assistant", "tool", "assistant"]
    call = line["messages"][1]["tool_calls"][0]
    assert line["messages"][2]["tool_call_id"] == call["id"]
    assert json.loads(call["function"]["arguments"]) == {"sql": "SELECT 1"}
    assert line["messages"][3]["content"] == "It returned 1."


def test_a_tool_call_without_its_result_is_skipped_and_counted(
    audited: Audited, tmp_path: Path
) -> None:
    summary, lines = export(audited, tmp_path)
    found = by_request(lines)
    assert "killed" not in found and "failed" not in found
    # killed: the call has no result; failed: the model broke after the tool result
    assert summary.skipped == {"unanswered_tool_call": 1, "last_not_assistant": 1}
    assert "skipped 2: " in summary.one_line()
    assert "unanswered_tool_call 1" in summary.one_line()
    assert summary.exported + 2 == len(list_runs(audited.audit))
    _, traj = export(audited, tmp_path, "t.jsonl", format="trajectory")
    assert len(traj) == summary.exported + 2  # trajectories keep the broken runs
    killed = next(t for t in traj if t["run_id"] == audited.ids["killed"])
    assert killed["outcome"] == "cancelled" and killed["steps"][-1]["tool_calls"]


def test_a_failing_export_leaves_no_file_and_no_temp(
    audited: Audited, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from olav.audit import export as mod

    target = tmp_path / "data.jsonl"
    target.write_text("the previous export\n")
    real = mod.run_line
    seen: list[int] = []

    def breaks_on_the_third(*args: Any) -> Any:
        seen.append(1)
        if len(seen) == 3:
            raise RuntimeError("disk full")
        return real(*args)

    monkeypatch.setattr(mod, "run_line", breaks_on_the_third)
    with pytest.raises(RuntimeError, match="disk full"):
        export_runs(audited.audit, target, catalog=CATALOG)
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl"]


# -- secrets -----------------------------------------------------------------------------------


def test_secrets_of_a_real_run_never_reach_an_export(audited: Audited, tmp_path: Path) -> None:
    for fmt in ("openai", "sharegpt", "trajectory"):
        export(audited, tmp_path, f"{fmt}.jsonl", format=fmt, memories=True, reasoning=True)
        data = (tmp_path / f"{fmt}.jsonl").read_text()
        assert REQUESTS["secret"].split(":")[0] in data  # the run is there
        for needle in [*NEEDLES, "PwArg9988"]:
            assert needle not in data, (fmt, needle)
        assert "[REDACTED]]" not in data  # redacting again does not mangle the marks


def test_rows_an_older_olav_let_through_are_redacted_at_export(
    audited: Audited, tmp_path: Path
) -> None:
    """Rows written straight into the tables, as an olav with weaker rules would have left
    them: the export redacts the user message, the arguments, the results, the block."""
    import duckdb

    root = tmp_path / "ws"
    shutil.copytree(audited.root, root)
    db = root / ".olav" / "databases" / "audit.duckdb"
    calls = json.dumps(
        [{"id": "k1", "name": "db_query", "args": {"sql": SECRET_TEXT, "token": "TokArg7766"}}]
    )
    con = duckdb.connect(str(db))
    try:
        con.execute(
            "INSERT INTO runs (id, agent, status, outcome, query, started_at, thread_id) "
            "VALUES ('raw1', 'core', 'completed', 'completed', ?, now(), 'raw-thread')",
            [SECRET_TEXT],
        )
        con.executemany(
            "INSERT INTO steps (run_id, seq, role, content, tool_calls, tool_call_id, name, "
            "status, created_at) VALUES ('raw1', ?, ?, ?, ?, ?, ?, ?, now())",
            [
                [0, "user", f"raw request {SECRET_TEXT}", None, None, None, None],
                [1, "assistant", "", calls, None, None, None],
                [2, "tool", f"rows: {SECRET_TEXT}", None, "k1", "db_query", "success"],
                [3, "assistant", f"done, {SECRET_TEXT}", None, None, None, None],
            ],
        )
        con.execute(
            "INSERT INTO recalls (id, run_id, agent, created_at, block, injected) VALUES "
            "('rc1', 'raw1', 'core', now(), ?, '[\"m1\"]')",
            [f"<relevant-memories>\n{SECRET_TEXT}\n</relevant-memories>"],
        )
    finally:
        con.close()
    for fmt in ("openai", "sharegpt", "trajectory"):
        target = tmp_path / f"raw.{fmt}.jsonl"
        opts = ExportOptions(format=fmt, memories=True)
        summary = export_runs(db, target, opts=opts, catalog=CATALOG)
        data = target.read_text()
        assert "raw request" in data and summary.exported >= 1
        for needle in [*NEEDLES, "TokArg7766"]:
            assert needle not in data, (fmt, needle)
    line = next(
        x for x in read_lines(tmp_path / "raw.openai.jsonl") if "raw request" in first_user(x)
    )
    assert validate_openai(line) is None
    assert first_user(line).startswith("<relevant-memories>")


def test_the_reliability_suites_secret_shapes_never_reach_an_openai_export(
    audited: Audited, tmp_path: Path
) -> None:
    """Every shape of tests/secret_corpus.py in a person's message, a tool call's arguments,
    its result and the answer, recorded as a run is: the exported file round-trips through
    json.loads and holds none of them."""
    from langchain_core.messages import ToolMessage

    from tests.secret_corpus import CORPUS

    root = tmp_path / "ws"
    shutil.copytree(audited.root, root)
    db = root / ".olav" / "databases" / "audit.duckdb"
    recorder = AuditRecorder(db)
    with recorder.batch():  # every run's rows through one opening of the file
        for sid, text, _, _ in CORPUS:
            run = recorder.start_run("core", "s-secrets", f"keep this: {text}", "m", thread_id=sid)
            call = {"id": f"c-{sid}", "name": "db_query", "args": {"sql": text, "note": text}}
            recorder.steps(
                run,
                [
                    HumanMessage(content=f"keep this: {text}"),
                    AIMessage(content="", tool_calls=[call]),
                    ToolMessage(content=f"stored {text}", tool_call_id=f"c-{sid}", name="db_query"),
                    AIMessage(content=f"Done: {text}"),
                ],
            )
            recorder.end_run(run, "completed")
    target = tmp_path / "secrets.openai.jsonl"
    summary = export_runs(db, target, catalog=CATALOG)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert summary.exported == len(lines) and len(lines) >= len(CORPUS)
    assert all(validate_openai(line) is None for line in lines)
    data = target.read_text()
    leaks = [(sid, n) for sid, _, needles, reason in CORPUS if reason is None for n in needles]
    assert len(CORPUS) >= 41 and [x for x in leaks if x[1] in data] == []


# -- filters -----------------------------------------------------------------------------------


def test_outcome_and_agent_filters(audited: Audited, tmp_path: Path) -> None:
    assert set(trajectories(audited, tmp_path, outcomes=("failed", "cancelled"))) == {
        "failed",
        "killed",
    }
    assert set(trajectories(audited, tmp_path, agent="netops")) == {"netops", "killed", "nudged"}
    assert set(trajectories(audited, tmp_path, agent="netops", outcomes=("completed",))) == {
        "netops",
        "nudged",
    }


def test_salvaged_and_nudged_filters_include_only_or_exclude(
    audited: Audited, tmp_path: Path
) -> None:
    every = set(trajectories(audited, tmp_path))
    assert every == set(audited.ids)
    only = trajectories(audited, tmp_path, salvaged=True)
    assert set(only) == {"salvaged"}
    assert only["salvaged"]["rescue"]["salvaged"] == 1
    assert set(trajectories(audited, tmp_path, salvaged=False)) == every - {"salvaged"}
    assert set(trajectories(audited, tmp_path, nudged=True)) == {"nudged"}
    assert set(trajectories(audited, tmp_path, nudged=False)) == every - {"nudged"}
    # the salvaged call exports as a native one
    _, lines = export(audited, tmp_path, salvaged=True)
    [line] = lines
    assert validate_openai(line) is None
    assert line["messages"][1]["tool_calls"][0]["function"]["name"] == "format_and_export"


def test_min_turns_and_time_filters(audited: Audited, tmp_path: Path) -> None:
    two = set(trajectories(audited, tmp_path, min_turns=2))
    # the runs whose model answered after a tool result (the old run: call + answer)
    assert two == {"export", "secret", "salvaged", "thinking", "netops", "old"}
    from datetime import UTC, datetime

    long_ago = datetime(2000, 1, 1, tzinfo=UTC)
    assert set(trajectories(audited, tmp_path, since=long_ago)) == set(audited.ids)
    assert trajectories(audited, tmp_path, until=long_ago) == {}


def test_memories_are_stripped_unless_kept(audited: Audited, tmp_path: Path) -> None:
    _, plain = export(audited, tmp_path)
    line = by_request(plain)["export"]
    assert first_user(line) == REQUESTS["export"]
    _, kept = export(audited, tmp_path, "m.jsonl", memories=True)
    text = first_user(by_request(kept)["export"])
    assert text.startswith("<relevant-memories>") and "</relevant-memories>\n\n" in text
    assert text.endswith(REQUESTS["export"])
    assert "[directive: export_when_asked_to_save]" in text
    traj = trajectories(audited, tmp_path, memories=True)["export"]
    assert "guide_core_export_when_asked_to_save" in traj["memories"]["injected"]
    assert traj["memories"]["block"].startswith("<relevant-memories>")


def test_reasoning_is_left_out_unless_asked(audited: Audited, tmp_path: Path) -> None:
    _, plain = export(audited, tmp_path)
    assert "reasoning_content" not in json.dumps(plain)
    assert "plan the file" not in json.dumps(plain)
    summary, lines = export(audited, tmp_path, "r.jsonl", reasoning=True)
    line = by_request(lines)["thinking"]
    answers = [m for m in line["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in answers] == ["plan the file", "it worked"]
    assert answers[1]["content"] == "Saved exports/audit.md"
    assert validate_openai(line) is None
    assert summary.reasoning_unpaired == 0
    _, share = export(audited, tmp_path, "r.sg.jsonl", format="sharegpt", reasoning=True)
    gpt = [t["value"] for x in share for t in x["conversations"] if "it worked" in t["value"]]
    assert gpt == ["<think>\nit worked\n</think>\n\nSaved exports/audit.md"]


# -- sharegpt ----------------------------------------------------------------------------------


def test_sharegpt_lines_follow_the_llama_factory_convention(
    audited: Audited, tmp_path: Path
) -> None:
    summary, lines = export(audited, tmp_path, format="sharegpt", system="You are olav.")
    assert all(validate_sharegpt(x) is None for x in lines)
    assert summary.skipped == {"unanswered_tool_call": 1, "last_not_assistant": 1}
    line = next(x for x in lines if x["conversations"][1]["value"] == REQUESTS["export"])
    assert [t["from"] for t in line["conversations"]] == [
        "system",
        "human",
        "function_call",
        "observation",
        "gpt",
    ]
    call = json.loads(line["conversations"][2]["value"])
    assert call == {"name": "format_and_export", "arguments": EXPORT_CALL["args"]}
    tools = json.loads(line["tools"])
    assert [t["name"] for t in tools] == ["format_and_export"]
    assert "parameters" in tools[0] and "description" in tools[0]


# -- validators --------------------------------------------------------------------------------

CALL = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
TOOLS = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]
USER = {"role": "user", "content": "hi"}
ASKS = {"role": "assistant", "content": "", "tool_calls": [CALL]}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
ANSWER = {"role": "assistant", "content": "done"}


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([USER, ASKS, RESULT, ANSWER], None),
        ([{"role": "system", "content": "s"}, USER, ANSWER], None),
        ([ANSWER], "no_user_message"),
        ([USER, ASKS, ANSWER], "unanswered_tool_call"),
        ([USER, ASKS], "unanswered_tool_call"),
        ([USER, RESULT, ANSWER], "tool_without_call"),
        ([USER, ASKS, RESULT, RESULT, ANSWER], "tool_without_call"),
        ([USER, ASKS, RESULT], "last_not_assistant"),
        ([USER, ASKS, RESULT, USER, ANSWER], "bad_order"),
        ([USER, {"role": "assistant", "content": " "}], "empty_answer"),
        (
            [USER, {**ASKS, "tool_calls": [CALL, CALL]}, RESULT, ANSWER],
            "duplicate_tool_call_id",
        ),
        (
            [
                USER,
                {**ASKS, "tool_calls": [{**CALL, "function": {"name": "u", "arguments": "{}"}}]},
            ],
            "tool_not_declared",
        ),
        (
            [USER, {**ASKS, "tool_calls": [{**CALL, "function": {"name": "t", "arguments": {}}}]}],
            "bad_arguments",
        ),
        (
            [
                USER,
                {**ASKS, "tool_calls": [{**CALL, "function": {"name": "t", "arguments": "[1]"}}]},
            ],
            "bad_arguments",
        ),
    ],
)
def test_openai_validator(messages: list[dict[str, Any]], reason: str | None) -> None:
    assert validate_openai({"messages": messages, "tools": TOOLS}) == reason


@pytest.mark.parametrize(
    ("turns", "reason"),
    [
        (["human", "function_call", "observation", "gpt"], None),
        (["system", "human", "gpt"], None),
        (["human", "function_call", "gpt"], "unanswered_tool_call"),
        (["human", "observation", "gpt"], "tool_without_call"),
        (["human", "function_call", "observation"], "last_not_assistant"),
        (["gpt"], "no_user_message"),
    ],
)
def test_sharegpt_validator(turns: list[str], reason: str | None) -> None:
    call = json.dumps({"name": "t", "arguments": {}})
    conv = [{"from": t, "value": call if t == "function_call" else "x"} for t in turns]
    tools = json.dumps([{"name": "t", "parameters": {"type": "object"}}])
    assert validate_sharegpt({"conversations": conv, "tools": tools}) == reason


# -- the split ---------------------------------------------------------------------------------


def test_split_keeps_each_thread_on_one_side_and_a_seed_repeats_it(
    audited: Audited, tmp_path: Path
) -> None:
    opts = {"format": "trajectory", "split": 0.3, "seed": 7}
    summary, train = export(audited, tmp_path, "runs.jsonl", **opts)
    test = read_lines(tmp_path / "runs.test.jsonl")
    assert train and test
    threads = [{x["thread_id"] or x["run_id"] for x in side} for side in (train, test)]
    assert not threads[0] & threads[1]
    # the two runs of the first session share a thread, so they share a side
    export_ids = {audited.ids["export"], audited.ids["follow_up"]}
    sides = [bool(export_ids & {x["run_id"] for x in side}) for side in (train, test)]
    assert sides.count(True) == 1
    assert all(len(export_ids & {x["run_id"] for x in side}) in (0, 2) for side in (train, test))
    assert [f["role"] for f in summary.files] == ["train", "test"]
    assert [f["runs"] for f in summary.files] == [len(train), len(test)]
    assert summary.files[1]["path"] == str(tmp_path / "runs.test.jsonl")
    before = [(tmp_path / n).read_bytes() for n in ("runs.jsonl", "runs.test.jsonl")]
    export(audited, tmp_path, "runs.jsonl", **opts)
    after = [(tmp_path / n).read_bytes() for n in ("runs.jsonl", "runs.test.jsonl")]
    assert before == after


def test_split_groups_takes_the_share_of_threads_deterministically() -> None:
    groups = [f"thread-{i}" for i in range(200)]
    test = split_groups(groups, 0.1, 42)
    assert len(test) == 20 and test <= set(groups)
    assert test == split_groups(reversed([*groups, *groups]), 0.1, 42)
    assert split_groups(groups, 0.1, 43) != test
    assert len(split_groups(["a", "b"], 0.01, 1)) == 1  # never an empty test side
    assert len(split_groups(["a", "b"], 0.99, 1)) == 1  # nor an empty train side
    assert split_groups(["only"], 0.5, 1) == set()
    assert split_groups(groups, 0.0, 1) == set()


def test_the_test_file_name() -> None:
    assert split_test_path(Path("d/runs.jsonl")) == Path("d/runs.test.jsonl")
    assert split_test_path(Path("d/runs")) == Path("d/runs.test")


# -- the CLI -----------------------------------------------------------------------------------


@pytest.fixture
def in_audited(audited: Audited, monkeypatch: pytest.MonkeyPatch) -> Iterator[Audited]:
    monkeypatch.chdir(audited.root)
    yield audited


def test_log_list(in_audited: Audited, olav_main: OlavMain) -> None:
    result = olav_main("log", "list", "-n", "50")
    assert result.returncode == 0, result.stderr
    for rid in in_audited.ids.values():
        assert rid[:8] in result.stdout
    assert "salvaged" in result.stdout and "nudged" in result.stdout
    rows = json.loads(olav_main("log", "list", "--json", "--agent", "netops").stdout)
    assert {r["id"] for r in rows} == {in_audited.ids[k] for k in ("netops", "killed", "nudged")}
    assert rows[0]["started_at"] >= rows[-1]["started_at"]  # newest first
    nudged = next(r for r in rows if r["id"] == in_audited.ids["nudged"])
    assert nudged["rescue"]["nudged"] is True and nudged["outcome"] == "completed"
    failed = json.loads(olav_main("log", "list", "--json", "--outcome", "failed").stdout)
    assert [r["id"] for r in failed] == [in_audited.ids["failed"]]


def test_log_show(in_audited: Audited, olav_main: OlavMain) -> None:
    rid = in_audited.ids["export"]
    result = olav_main("log", "show", rid[:10])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert rid in out and "outcome completed" in out
    assert "format_and_export" in out and '"filename": "audit"' in out
    assert "Saved exports/audit.md" in out
    assert "guide_core_export_when_asked_to_save" in out and "<relevant-memories>" in out
    assert "tokens:" in out and "2 model calls" in out
    data = json.loads(olav_main("log", "show", rid, "--json").stdout)
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert data["messages"][2]["status"] == "success"
    assert data["memories"]["injected"] and data["tokens"]["model_calls"] == 2
    killed = json.loads(olav_main("log", "show", in_audited.ids["killed"], "--json").stdout)
    assert killed["outcome"] == "cancelled" and killed["error"].startswith("cancelled")
    salvaged = olav_main("log", "show", in_audited.ids["salvaged"]).stdout
    assert "rescue: salvaged" in salvaged


def test_log_show_of_an_unknown_or_ambiguous_run_is_one_line(
    hash_ws: Path, olav_main: OlavMain
) -> None:
    import duckdb

    con = duckdb.connect(str(hash_ws / ".olav" / "databases" / "audit.duckdb"))
    try:
        con.execute(
            "INSERT INTO runs (id, agent, status, started_at) VALUES "
            "('abcd0001', 'core', 'running', now()), ('abcd0002', 'core', 'running', now())"
        )
    finally:
        con.close()
    for ref, says in [
        ("ffffnotarun", "no run 'ffffnotarun'. Pass a run id from `olav log list`"),
        ("abcd", "run prefix 'abcd' matches more than one run (abcd000"),
        ("x%", "no run 'x%'"),
    ]:
        result = olav_main("log", "show", ref)
        assert result.returncode == 1
        assert result.stderr.strip().count("\n") == 0 and says in result.stderr, result.stderr
    shown = json.loads(olav_main("log", "show", "abcd0002", "--json").stdout)
    assert shown["id"] == "abcd0002" and shown["outcome"] == "running" and shown["messages"] == []


def test_log_export_cli(in_audited: Audited, olav_main: OlavMain, tmp_path: Path) -> None:
    target = tmp_path / "ft.jsonl"
    every = [w for o in OUTCOMES for w in ("--outcome", o)]
    result = olav_main("log", "export", "-o", str(target), "--split", "0.2", "--json", *every)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["skipped_by_reason"] == {"unanswered_tool_call": 1, "last_not_assistant": 1}
    train, test = summary["files"]
    assert train["path"] == str(target) and test["path"] == str(tmp_path / "ft.test.jsonl")
    assert train["runs"] + test["runs"] == summary["exported"] == 8
    assert len(read_lines(target)) == train["runs"]
    piped = olav_main("log", "export", "-f", "sharegpt", "--agent", "netops", *every)
    assert piped.returncode == 0, piped.stderr
    lines = [json.loads(x) for x in piped.stdout.splitlines()]
    assert len(lines) == 2 and all(validate_sharegpt(x) is None for x in lines)
    assert piped.stderr.count("\n") == 1
    assert "exported 2 runs to stdout (sharegpt), skipped 1: unanswered_tool_call 1" in piped.stderr
    # by default a training set takes the completed runs only: fewer, and every one completed
    default = olav_main("log", "export", "--json", "-o", str(tmp_path / "default.jsonl"))
    assert default.returncode == 0, default.stderr
    kept = json.loads(default.stdout)["exported"]
    assert 0 < kept < 8
    runs = json.loads(olav_main("log", "list", "--json", "--outcome", "completed").stdout)
    assert kept <= len(runs)
    bad = olav_main("log", "export", "--format", "alpaca")
    assert bad.returncode == 1 and "unknown format 'alpaca'" in bad.stderr
    bad = olav_main("log", "export", "--since", "last tuesday")
    assert bad.returncode == 1 and "--since 'last tuesday' is not a date" in bad.stderr


def test_log_help_imports_no_heavy_library() -> None:
    code = (
        "import sys\nfrom olav.cli.app import main\n"
        "for args in (['log', '--help'], ['log', 'export', '--help']):\n"
        "    sys.argv = ['olav', *args]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "print('LOADED', [m for m in ('duckdb', 'lancedb', 'langgraph') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "LOADED []" in out.stdout, (out.stdout[-500:], out.stderr)
    assert "--with-memories" in out.stdout and "sharegpt" in out.stdout


def test_a_workspace_without_runs_lists_none(hash_ws: Path, olav_main: OlavMain) -> None:
    result = olav_main("log", "list")
    assert result.returncode == 0 and "no runs recorded" in result.stdout
