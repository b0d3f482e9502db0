"""GLM 4.5 to 5.3: ``<tool_call>NAME`` then ``<arg_key>K</arg_key><arg_value>V</arg_value>``
pairs, then ``</tool_call>``; a value runs to its ``</arg_value>`` and is
:class:`~olav.runtime.rescue.families.reading.Written` (its type is the schema's)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import Family, Found, Reading, Written, skip_ws

TAG = re.compile(r"<tool_call>")
_NAME_RUN = re.compile(r"[^\s<>]++")
_KEY = re.compile(r"\s*+<arg_key>(.*?)</arg_key>\s*+<arg_value>", re.S)


def _call(text: str, body: int, start: int) -> Found:
    m = _NAME_RUN.match(text, skip_ws(text, body))
    if m is None:
        return Found("", None, "glm", start, len(text), False)
    name, pos = m.group(), m.end()
    args: dict[str, Any] = {}
    while (key := _KEY.match(text, pos)) is not None:
        end = text.find("</arg_value>", key.end())
        if end < 0:  # no </arg_value>: the call's close ends the last value
            close = text.find("</tool_call>", key.end())
            if close < 0:
                return Found(name, None, "glm", start, len(text), False)
            args[key.group(1).strip()] = Written(text[key.end() : close])
            return Found(name, args, "glm", start, close + len("</tool_call>"))
        args[key.group(1).strip()] = Written(text[key.end() : end])
        pos = end + len("</arg_value>")
    after = skip_ws(text, pos)
    if text.startswith("</tool_call>", after):
        return Found(name, args, "glm", start, after + len("</tool_call>"))
    # GLM's template always writes </tool_call>: a call without it was cut, finish reason or not
    return Found(name, args, "glm", start, pos, False)


def read(r: Reading) -> Iterator[Found]:
    text, pos = r.text, 0
    while (m := TAG.search(text, pos)) is not None:
        if text.startswith(("{", "[", "```", "<function="), skip_ws(text, m.end())):
            pos = m.end()  # Hermes's JSON or Qwen3's XML inside the tags
            continue
        found = _call(text, m.end(), m.start())
        yield found
        pos = max(found.end, m.end())


FAMILY = Family(
    "glm",
    read,
    triggers=("<tool_call",),
    stream=("<tool_call",),
    call_start=r"<tool_call>",
)
