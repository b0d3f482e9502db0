"""A lesson that names a tool reaches the model with that tool's error, and only there."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import ToolMessage

from olav.core.config import Workspace
from olav.memory.recall.lessons import lesson_record, lessons_naming
from olav.memory.store.scopes import EVERYONE
from olav.memory.store.table import MemoryStore
from olav.runtime.toolguard import LESSONS_HEADER
from tests.helpers import SessionFor, audit_rows

EXPORT_LESSON = "When format_and_export refuses a file name, use a plain name inside exports/."
OTHER_TOOL = "When take_snapshot times out, snapshot fewer devices at a time."
OTHER_AGENT = "When format_and_export fails for netops, write markdown."
LOOKALIKE = "When format_and_export_v2 fails, retry once."


def store_lessons(root: Path) -> MemoryStore:
    store = MemoryStore.for_workspace(Workspace.open(root))
    store.upsert(
        [
            lesson_record("refl_export", EXPORT_LESSON, "test"),
            lesson_record("refl_snapshot", OTHER_TOOL, "test"),
            lesson_record("refl_netops", OTHER_AGENT, "test", scope="netops"),
            lesson_record("refl_v2", LOOKALIKE, "test"),
        ]
    )
    return store


def export(filename: str) -> dict[str, object]:
    args = {"data": "# Report", "format": "md", "filename": filename}
    return {"tool_calls": [{"name": "format_and_export", "args": args}]}


def tool_message(model_call: list[object]) -> ToolMessage:
    (msg,) = [m for m in model_call if isinstance(m, ToolMessage)][-1:]
    return msg


def test_a_failed_tool_call_brings_the_lessons_that_name_it(
    session_for: SessionFor, hash_ws: Path
) -> None:
    session, model = session_for([export("../../outside.md"), {"content": "could not save"}])
    store_lessons(session.ws.root)
    session.ask("save the report")
    seen = tool_message(model.calls[1])
    text = str(seen.content)
    assert seen.status == "error" and text.startswith("Error:")
    assert f"{LESSONS_HEADER}\n- {EXPORT_LESSON}" in text
    # another tool's lesson, another agent's, and a longer name that contains this one: none
    assert OTHER_TOOL not in text and OTHER_AGENT not in text and LOOKALIKE not in text
    # the audit keeps the tool's own output; the lessons shown are an event of their own
    ((result,),) = audit_rows(hash_ws, "SELECT result FROM tool_calls")
    assert result.startswith("Error:") and LESSONS_HEADER not in result
    ((detail,),) = audit_rows(hash_ws, "SELECT detail FROM events WHERE kind = 'tool_lessons'")
    assert json.loads(detail) == {"tool": "format_and_export", "lessons": ["refl_export"]}


def test_a_successful_call_brings_no_lesson(session_for: SessionFor, hash_ws: Path) -> None:
    session, model = session_for([export("report"), {"content": "saved"}])
    store_lessons(session.ws.root)
    session.ask("save the report")
    seen = tool_message(model.calls[1])
    assert seen.status == "success" and LESSONS_HEADER not in str(seen.content)
    assert audit_rows(hash_ws, "SELECT * FROM events WHERE kind = 'tool_lessons'") == []


def test_lessons_naming_reads_live_lessons_in_the_scopes_only(hash_ws: Path) -> None:
    store = store_lessons(hash_ws)
    assert [r.id for r in lessons_naming(store, "format_and_export", ["core", "global"])] == [
        "refl_export"
    ]
    both = lessons_naming(store, "format_and_export", ["netops", "global"])
    assert {r.id for r in both} == {"refl_export", "refl_netops"}
    store.update("refl_export", invalidated_at=store.read("refl_export", EVERYONE).created_at)
    assert lessons_naming(store, "format_and_export", ["global"]) == []
    assert lessons_naming(store, "x' OR '1'='1", ["global"]) == []  # not a tool name
