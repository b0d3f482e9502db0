"""The rescue middleware in a real Session with the scripted model: the loop guard,
runtime.max_model_calls, context accounting, the one nudge, and a salvaged call."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from olav.compose import agent_session
from olav.llm.models import ScriptedChatModel
from olav.runtime.runner import Session
from tests.helpers import audit_events, audit_rows, scripted_ws

LOOP_NOTE = "[olav] You have called"
NUDGE_NOTE = "[olav] You described"
DESCRIBE = {"name": "describe_table", "args": {"name": "devices"}}


Make = Callable[..., "tuple[Session, ScriptedChatModel]"]


@pytest.fixture
def rescue_session(hash_ws: Path) -> Make:
    """rescue_session(turns, **settings): a core Session over the hash workspace with
    ``settings`` ({"runtime.nudge": True, ...}) in its config; a turn may carry ``usage``."""

    def make(turns: list[dict[str, Any]], **settings: Any) -> tuple[Session, ScriptedChatModel]:
        cfg = hash_ws / ".olav" / "olav.yaml"
        data = yaml.safe_load(cfg.read_text()) or {}
        for key, value in settings.items():
            section, name = key.split(".")
            data.setdefault(section, {})[name] = value
        cfg.write_text(yaml.safe_dump(data))
        model = ScriptedChatModel(turns=turns)
        ws = scripted_ws(hash_ws, turns)
        for key, value in settings.items():
            assert ws.config[key] == value  # the setting reached the workspace
        return agent_session(ws, model=model, learn_from_failures=False), model

    return make


def humans(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, HumanMessage)]


# -- the loop guard ------------------------------------------------------------------------


def test_a_call_repeated_past_the_limit_is_stopped(rescue_session: Make, hash_ws: Path) -> None:
    session, model = rescue_session([{"tool_calls": [DESCRIBE]}] * 8, **{"runtime.loop_limit": 3})
    result = session.ask("what columns does the devices table have?")
    # three calls ran; the fourth was not run, the model was told once, and it repeated
    assert len(model.calls) == 5
    assert not any(LOOP_NOTE in h for call in model.calls[:4] for h in humans(call))
    note = model.calls[4][-1]
    assert isinstance(note, HumanMessage) and str(note.content).startswith(
        f"{LOOP_NOTE} describe_table 3 times with the same arguments"
    )
    assert result.outcome == "tool_error"
    assert result.answer.startswith("Stopped: the model kept calling describe_table")
    assert result.rescue["loop_stopped"] == "describe_table"
    ran = audit_rows(hash_ws, "SELECT tool FROM tool_calls")
    assert ran == [("describe_table",)] * 3
    guard = audit_events(hash_ws, "loop_guard")
    assert guard == [
        {"agent": "core", "tool": "describe_table", "limit": 3},
        {"agent": "core", "tool": "describe_table", "stopped": True},
    ]
    runs = audit_rows(hash_ws, "SELECT outcome FROM runs")
    assert runs == [("tool_error",)]


def test_a_model_that_answers_after_the_loop_note_completes(
    rescue_session: Make, hash_ws: Path
) -> None:
    session, model = rescue_session(
        [{"tool_calls": [DESCRIBE]}] * 3
        + [{"tool_calls": [DESCRIBE]}, {"content": "devices has hostname, site and role."}],
        **{"runtime.loop_limit": 3},
    )
    result = session.ask("what columns does the devices table have?")
    assert len(model.calls) == 5
    assert LOOP_NOTE in str(model.calls[4][-1].content)
    assert result.answer == "devices has hostname, site and role."
    assert result.outcome == "completed" and result.rescue["loop_stopped"] is None
    assert [e.get("stopped") for e in audit_events(hash_ws, "loop_guard")] == [None]
    # the note was for that call only: the thread keeps no trace of it
    state = session.built.graph.get_state({"configurable": {"thread_id": session.thread_id}})
    assert not any(LOOP_NOTE in str(m.content) for m in state.values["messages"])


def test_the_same_tool_with_new_arguments_is_no_loop(rescue_session: Make, hash_ws: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "db_query", "args": {"sql": f"SELECT {i} AS n"}}]}
        for i in range(4)
    ]
    session, model = rescue_session([*turns, {"content": "done"}], **{"runtime.loop_limit": 2})
    result = session.ask("run a few queries")
    assert result.answer == "done" and result.outcome != "tool_error"
    assert len(model.calls) == 5
    assert not any(LOOP_NOTE in h for call in model.calls for h in humans(call))
    assert audit_events(hash_ws, "loop_guard") == []


# -- runtime.max_model_calls ---------------------------------------------------------------


def test_a_run_stops_at_max_model_calls(rescue_session: Make, hash_ws: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "db_query", "args": {"sql": f"SELECT {i} AS n"}}]}
        for i in range(10)
    ]
    session, model = rescue_session(turns, **{"runtime.max_model_calls": 3})
    result = session.ask("keep querying")
    assert len(model.calls) == 3
    assert result.answer == "Stopped: this run reached runtime.max_model_calls (3)."
    assert result.rescue["model_calls"] == 3
    assert result.rescue["loop_stopped"] == "max_model_calls" and result.outcome == "tool_error"
    assert len(audit_rows(hash_ws, "SELECT id FROM tool_calls")) == 3
    assert audit_events(hash_ws, "loop_guard") == [{"reason": "max_model_calls", "limit": 3}]
    # the next run starts counting again
    model.turns.append({"content": "fresh answer"})
    model.position = len(model.turns) - 1
    assert session.ask("and now?").answer == "fresh answer"


# -- context accounting ---------------------------------------------------------------------

NUM_CTX = 32768  # large enough that the prompt itself is no estimate over the window


def test_a_full_context_is_audited_and_warned_once(rescue_session: Make, hash_ws: Path) -> None:
    full = math.ceil(0.98 * NUM_CTX)
    session, _ = rescue_session(
        [
            {"tool_calls": [DESCRIBE], "usage": {"input_tokens": full, "output_tokens": 7}},
            {"content": "done", "usage": {"input_tokens": full + 100, "output_tokens": 3}},
        ],
        **{"llm.num_ctx": NUM_CTX},
    )
    warnings: list[str] = []
    session.run.on_warning = warnings.append
    result = session.ask("what columns does the devices table have?")
    assert result.answer == "done"
    assert result.rescue["tokens_in"] == 2 * full + 100
    assert result.rescue["tokens_out"] == 10
    assert audit_events(hash_ws, "context_full") == [{"prompt_tokens": full, "num_ctx": NUM_CTX}]
    assert len(warnings) == 1
    assert f"({full} of {NUM_CTX} tokens)" in warnings[0]


def test_a_prompt_below_the_share_is_not_full(rescue_session: Make, hash_ws: Path) -> None:
    below = math.ceil(0.98 * NUM_CTX) - 1
    session, _ = rescue_session(
        [{"content": "done", "usage": {"input_tokens": below, "output_tokens": 1}}],
        **{"llm.num_ctx": NUM_CTX},
    )
    warnings: list[str] = []
    session.run.on_warning = warnings.append
    result = session.ask("hello")
    assert result.rescue["tokens_in"] == below
    assert audit_events(hash_ws, "context_full") == [] and warnings == []


# -- the nudge -------------------------------------------------------------------------------

EXPORT = {
    "name": "format_and_export",
    "args": {"data": "# Devices\n\n- sh1-border01\n", "format": "md", "filename": "devices.md"},
}
REQUEST = "save the device list as a markdown file"
NARRATION = "I will now save the device list as markdown."


def test_a_narration_is_nudged_once_for_that_call_only(rescue_session: Make, hash_ws: Path) -> None:
    session, model = rescue_session(
        [{"content": NARRATION}, {"tool_calls": [EXPORT]}, {"content": "Saved exports/devices.md"}],
        **{"runtime.nudge": True},
    )
    result = session.ask(REQUEST)
    assert result.answer == "Saved exports/devices.md" and result.outcome == "completed"
    assert result.rescue["nudged"] is True
    assert (hash_ws / "exports" / "devices.md").is_file()
    nudge = model.calls[1][-1]
    assert isinstance(nudge, HumanMessage) and str(nudge.content).startswith(NUDGE_NOTE)
    assert "format_and_export" in str(nudge.content)
    assert not any(NUDGE_NOTE in h for h in humans(model.calls[2]))
    state = session.built.graph.get_state({"configurable": {"thread_id": session.thread_id}})
    stored = state.values["messages"]
    assert not any(NUDGE_NOTE in str(m.content) for m in stored)
    assert not any(str(m.content) == NARRATION for m in stored)  # replaced by the call
    assert [e.get("recovered") for e in audit_events(hash_ws, "nudge")] == [None, True]


def test_a_second_narration_is_not_nudged_again(rescue_session: Make, hash_ws: Path) -> None:
    session, model = rescue_session(
        [
            {"content": NARRATION},
            {"content": "Saving the device list as markdown now."},
            {"content": "(a third call would be a second nudge)"},
        ],
        **{"runtime.nudge": True},
    )
    result = session.ask(REQUEST)
    assert len(model.calls) == 2
    assert humans(model.calls[1])[-1].startswith(NUDGE_NOTE)
    # the person sees (and the thread keeps) the first announcement once, not both
    assert result.answer == NARRATION
    assert result.outcome == "narrated"
    assert [e.get("recovered") for e in audit_events(hash_ws, "nudge")] == [None, False]


@pytest.mark.parametrize(
    ("request_text", "answer"),
    [
        ("remember that the change window is Friday 22:00", "Noted."),
        (
            "summarise this config and save me the trouble: interface Gi0/1\n no shutdown",
            "Gi0/1 is enabled; nothing else is configured.",
        ),
        ("export the report", "Which report: the BGP audit or the inventory?"),
    ],
)
def test_a_plain_answer_is_never_asked_again(
    rescue_session: Make, hash_ws: Path, request_text: str, answer: str
) -> None:
    session, model = rescue_session(
        [{"content": answer}, {"content": "(a nudged second call)"}], **{"runtime.nudge": True}
    )
    result = session.ask(request_text)
    assert len(model.calls) == 1 and result.answer == answer
    assert audit_events(hash_ws, "nudge") == []


def test_a_question_answered_with_a_narration_is_asked_again(
    rescue_session: Make, hash_ws: Path
) -> None:
    session, model = rescue_session(
        [
            {"content": "Let me query the devices table for the Huawei devices."},
            {"content": "There are none."},
        ],
        **{"runtime.nudge": True},
    )
    session.ask("which devices are Huawei?")
    assert len(model.calls) == 2 and humans(model.calls[1])[-1].startswith(NUDGE_NOTE)


def test_the_nudge_rule_on_the_corpora_and_their_held_out_halves() -> None:
    from benchmarks.nudge import run_nudge_bench

    report = run_nudge_bench()
    for half in ("corpus", "heldout"):
        row = report[half]
        assert row["plain_nudged_ids"] == [], half  # "Noted.", summaries, questions back
        assert row["nudged"] == row["narrations"], half


def test_no_nudge_when_it_is_off(rescue_session: Make, hash_ws: Path) -> None:
    session, model = rescue_session(
        [{"content": NARRATION}, {"tool_calls": [EXPORT]}], **{"runtime.nudge": False}
    )
    result = session.ask(REQUEST)
    assert len(model.calls) == 1
    assert result.answer == NARRATION and result.outcome == "narrated"
    assert audit_events(hash_ws, "nudge") == []


# -- salvage in the loop -----------------------------------------------------------------------


def test_a_call_written_as_text_runs_as_a_tool_call(rescue_session: Make, hash_ws: Path) -> None:
    text = (
        "<think>They want a file.</think>Exporting.\n<tool_call>"
        + json.dumps({"name": EXPORT["name"], "arguments": EXPORT["args"]})
        + "</tool_call>"
    )
    session, model = rescue_session([{"content": text}, {"content": "Saved exports/devices.md"}])
    result = session.ask(REQUEST)
    assert result.answer == "Saved exports/devices.md"
    assert [s["family"] for s in result.rescue["salvaged"]] == ["hermes"]
    assert (hash_ws / "exports" / "devices.md").read_text() == EXPORT["args"]["data"]
    call = next(m for m in model.calls[1] if isinstance(m, AIMessage) and m.tool_calls)
    assert call.tool_calls[0]["name"] == "format_and_export"
    assert "<tool_call>" not in str(call.content) and "<think>" not in str(call.content)
    assert [e["tool"] for e in audit_events(hash_ws, "salvaged")] == ["format_and_export"]


def test_a_call_written_as_text_runs_nothing_when_salvage_is_off(
    rescue_session: Make, hash_ws: Path
) -> None:
    text = "<tool_call>" + json.dumps({"name": EXPORT["name"], "arguments": EXPORT["args"]})
    session, model = rescue_session([{"content": text}], **{"runtime.salvage": False})
    result = session.ask(REQUEST)
    assert len(model.calls) == 1 and result.rescue["salvaged"] == []
    assert not (hash_ws / "exports" / "devices.md").exists()
