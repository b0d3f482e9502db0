"""IBM Granite: ``<|tool_call|>[{"name": …, "arguments": …}]``; granite-20b-functioncalling
writes ``<function_call> {…}``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_after

_TOKEN = re.compile(r"<\|tool_call\|>|<function_call>")


def read(r: Reading) -> Iterator[Found]:
    return json_after(r.text, _TOKEN, "granite")


FAMILY = Family(
    "granite",
    read,
    triggers=("<|tool_call|>", "<function_call>"),
    stream=("<|", "<function"),
    tokens=("<|tool_call|>", "<|tool_response|>"),
)
