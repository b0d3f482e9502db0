"""What every family's reader shares: the find, the text's code regions, JSON at an offset.

Two rules hold for every reader:

- **A value ends where its grammar ends it**, never at the next marker: a string runs to its
  own delimiter, a JSON value to its last bracket (read by the JSON decoder), a tagged value
  to its closing tag. A marker the model quoted inside an argument stays in the argument.
- **A call the model did not finish is never completed.** A call is ``closed`` when its
  closing marker was written, or, for a message that ended on a stop token (``finished``),
  when the text ends right after a complete value (the stop token that would close it is
  not part of the text). Anything cut short (on the token limit, or malformed) is found
  with ``closed=False``: its span is taken out of the answer and it never runs.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from olav.runtime.rescue.lenient import LenientError, closes_at, loads


@dataclass(frozen=True)
class Found:
    """One call as written: raw ``name`` and ``args`` (a dict, or text to read as JSON),
    the family that read it and the span it takes. ``strong``: the family's markers are used
    only by tool calls (tags, special tokens); a weak one (JSON, a Python call list) an
    answer may also show as content."""

    name: str
    args: Any
    family: str
    start: int
    end: int
    closed: bool = True  # the call's grammar was completed
    strong: bool = True


class Written(str):
    """A tagged argument value as written: its type comes from the tool's schema
    (:func:`olav.runtime.rescue.salvage.typed`), as the engines do: ``3`` for an integer
    field, ``"3"`` for a string one."""

    __slots__ = ()


class Typed(str):
    """A tagged value whose tag names its type (Kimi K3's ``type="number"``, DSML's
    ``string="false"``): ``kind`` is ``string`` or ``json``."""

    __slots__ = ("kind",)
    kind: str

    def __new__(cls, text: str, kind: str) -> Typed:
        obj = super().__new__(cls, text)
        obj.kind = kind
        return obj


# -- the text's code regions -------------------------------------------------------------------

_FENCE = re.compile(
    r"^[ \t]*+```[ \t]*+([\w+#.-]*+)[^\n]*+\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.S | re.M
)
_INLINE = re.compile(r"(?<!`)`[^`\n]+`(?!`)")
_JSON_LANGS = {"json", "json5", "jsonc", "tool_call", "tool_code", "tool", ""}


@dataclass(frozen=True)
class Masked:
    """The text's code regions: ``shown`` (fenced code in another language, inline code:
    what an answer shows) and ``fences`` (JSON fences: (start, end, body start, body end))."""

    shown: list[tuple[int, int]]
    fences: list[tuple[int, int, int, int]]
    other_code: bool  # a fence in another language: the answer shows code

    def hides(self, pos: int) -> bool:
        return any(a <= pos < b for a, b in self.shown)

    def in_fence(self, pos: int) -> bool:
        return any(a <= pos < b for a, b, _, _ in self.fences)


def mask(text: str) -> Masked:
    shown: list[tuple[int, int]] = []
    fences: list[tuple[int, int, int, int]] = []
    for m in _FENCE.finditer(text):
        lang = m.group(1).lower()
        if lang in _JSON_LANGS:
            fences.append((m.start(), m.end(), m.start(2), m.end(2)))
        else:
            shown.append((m.start(), m.end()))
    other = bool(shown)
    covered = [(a, b) for a, b, _, _ in fences] + shown
    for m in _INLINE.finditer(text):
        if not any(a <= m.start() < b for a, b in covered):
            shown.append((m.start(), m.end()))
    return Masked(shown, fences, other)


@dataclass(frozen=True)
class Reading:
    """What a reader is given: the message, whether it ended on a stop token (not on the
    token limit), its code regions, and ``alone``: no strong family found a call in it (a
    lone ``f(a=1)`` is a call only as the whole message)."""

    text: str
    finished: bool
    masked: Masked
    alone: bool = True


@dataclass(frozen=True)
class Family:
    """One family of tool calls written as text, all of it in one place: how its calls are
    read, and the markers the rest of the rescue layer needs from it. A module per family
    declares one (``FAMILY``); :data:`olav.runtime.rescue.families.FAMILIES` lists them in
    the order they read a message."""

    name: str
    read: Callable[[Reading], Iterable[Found]]
    strong: bool = True  # its markers mean a call wherever they are outside code
    # a cheap test before any regex: a message with none of these holds no call of the family
    triggers: tuple[str, ...] = ()
    # from the first of these in a streamed message, the stream shows nothing more of it
    stream: tuple[str, ...] = ()
    # where a call begins (a regex): reasoning tags after it are the call's text
    call_start: str = ""
    # control tokens scrubbed from the answer: regexes, tried first, then literal tokens
    token_patterns: tuple[str, ...] = ()
    tokens: tuple[str, ...] = ()
    # reasoning tags (literal, matched in any case), and what a prompt ends with when the
    # template opened reasoning, with what the message is read as starting with then
    think_open: tuple[str, ...] = ()
    think_close: tuple[str, ...] = ()
    think_openers: tuple[tuple[str, str], ...] = ()


# -- JSON at an offset -------------------------------------------------------------------------

_DECODER = json.JSONDecoder()


def json_value(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value opening at ``start`` and the offset after it, or None: strict JSON
    at C speed, else read leniently (single quotes, Python words, trailing commas, stray
    backslashes: :mod:`olav.runtime.rescue.lenient`), but only up to where its brackets
    close. A value the model never closed is never completed."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    if start >= len(text) or text[start] not in "{[":
        return None
    end = closes_at(text, start)
    if end is None:
        return None
    try:
        return loads(text[start:end]), end
    except LenientError:
        return None


def skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def after_token(text: str, pos: int, token: str) -> int:
    """Past ``token`` when it follows ``pos`` (blanks between), else ``pos``."""
    at = skip_ws(text, pos)
    return at + len(token) if text.startswith(token, at) else pos


def ends(text: str, pos: int, finished: bool) -> bool:
    """The text ends at ``pos`` (blanks aside) on a stop token."""
    return finished and not text[pos:].strip()


def json_then(
    text: str, pos: int, closers: tuple[str, ...], finished: bool, *, fence: bool = False
) -> tuple[Any, int, bool]:
    """The JSON value at ``pos`` (after blanks and, with ``fence``, a ```` ```json ````
    line), then one of ``closers`` (or the stop token): ``(value, end, closed)``; ``end`` is
    past the closer when there is one. A value that does not parse is not closed; where it
    ends then is the next closer, or the end of the text."""
    start = skip_ws(text, pos)
    if fence:
        m = re.match(r"```[\w]*+[ \t]*+\n?", text[start:])
        if m:
            start = skip_ws(text, start + m.end())
    got = json_value(text, start)
    if got is None:
        hits = [i for i in (text.find(c, start) for c in closers) if i >= 0]
        cut = min(hits) if hits else len(text)
        closer = next((c for c in closers if text.startswith(c, cut)), "")
        return None, cut + len(closer), False
    value, end = got
    after = skip_ws(text, end)
    if fence and text.startswith("```", after):
        after = skip_ws(text, after + 3)
    for closer in closers:
        if text.startswith(closer, after):
            return value, after + len(closer), True
    return value, end, ends(text, end, finished)


# -- call-shaped JSON and tagged values --------------------------------------------------------

_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input", "action_input", "params")
_CALL_KEYS = {"name", "id", "type", "index", "call_id", *_ARG_KEYS}


def json_calls(value: Any) -> list[tuple[str, Any]] | None:
    """The calls a JSON value spells, or None when it is not call-shaped: ``{"name",
    "arguments"|"parameters"|…}``, OpenAI's ``{"type": "function", "function": {…}}`` and
    ``{"tool_calls": […]}``, ReAct's ``{"action", "action_input"}``, or a list of these."""
    if isinstance(value, list):
        if not value:
            return None
        out: list[tuple[str, Any]] = []
        for item in value:
            calls = json_calls(item)
            if calls is None:
                return None
            out.extend(calls)
        return out
    if not isinstance(value, dict):
        return None
    keys = set(value)
    if "tool_calls" in value and keys <= {"tool_calls", "role", "content"}:
        return json_calls(value["tool_calls"])
    fn = value.get("function")
    if isinstance(fn, dict) and keys <= {"function", "type", "id", "index"}:
        return json_calls({k: v for k, v in fn.items() if k != "description"})
    if isinstance(value.get("action"), str) and keys <= {"action", "action_input", "thought"}:
        return [(value["action"], value.get("action_input") or {})]
    if isinstance(value.get("tool"), str) and keys <= {"tool", "tool_input", "args", "arguments"}:
        given = [value[k] for k in ("tool_input", "args", "arguments") if k in value]
        return [(value["tool"], given[0] if given else {})]
    name = value.get("name")
    if isinstance(name, str) and keys <= _CALL_KEYS:
        given = [value[k] for k in _ARG_KEYS if k in value]
        return [(name, given[0] if given else {})]
    return None


_ATTR = re.compile(r"(?<![\w:-])([\w:-]++)\s*+=\s*+(?:\"([^\"]*+)\"|'([^']*+)'|([^\s\"'>]++))")


def attrs(text: str) -> dict[str, str]:
    """A tag's attributes (``name="x" string='true' n=3``)."""
    return {
        m.group(1): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(text)
    }


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def scalar(text: str) -> Any:
    """A parameter value written between tags: JSON when it reads as JSON, else the text."""
    value = text.strip("\n")
    stripped = value.strip()
    if stripped[:1] in "[{" or stripped in ("true", "false", "null") or _NUMBER.fullmatch(stripped):
        try:
            return loads(stripped)
        except LenientError:
            pass
    return value


def json_after(text: str, token: re.Pattern[str], family: str) -> Iterator[Found]:
    """Calls as JSON after a family's token (Granite's ``<|tool_call|>``, llama's
    ``<|python_tag|>``, …): one value or several, ``;`` or a newline apart, then maybe the
    token that ends the turn."""
    for m in token.finditer(text):
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
        end = pos
        values: list[Any] = []
        while pos < len(text) and text[pos] in "[{":
            got = json_value(text, pos)
            if got is None:
                break
            values.append(got[0])
            end = got[1]
            sep = _SEP.match(text, end)
            pos = sep.end() if sep else end
        tail = _TURN_END.match(text, end)
        end = tail.end() if tail else end
        for value in values:
            for name, args in json_calls(value) or []:
                yield Found(name, args, family, m.start(), end)


_SEP = re.compile(r"\s*;?\s*")
_TURN_END = re.compile(r"\s*(?:<\|(?:action_end|eom_id|eot_id|endoftext)\|>|</function_call>)")


def python_calls(source: str) -> list[tuple[str, Any]] | None:
    """``[f(a=1), g()]`` or ``f(a=1)`` as (name, keyword arguments), read by Python's own
    parser; None unless every item is a call with literal keyword arguments."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    nodes = tree.body.elts if isinstance(tree.body, ast.List) else [tree.body]
    out: list[tuple[str, Any]] = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = ast.unparse(node.func)
        if not _DOTTED.fullmatch(name):
            return None
        args: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                return None
            try:
                args[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError):
                return None
        out.append((name, args))
    return out


_DOTTED = re.compile(r"[A-Za-z_][\w.]*")
