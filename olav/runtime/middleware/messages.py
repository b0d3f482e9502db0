"""What the middleware read of a model request's messages: a message's text, and where the
last human message is."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage


def message_text(msg: BaseMessage) -> str:
    content = msg.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def last_human_index(messages: list[Any]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return None
