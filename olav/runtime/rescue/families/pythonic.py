"""Llama 3.2 and 4's pythonic calls: ``[name(a=1, b="x"), other()]`` on lines of its own; a
lone ``name(a=1)`` only as the whole message and only when no strong family found a call.
Weak: an answer may show such a list as content."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, python_calls
from olav.runtime.rescue.lenient import scan_value

_LIST = re.compile(r"^[ \t]*\[(?=[ \t]*[A-Za-z_][\w.]*\()", re.M)
_CALL = re.compile(r"^[ \t]*(?=[A-Za-z_][\w.]*\(.*\)[ \t]*$)", re.M)


def read(r: Reading) -> Iterator[Found]:
    text, masked = r.text, r.masked
    for m in _LIST.finditer(text):
        if masked.hides(m.end()) or masked.in_fence(m.end()):
            continue
        end = scan_value(text, m.end() - 1)
        line_end = text.find("\n", end)
        if text[end : line_end if line_end >= 0 else len(text)].strip():
            continue
        for name, args in python_calls(text[m.end() - 1 : end]) or []:
            yield Found(name, args, "pythonic", m.start(), end, strong=False)
    if r.alone:
        stripped = text.strip()
        if _CALL.match(stripped) and "\n" not in stripped:
            for name, args in python_calls(stripped) or []:
                yield Found(name, args, "pythonic", text.find(stripped), len(text), strong=False)


FAMILY = Family("pythonic", read, strong=False, triggers=("(",))
