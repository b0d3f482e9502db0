"""Lenient JSON: what small models write when they mean JSON.

:func:`loads` accepts strict JSON first (the common case costs one ``json.loads``). When that
fails, one pass over the text rewrites what models get wrong and tries again:

- single-quoted strings, and Python's ``True``/``False``/``None``;
- trailing commas before ``}`` or ``]``;
- backslashes that start no JSON escape (``C:\\configs``, a regex ``\\d+``);
- raw newlines and tabs inside strings;
- unquoted keys (``{name: "x"}``);
- closing braces and brackets missing at the end.

:func:`scan_value` finds where a JSON value that starts at an offset ends (strings of either
quote respected), so the caller can cut it out of surrounding prose.
"""

from __future__ import annotations

import json
import re
from typing import Any

_VALID_ESCAPES = set('"\\/bfnrtu')
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_CLOSERS = {"{": "}", "[": "]"}


class LenientError(ValueError):
    """The text is not JSON, even read leniently."""


def loads(text: str) -> Any:
    """The JSON value in ``text``, read leniently (see the module docstring)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    repaired = repair(text)
    try:
        return json.loads(repaired)
    except (ValueError, RecursionError) as exc:
        raise LenientError(str(exc)) from None


def repair(text: str) -> str:
    """``text`` rewritten as strict JSON where a model's habits broke it."""
    out: list[str] = []
    stack: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            literal, i = _string(text, i)
            out.append(literal)
            continue
        if ch in "{[":
            stack.append(_CLOSERS[ch])
            out.append(ch)
        elif ch in "}]":
            _drop_trailing_comma(out)
            if stack and stack[-1] == ch:
                stack.pop()
            out.append(ch)
        elif ch.isalpha() or ch == "_":
            m = _BARE_KEY.match(text, i)
            word = m.group(0) if m else ch
            if word in _PY_WORDS:
                out.append(_PY_WORDS[word])
            elif word in ("true", "false", "null"):
                out.append(word)
            else:  # an unquoted key (or a bare word value): quote it
                out.append(json.dumps(word))
            i += len(word)
            continue
        else:
            out.append(ch)
        i += 1
    _drop_trailing_comma(out)
    out.extend(reversed(stack))  # braces the model never closed
    return "".join(out)


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j].isspace():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def _string(text: str, start: int) -> tuple[str, int]:
    """The string literal opening at ``start`` (either quote) as a strict JSON literal, and
    the offset after it. An unterminated string runs to the end of the text."""
    quote = text[start]
    buf: list[str] = []
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == quote or (nxt in _VALID_ESCAPES and nxt != "u"):
                buf.append(text[i : i + 2] if nxt != "'" else "'")
                i += 2
                continue
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                buf.append(text[i : i + 6])
                i += 6
                continue
            buf.append("\\\\")  # a lone backslash: keep it as a character
            i += 1
            continue
        if ch == quote:
            return '"' + "".join(buf) + '"', i + 1
        if ch == '"':  # a double quote inside a single-quoted string
            buf.append('\\"')
        elif ch == "\n":
            buf.append("\\n")
        elif ch == "\t":
            buf.append("\\t")
        elif ch == "\r":
            buf.append("\\r")
        else:
            buf.append(ch)
        i += 1
    return '"' + "".join(buf) + '"', n


def scan_value(text: str, start: int) -> int:
    """The offset just past the JSON object or array opening at ``start``, or ``len(text)``
    when it is never closed (a model that stopped before its last brace)."""
    depth = 0
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def closes_at(text: str, start: int, opens: str = "{[", shuts: str = "}]") -> int | None:
    """The offset just past the JSON object or array opening at ``start``, or None when
    the text ends before its last bracket (or inside a string): the model never closed it.
    ``opens`` and ``shuts`` are the brackets counted (``"([{"``, ``")]}"`` for a call)."""
    depth = 0
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            if ch == "'" and i > 0 and text[i - 1].isalnum():
                i += 1
                continue
            m = _STRING_BODY[ch].match(text, i + 1)
            end = m.end() if m else i + 1
            if end >= n:
                return None
            i = end + 1
            continue
        if ch in opens:
            depth += 1
        elif ch in shuts:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _skip_string(text: str, start: int) -> int:
    quote = text[start]
    # an apostrophe in a bare word (don't, it's) starts no string
    if quote == "'" and start > 0 and text[start - 1].isalnum():
        return start + 1
    m = _STRING_BODY[quote].match(text, start + 1)
    end = m.end() if m else start + 1
    return end + 1 if end < len(text) else len(text)


_STRING_BODY = {q: re.compile(rf"(?:[^{q}\\]|\\.)*", re.S) for q in "\"'"}
