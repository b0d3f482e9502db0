"""A ```` ```json ```` block (or ``tool_call``, ``tool``, no language) holding nothing but a
call object or a list of them. Weak: an answer may show such a block as content."""

from __future__ import annotations

from collections.abc import Iterator

from olav.runtime.rescue.families.reading import Family, Found, Reading, json_calls, json_value


def read(r: Reading) -> Iterator[Found]:
    text = r.text
    for start, end, body_start, body_end in r.masked.fences:
        body = text[body_start:body_end]
        got = json_value(text, body_start + len(body) - len(body.lstrip()))
        if got is None or text[got[1] : body_end].strip():
            continue
        for name, args in json_calls(got[0]) or []:
            yield Found(name, args, "json_fenced", start, end, strong=False)


FAMILY = Family("json_fenced", read, strong=False, triggers=("{",), stream=("```json", "```tool"))
