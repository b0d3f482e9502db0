"""MiniMax and Claude-style XML: ``<invoke name="NAME"><parameter name="K">V</parameter>
</invoke>``, maybe inside ``<minimax:tool_call>``, ``<function_calls>`` or ``<tool_calls>``.
A parameter's ``string="true"`` keeps its text as written, ``"false"`` reads it as JSON
(DeepSeek V3.2 without DSML); otherwise a value is JSON when it reads as JSON."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import Family, Found, Reading, attrs, scalar
from olav.runtime.rescue.lenient import LenientError, loads

# Model output of any length passes through these on every call: each pattern reads a run of
# characters once (possessive quantifiers), never once for every place it might stop.
_INVOKE = re.compile(
    r"<invoke\s++name=[\"']?+([^\"'<>]++)[\"']?+[^<>]*+>(.*?)(?:</invoke>|\Z)", re.S
)
# other attributes may follow the name
_PARAM = re.compile(
    r"<parameter\s++name=[\"']?+([^\"'<>]++)[\"']?+([^<>]*+)>(.*?)(?:</parameter>|\Z)", re.S
)
_WRAPPER = re.compile(r"<(minimax:tool_call|function_calls|tool_calls)>\s*$")
_WRAPPER_END = re.compile(r"\s*</(minimax:tool_call|function_calls|tool_calls)>")


def _param(value: str, tag: dict[str, str]) -> Any:
    kind = tag.get("string", "").lower()
    if kind == "true":
        return value.strip("\n")
    if kind == "false":
        try:
            return loads(value.strip())
        except LenientError:
            return value.strip()
    return scalar(value)


def read(r: Reading) -> Iterator[Found]:
    text = r.text
    for m in _INVOKE.finditer(text):
        args = {k.strip(): _param(v, attrs(a)) for k, a, v in _PARAM.findall(m.group(2))}
        wrapper = _WRAPPER.search(text[: m.start()])
        start = wrapper.start() if wrapper else m.start()
        close = _WRAPPER_END.match(text, m.end())
        end = close.end() if close else m.end()
        yield Found(m.group(1).strip(), args, "minimax", start, end)


FAMILY = Family(
    "minimax",
    read,
    triggers=("<invoke",),
    stream=("<invoke", "<minimax"),
    call_start=r"<invoke\b",
)
