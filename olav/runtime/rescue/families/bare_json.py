"""A call object or a list of them on lines of its own, outside code the answer shows; also
OpenAI's ``{"tool_calls": […]}`` and ``{"type": "function", "function": …}`` shapes and
ReAct's ``{"action", "action_input"}``. Weak: an answer may show such an object as content.
The stream's rule for it (an object or list at the start of a line) is
:mod:`olav.runtime.rescue.stream`'s."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_calls, json_value

_LINE = re.compile(r"^[ \t]*(?=[\[{])", re.M)


def read(r: Reading) -> Iterator[Found]:
    text, masked, pos = r.text, r.masked, 0
    while (m := _LINE.search(text, pos)) is not None:
        start = m.end()
        if masked.hides(start) or masked.in_fence(start):
            pos = start + 1
            continue
        got = json_value(text, start)
        if got is None:
            pos = start + 1
            continue
        value, end = got
        calls = json_calls(value)
        line_end = text.find("\n", end)
        rest_of_line = text[end : line_end if line_end >= 0 else len(text)]
        if calls and not rest_of_line.strip():
            for name, args in calls:
                yield Found(name, args, "json", m.start(), end, strong=False)
        pos = max(end, start + 1)


FAMILY = Family("json", read, strong=False, triggers=("{",))
