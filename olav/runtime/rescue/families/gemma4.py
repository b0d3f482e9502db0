"""Gemma 4: ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>``.

Its arguments are an object of its own notation: keys bare or quoted with ``<|"|>``,
strings between ``<|"|>`` quotes, numbers, ``true``/``false``/``null``, lists, objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.families.reading import Family, Found, Reading, ends, skip_ws

OPEN = "<|tool_call>"
CLOSE = "<tool_call|>"
QUOTE = '<|"|>'
_NAME = re.compile(r"call:([A-Za-z_][\w.\-]*+)")
_BARE = re.compile(r"[^,}\]\s]++")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?")


class _Cut(Exception):
    """The value is not complete (cut short or malformed)."""


def _value(text: str, pos: int) -> tuple[Any, int]:
    pos = skip_ws(text, pos)
    if text.startswith(QUOTE, pos):
        end = text.find(QUOTE, pos + len(QUOTE))
        if end < 0:
            raise _Cut
        return text[pos + len(QUOTE) : end], end + len(QUOTE)
    if pos >= len(text):
        raise _Cut
    ch = text[pos]
    if ch == "{":
        return _object(text, pos)
    if ch == "[":
        out: list[Any] = []
        pos = skip_ws(text, pos + 1)
        if text.startswith("]", pos):
            return out, pos + 1
        while True:
            value, pos = _value(text, pos)
            out.append(value)
            pos = skip_ws(text, pos)
            if text.startswith(",", pos):
                pos += 1
                continue
            if text.startswith("]", pos):
                return out, pos + 1
            raise _Cut
    bare = _BARE.match(text, pos)
    if bare is None:
        raise _Cut
    word = bare.group()
    if bare.end() >= len(text):
        raise _Cut  # the text ends inside the value: it may go on
    if word in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[word], bare.end()
    if _NUMBER.fullmatch(word):
        return json.loads(word), bare.end()
    raise _Cut


def _object(text: str, pos: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    pos = skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        return out, pos + 1
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(QUOTE, pos):
            key, pos = _value(text, pos)
            pos = skip_ws(text, pos)
        else:
            colon = text.find(":", pos)
            if colon < 0 or any(c in text[pos:colon] for c in "{}[],<"):
                raise _Cut
            key, pos = text[pos:colon].strip(), colon
        if not text.startswith(":", pos):
            raise _Cut
        value, pos = _value(text, pos + 1)
        out[str(key)] = value
        pos = skip_ws(text, pos)
        if text.startswith(",", pos):
            pos += 1
            continue
        if text.startswith("}", pos):
            return out, pos + 1
        raise _Cut


def read(r: Reading) -> Iterator[Found]:
    text, pos = r.text, 0
    while (start := text.find(OPEN, pos)) >= 0:
        name = _NAME.match(text, start + len(OPEN))
        close = text.find(CLOSE, start)
        if name is None or not text.startswith("{", name.end()):
            end = close + len(CLOSE) if close >= 0 else len(text)
            yield Found(name.group(1) if name else "", None, "gemma4", start, end, False)
            pos = end
            continue
        try:
            args, end = _object(text, name.end())
        except _Cut:
            end = close + len(CLOSE) if close >= 0 else len(text)
            yield Found(name.group(1), None, "gemma4", start, end, False)
            pos = end
            continue
        after = skip_ws(text, end)
        if text.startswith(CLOSE, after):
            yield Found(name.group(1), args, "gemma4", start, after + len(CLOSE))
            pos = after + len(CLOSE)
        else:
            yield Found(name.group(1), args, "gemma4", start, end, ends(text, end, r.finished))
            pos = end


FAMILY = Family(
    "gemma4",
    read,
    triggers=(OPEN,),
    stream=("<|",),
    call_start=r"<\|tool_call>",
    tokens=(
        "<|tool_call>",
        "<|tool_response>",
        "<|turn>",
        "<|turn|>",
        "<|channel>",
        '<|"|>',
        '<|">',
        "<|think>",
        "<|think|>",
        "<tool_call|>",
        "<tool_response|>",
        "<turn|>",
        "<channel|>",
    ),
    think_open=("<|channel>thought",),
    think_close=("<channel|>",),
    think_openers=(("<|channel>thought", "<|channel>thought\n"),),
)
