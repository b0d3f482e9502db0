"""Hermes (Qwen 2.5 and 3, NousResearch, most fine-tunes): ``<tool_call>{"name": …,
"arguments": {…}}</tool_call>``; the closing tag optional, a list of calls in one block
allowed, a fence inside the tags tolerated.

Its reasoning tags, ``<think>`` (``<thinking>``, ``<reasoning>``), are the ones Qwen3, QwQ,
DeepSeek-R1 and their distills write; ChatML's turn tokens are scrubbed from the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import (
    Family,
    Found,
    Reading,
    json_calls,
    json_then,
    skip_ws,
)
from olav.runtime.rescue.lenient import LenientError, loads

TAG = re.compile(r"<tool_call>")
_JSON_NAME = re.compile(r'"name"\s*+:\s*+"([^"\\]{1,64}+)"')


def _mended(body: str) -> Any:
    """A call object whose closing tag came but one of its brackets did not, read leniently
    (the lenient reader closes what is open); None when it is not one."""
    body = re.sub(r"^\s*```[\w]*\n|```\s*$", "", body).strip()
    if not body.startswith("{"):
        return None
    try:
        value = loads(body)
    except LenientError:
        return None
    return value if isinstance(value, dict) and json_calls(value) else None


def read(r: Reading) -> Iterator[Found]:
    text, pos = r.text, 0
    while (m := TAG.search(text, pos)) is not None:
        body = m.end()
        if not text.startswith(("{", "[", "```"), skip_ws(text, body)):
            pos = m.end()  # GLM's tags or Qwen3's XML inside them
            continue
        value, end, closed = json_then(text, body, ("</tool_call>",), r.finished, fence=True)
        if value is None and not closed and text.endswith("</tool_call>", 0, end):
            value = _mended(text[body : end - len("</tool_call>")])  # the tag closed, a } lost
            closed = value is not None
        if value is None and not closed:
            named = _JSON_NAME.search(text, body, min(end, body + 400))
            yield Found(named.group(1) if named else "", None, "hermes", m.start(), end, False)
        else:
            calls = json_calls(value) if value is not None else None
            if not calls:  # JSON, but not a call
                pos = m.end()
                continue
            for name, args in calls:
                yield Found(name, args, "hermes", m.start(), end, closed)
        pos = max(end, m.end())


FAMILY = Family(
    "hermes",
    read,
    triggers=("<tool_call",),
    stream=("<tool_call",),
    call_start=r"<tool_call>",
    tokens=("<|im_end|>", "<|im_start|>", "<|endoftext|>"),
    think_open=("<think>", "<thinking>", "<reasoning>"),
    think_close=("</think>", "</thinking>", "</reasoning>"),
    think_openers=(("<think>", "<think>"),),
)
