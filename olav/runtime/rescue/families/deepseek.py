"""DeepSeek. V3: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` and a fenced JSON block;
V3.1: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>``; V3.2 to V4.1 write
DSML: ``<｜DSML｜invoke name="NAME">`` a call, ``<｜DSML｜parameter name="K" string="true">``
an argument whose value runs to its closing tag (``string="true"``: the text as written;
``"false"``: JSON). The tokens' bars are full-width; the ASCII spelling is read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import (
    Family,
    Found,
    Reading,
    Typed,
    Written,
    attrs,
    json_then,
    json_value,
    skip_ws,
)

_DS = "[｜|]"
_DS_SEP = "[▁_ ]"


def _ds(word: str) -> str:
    return f"<{_DS}{_DS_SEP.join(word.split())}{_DS}>"


_CALLS_BEGIN = re.compile(_ds("tool calls begin"))
_CALLS_END = re.compile(r"\s*+" + _ds("tool calls end"))
_CALL_BEGIN = re.compile(_ds("tool call begin"))
_SEP_TOKEN = re.compile(_ds("tool sep"))
_CALL_END = ("<｜tool▁call▁end｜>", "<|tool_call_end|>", "<｜tool call end｜>")
_FN_NAME = re.compile(r"\s*+([\w.\-]++)")


def _v3(text: str, finished: bool) -> Iterator[Found]:
    pos = 0
    while (m := _CALL_BEGIN.search(text, pos)) is not None:
        opened = _CALLS_BEGIN.search(text, max(0, pos), m.start())
        start = (
            opened.start() if opened and not text[opened.end() : m.start()].strip() else (m.start())
        )
        sep = _SEP_TOKEN.search(text, m.end())
        if sep is None:
            if m.group().startswith("<｜"):  # deepseek's own token: a call cut short
                yield Found("", None, "deepseek", start, len(text), False)
            return
        head = text[m.end() : sep.start()].strip()
        body = sep.end()
        fence = False
        if head in ("function", "") or head.endswith("function"):
            nm = _FN_NAME.match(text, body)
            if nm is None:
                yield Found("", None, "deepseek", start, len(text), False)
                return
            name, body, fence = nm.group(1), nm.end(), True
        else:
            name = head
        value, end, closed = json_then(text, body, _CALL_END, finished, fence=fence)
        if closed:
            tail = _CALLS_END.match(text, end)
            end = tail.end() if tail else end
        stop = end if closed or (value is None and end < len(text)) else len(text)
        yield Found(name, value if closed else None, "deepseek", start, stop, closed)
        if not closed and end >= len(text):
            return
        pos = end


# DSML: V3.2 <｜DSML｜function_calls>, V4 <｜DSML｜tool_calls>, V4.1 <｜DSML｜ calls> (a space)
_DSML_TAG = r"<(/?)[｜|]DSML[｜|]\s*+"
_DSML_BLOCK = re.compile(_DSML_TAG + r"(function_calls|tool_calls|calls)>")
_DSML_BLOCK_END = re.compile(r"\s*+" + _DSML_TAG + r"(?:function_calls|tool_calls|calls)>")
_DSML_INVOKE = re.compile(r"<[｜|]DSML[｜|]\s*+invoke\b([^<>]*+)>")
_DSML_INVOKE_END = re.compile(r"</(?:[｜|]DSML[｜|])?\s*+invoke>")
_DSML_PARAM = re.compile(r"<[｜|]DSML[｜|]\s*+parameter\b([^<>]*+)>")
_DSML_PARAM_END = re.compile(r"</(?:[｜|]DSML[｜|])?\s*+parameter>")


def _dsml(text: str) -> Iterator[Found]:
    pos = 0
    while (inv := _DSML_INVOKE.search(text, pos)) is not None:
        block = None
        for b in _DSML_BLOCK.finditer(text, 0, inv.start()):
            block = b
        start = inv.start()
        if block is not None and not block.group(1) and not text[block.end() : inv.start()].strip():
            start = block.start()
        name = attrs(inv.group(1)).get("name", "").strip()
        args: dict[str, Any] = {}
        p = inv.end()
        closed = inv.group(1).rstrip().endswith("/")  # <｜DSML｜invoke name="x"/>: no arguments
        while not closed:
            p = skip_ws(text, p)
            end = _DSML_INVOKE_END.match(text, p)
            if end is not None:
                p, closed = end.end(), True
                break
            param = _DSML_PARAM.match(text, p)
            if param is None:
                break
            stop = _DSML_PARAM_END.search(text, param.end())
            if stop is None:
                p = len(text)
                break
            a = attrs(param.group(1))
            value = text[param.end() : stop.start()]
            kind = a.get("string", "").lower()
            args[a.get("name", "").strip()] = (
                Typed(value, "string")
                if kind == "true"
                else Typed(value, "json")
                if kind == "false"
                else Written(value)
            )
            p = stop.end()
        if not closed and not args:  # the arguments as one JSON object inside invoke
            got = json_value(text, skip_ws(text, p))
            end = _DSML_INVOKE_END.match(text, skip_ws(text, got[1])) if got else None
            if got is not None and end is not None and isinstance(got[0], dict):
                args, p, closed = got[0], end.end(), True
        if closed:
            tail = _DSML_BLOCK_END.match(text, p)
            p = tail.end() if tail else p
            yield Found(name, args, "deepseek", start, p)
            pos = p
            continue
        yield Found(name, None, "deepseek", start, len(text), False)
        return


def read(r: Reading) -> Iterator[Found]:
    found = list(_v3(r.text, r.finished))
    sep = r.text.find("<｜tool▁sep｜>")
    if not found and sep >= 0:  # its separator without the call's opening token: broken
        at = max(0, r.text.rfind("<｜", 0, sep))
        found = [Found("", None, "deepseek", at, len(r.text), False)]
    yield from found
    if "DSML" in r.text:
        yield from _dsml(r.text)


FAMILY = Family(
    "deepseek",
    read,
    triggers=("tool", "DSML"),
    stream=("<｜", "<|"),
    call_start=r"<[｜|]tool[▁_ ]calls?[▁_ ]begin[｜|]>|<[｜|]DSML[｜|]",
    token_patterns=(
        r"<[｜|](?:end▁of▁sentence|tool▁calls▁begin|tool▁calls▁end|tool▁call▁begin"
        r"|tool▁call▁end|tool▁sep|Assistant|User)[｜|]>",
    ),
    think_open=("<think>",),
    think_close=("</think>",),
)
