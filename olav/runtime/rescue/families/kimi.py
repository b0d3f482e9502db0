"""Kimi. K2: an optional section, calls of ``functions.NAME:IDX`` and JSON arguments,
``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>``.
K3 (XTML): ``<|open|>call tool="NAME"<|sep|>`` and its arguments, each
``<|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>``; its reasoning
is the ``think`` element, and ``<|open|>response<|sep|>`` closes it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import (
    Family,
    Found,
    Reading,
    Typed,
    Written,
    ends,
    json_then,
    skip_ws,
)

_BEGIN = "<|tool_call_begin|>"
_ARG = "<|tool_call_argument_begin|>"
_END = "<|tool_call_end|>"
_SECTION = "<|tool_calls_section_begin|>"
_SECTION_END = "<|tool_calls_section_end|>"


def _k2(text: str, finished: bool) -> Iterator[Found]:
    """What stands between the section's start and its first call is not the answer."""
    pos = 0
    while True:
        sec = text.find(_SECTION, pos)
        call = text.find(_BEGIN, pos)
        if call < 0:
            if sec >= 0:  # a section opened with no call in it: cut, nothing to run
                end = text.find(_SECTION_END, sec)
                stop = len(text) if end < 0 else end + len(_SECTION_END)
                yield Found("", None, "kimi", sec, stop, False)
            return
        first = sec if 0 <= sec < call else call
        in_section = first == sec
        pos = call
        while text.startswith(_BEGIN, pos):
            arg = text.find(_ARG, pos)
            if arg < 0:
                yield Found("", None, "kimi", first, len(text), False)
                return
            name = text[pos + len(_BEGIN) : arg].strip()
            value, end, closed = json_then(text, arg + len(_ARG), (_END,), finished)
            if in_section and closed:
                after = skip_ws(text, end)
                if text.startswith(_SECTION_END, after):
                    end = after + len(_SECTION_END)
            yield Found(name, value if closed else None, "kimi", first, end, closed)
            if not closed:
                return
            first = end
            pos = skip_ws(text, end)
        pos = max(pos, first)


_K3_CALL = re.compile(r"<\|open\|>call\b")
_K3_OPEN = re.compile(r"<\|open\|>([a-z_]++)([^<>|]*+)<\|sep\|>")
_K3_ATTR = re.compile(r'(?<![\w-])([\w-]++)="([^"]*+)"')
_K3_ARG_END = re.compile(
    r"<\|close\|>argument<\|sep\|>(?=<\|open\|>argument\b|<\|close\|>call<\|sep\|>|\s*+\Z)"
)
_K3_CALL_END = "<|close|>call<|sep|>"


def _k3_attrs(text: str) -> dict[str, str]:
    """XTML attributes; their values escape ``&`` and ``"`` as ``&amp;`` and ``&quot;``."""
    return {k: html.unescape(v) for k, v in _K3_ATTR.findall(text)}


def _k3(text: str, finished: bool) -> Iterator[Found]:
    """A value ends at the closing tag that another argument or the call's close follows."""
    pos = 0
    while (m := _K3_CALL.search(text, pos)) is not None:
        start = m.start()
        head = _K3_OPEN.match(text, start)
        if head is None:
            yield Found("", None, "kimi", start, len(text), False)
            return
        name = _k3_attrs(head.group(2)).get("tool", "")
        pos = head.end()
        args: dict[str, Any] = {}
        closed = False
        while True:
            if text.startswith(_K3_CALL_END, pos):
                pos += len(_K3_CALL_END)
                closed = True
                break
            arg = _K3_OPEN.match(text, pos)
            if arg is None or arg.group(1) != "argument":
                break
            attrs = _k3_attrs(arg.group(2))
            end = _K3_ARG_END.search(text, arg.end())
            if end is None:
                pos = len(text)
                break
            value = text[arg.end() : end.start()]
            kind = attrs.get("type", "")
            args[attrs.get("key", "")] = (
                Typed(value, "string")
                if kind == "string"
                else Typed(value, "json")
                if kind
                else Written(value)
            )
            pos = end.end()
        if not closed and ends(text, pos, finished) and args:
            closed = pos >= len(text.rstrip())
        yield Found(
            name, args if closed else None, "kimi", start, pos if closed else len(text), closed
        )
        if not closed:
            return


def read(r: Reading) -> Iterator[Found]:
    yield from _k2(r.text, r.finished)
    yield from _k3(r.text, r.finished)


FAMILY = Family(
    "kimi",
    read,
    triggers=("tool_call", "<|open|>call"),
    stream=("<|",),
    call_start=r"<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>|<\|open\|>(?:tools|call)\b",
    token_patterns=(r"<\|(?:open|close)\|>[a-z_]++(?:[^<>|]*+)<\|sep\|>",),
    tokens=(
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_end|>",
        "<|tool_call_argument_begin|>",
        "<|im_assistant|>",
        "<|im_middle|>",
    ),
    think_open=("<|open|>think<|sep|>",),
    think_close=("<|close|>think<|sep|>", "<|open|>response<|sep|>"),
    think_openers=(("<|open|>think<|sep|>", "<|open|>think<|sep|>"),),
)
