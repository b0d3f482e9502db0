"""Mistral: ``[TOOL_CALLS]`` and a JSON list of calls (v3), or ``NAME[ARGS]{…}`` (v11 and
later; ``[CALL_ID]`` as llama.cpp's tests write it), repeated. Magistral's reasoning is
``[THINK]…[/THINK]``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from olav.runtime.rescue.families.reading import (
    Family,
    Found,
    Reading,
    json_calls,
    json_then,
    skip_ws,
)

MARK = "[TOOL_CALLS]"
_NAMED = re.compile(
    r"\s*+([A-Za-z_][\w.\-]*+)\s*+(?:\[CALL_ID\]\s*+[\w-]*+\s*+)?(\[ARGS\])?\s*+(?=[\[{])"
)


def read(r: Reading) -> Iterator[Found]:
    text, finished, pos = r.text, r.finished, 0
    while (start := text.find(MARK, pos)) >= 0:
        p = start + len(MARK)
        q = skip_ws(text, p)
        if text.startswith(("[", "{"), q):
            value, end, closed = json_then(text, q, (), finished)
            calls = json_calls(value) if closed else None
            if calls:
                for name, args in calls:
                    yield Found(name, args, "mistral", start, end)
                pos = end
                continue
            yield Found("", None, "mistral", start, len(text) if value is None else end, False)
            return
        named = _NAMED.match(text, p)
        if named is None:  # [TOOL_CALLS] and nothing after it (the answer stopped there)
            yield Found("", None, "mistral", start, len(text) if not text[p:].strip() else p, False)
            pos = p
            continue
        value, end, closed = json_then(text, named.end(), (), finished)
        closed = closed or (value is not None and text.startswith(MARK, skip_ws(text, end)))
        yield Found(
            named.group(1),
            value if closed else None,
            "mistral",
            start,
            end if closed else len(text),
            closed,
        )
        if not closed:
            return
        pos = end


FAMILY = Family(
    "mistral",
    read,
    triggers=(MARK,),
    stream=(MARK, "[THINK]"),
    call_start=r"\[TOOL_CALLS\]",
    tokens=("[TOOL_CALLS]", "[THINK]", "[/THINK]", "[ARGS]", "[CALL_ID]", "[INST]", "[/INST]"),
    think_open=("[THINK]",),
    think_close=("[/THINK]",),
    think_openers=(("[THINK]", "[THINK]"),),
)
