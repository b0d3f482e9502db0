"""The run-outcome classifier (olav.runtime.outcome): pure functions, no model."""

from __future__ import annotations

import pytest

from olav.memory.ingest.capture import ToolEvent
from olav.memory.store.schema import MemoryRecord
from olav.runtime.outcome import (
    Directive,
    asks_for_action,
    classify,
    directive,
    is_question,
    named_tools,
)

TOOLS = {"backup_device_config", "take_snapshot", "format_and_export", "list_devices"}


def ok(tool: str) -> ToolEvent:
    return ToolEvent("netops", tool, {}, "done", "success")


@pytest.mark.parametrize(
    "request_text",
    [
        "back up the config of sh1-border01",
        "save the running config of sh1-core02 before my change",
        "export the device list as csv",
        "Create a change plan for sh1-core02",
        "write a backup script for the routers",
        "can you back up sh1-border01?",  # a polite request, not a question
        "备份 sh1-border01 的配置",
        "请导出设备清单",
        "生成一份巡检报告",
        "能帮我备份一下配置吗",
        "帮我back up配置",  # mixed, no spaces between the languages
        "把 sh1 的 running config 保存下来",
    ],
)
def test_an_action_request_answered_without_a_tool_is_narrated(request_text: str) -> None:
    assert asks_for_action(request_text)
    assert classify("completed", request_text, []) == "narrated"


@pytest.mark.parametrize(
    "request_text",
    [
        "what is BGP",
        "BGP 是什么",
        "how do I back up a router?",
        "如何备份配置？",
        "why did the backup of sh1-border01 fail?",
        "tell me a joke about cats",
        "write a poem about spring",  # a text to answer in chat, not an artifact
        "讲个关于猫的笑话",
        "thanks!",
    ],
)
def test_questions_and_chat_are_completed_without_a_tool(request_text: str) -> None:
    assert classify("completed", request_text, []) == "completed"


def test_a_real_tool_call_completes_but_delegation_alone_does_not() -> None:
    request = "back up the config of sh1-border01"
    assert classify("completed", request, [ok("backup_device_config")]) == "completed"
    delegated = ToolEvent("core", "task", {"subagent_type": "netops"}, "I will back up", "success")
    assert classify("completed", request, [delegated]) == "narrated"


def test_failed_calls_errors_and_cancellations() -> None:
    request = "back up the config of sh1-border01"
    refused = ToolEvent("netops", "backup_device_config", {}, "Error: unknown device", "error")
    assert classify("completed", request, [ok("list_devices"), refused]) == "tool_error"
    assert classify("completed", "what is BGP", [refused]) == "tool_error"
    assert classify("error", request, []) == "failed"
    assert classify("cancelled", request, [refused]) == "cancelled"


def test_a_recalled_directive_that_names_a_tool_makes_a_silent_answer_narrated() -> None:
    lesson = Directive("When asked to keep a copy, call backup_device_config.")
    request = "keep a copy of sh1-border01 before my change"
    assert not asks_for_action(request)
    named = named_tools([lesson], request, TOOLS)
    assert named == ["backup_device_config"]
    assert classify("completed", request, [], named) == "narrated"
    assert classify("completed", "what is BGP", [], named) == "completed"  # still a question


def test_a_guide_counts_only_when_the_request_has_one_of_its_keywords() -> None:
    guide = directive(
        MemoryRecord(
            id="guide_netops_backup",
            text="backup keywords and body",
            category="usage_guide",
            metadata={
                "keywords": ["backup", "running-config", "备份"],
                "body": "Call backup_device_config(device=...) once per device; not_a_tool.",
            },
        )
    )
    assert guide.keywords == ("backup", "running-config", "备份")
    assert named_tools([guide], "sh1-border01 的备份", TOOLS) == ["backup_device_config"]
    assert named_tools([guide], "tell me a joke about cats", TOOLS) == []  # recalled anyway
    lesson = directive(
        MemoryRecord(id="refl_1", text="When X, call take_snapshot.", category="reflection")
    )
    assert lesson.keywords == () and named_tools([lesson], "anything", TOOLS) == ["take_snapshot"]


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("what is BGP", True),
        ("BGP 邻居为什么是 idle", True),
        ("is sh1-border01 backed up?", True),
        ("could you export the report?", False),
        ("请问能帮我导出报告吗", False),
        ("back up sh1-border01", False),
    ],
)
def test_questions_and_polite_requests(text: str, question: bool) -> None:
    assert is_question(text) is question
