"""functionary v3.2 (the v3.llama3 template): each turn is ``>>>RECIPIENT\\n…``, ``all``
for text to the person, a function's name for a call with its JSON arguments; recipients
follow each other with no separator. ``python`` (raw code) and the recipient the prompt
already opened (a message that starts ``NAME\\n{``) are not read: neither is marked as a
call. v3.1's ``<function=NAME>{json}</function>`` is read with Qwen3's XML tags
(:mod:`olav.runtime.rescue.families.qwen3_xml`) and found as this family."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_value

_RECIPIENT = re.compile(r">>>([A-Za-z_][\w.\-]*)[ \t]*\n[ \t]*(?=\{)")
_RECIPIENT_END = re.compile(r"\s*(?:>>>|<\|eot_id\|>|<\|eom_id\|>|\Z)")
_STOP = re.compile(r"\s*<\|(?:eot_id|eom_id)\|>")


def read(r: Reading) -> Iterator[Found]:
    text = r.text
    for m in _RECIPIENT.finditer(text):
        if m.group(1) in ("all", "python") or text[m.start() - 1 : m.start()] == ">":
            continue
        got = json_value(text, m.end())
        if got is None or not isinstance(got[0], dict):
            continue
        value, end = got
        if _RECIPIENT_END.match(text, end) is None:  # prose goes on after it: not a call turn
            continue
        stop = _STOP.match(text, end)
        yield Found(m.group(1), value, "functionary", m.start(), stop.end() if stop else end)


FAMILY = Family(
    "functionary",
    read,
    triggers=(">>>",),
    stream=(">>>",),
)
