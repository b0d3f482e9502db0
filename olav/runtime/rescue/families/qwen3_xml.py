"""Qwen3's XML (qwen3-coder, Qwen3.5): ``<function=NAME>``, its parameters
``<parameter=K>\\nVALUE\\n</parameter>`` and ``</function>``, maybe inside ``<tool_call>``.

A value ends at the ``</parameter>`` another parameter or the function's close follows, or
where the next parameter opens on a line of its own (a ``</parameter>`` the model left out);
one line break at each end is the template's. The same tags around a JSON object are
functionary v3.1's (llama 3.1): those calls are found as ``functionary``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import (
    Family,
    Found,
    Reading,
    Written,
    after_token,
    ends,
    json_then,
    skip_ws,
)

_FN = re.compile(r"<function=([^<>\n]++)>")
_PARAM = re.compile(r"\s*+<parameter=([^<>\n]++)>")
_PARAM_END = re.compile(r"</parameter>(?=\s*+(?:<parameter=|</function>|\Z))")
_NEXT_PARAM = re.compile(r"\n<parameter=[^<>\n]++>\n")
_FN_END = re.compile(r"\n?</function>")


def _trim_line(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def read(r: Reading) -> Iterator[Found]:
    text, finished, pos = r.text, r.finished, 0
    while (fn := _FN.search(text, pos)) is not None:
        opened = re.search(r"<tool_call>\s*+$", text[max(0, fn.start() - 40) : fn.start()])
        start = fn.start() - (len(opened.group()) if opened else 0)
        name = fn.group(1).strip()
        p = fn.end()
        after_name = skip_ws(text, p)
        if text.startswith(("{", "["), after_name):  # functionary: JSON in the tags
            value, end, closed = json_then(text, after_name, ("</function>",), finished)
            end = after_token(text, end, "</tool_call>") if closed else end
            yield Found(name, value if closed else None, "functionary", start, end, closed)
            if not closed:
                return
            pos = end
            continue
        args: dict[str, Any] = {}
        closed = False
        while True:
            param = _PARAM.match(text, p)
            if param is None:
                break
            stop = _PARAM_END.search(text, param.end())
            nxt = _NEXT_PARAM.search(text, param.end(), stop.start() if stop else len(text))
            if nxt is not None:  # no </parameter> before the next parameter: it ends the value
                args[param.group(1).strip()] = Written(_trim_line(text[param.end() : nxt.start()]))
                p = nxt.start()
                continue
            if stop is None:  # no </parameter>: the function's close ends the value
                fn_end = _FN_END.search(text, param.end())
                if fn_end is None:
                    p = len(text)
                    break
                value = text[param.end() : fn_end.start()]
                args[param.group(1).strip()] = Written(value[1:] if value[:1] == "\n" else value)
                p = fn_end.start()
                break
            args[param.group(1).strip()] = Written(_trim_line(text[param.end() : stop.start()]))
            p = stop.end()
        after = skip_ws(text, p)
        if text.startswith("</function>", after):
            p, closed = after + len("</function>"), True
        elif p < len(text) and ends(text, p, finished) and args:
            closed = True
        if closed:
            p = after_token(text, p, "</tool_call>")
            yield Found(name, args, "qwen3_xml", start, p)
            pos = p
            continue
        yield Found(name, None, "qwen3_xml", start, len(text), False)
        return


FAMILY = Family(
    "qwen3_xml",
    read,
    triggers=("<function",),
    stream=("<function",),
    call_start=r"<function=",
)
