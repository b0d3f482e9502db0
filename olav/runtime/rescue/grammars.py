"""The call grammars of the open model families, read as their chat templates write them.
One cohesive catalogue (over 500 lines on purpose): one reader per family, side by side, as
the templates are.

Each reader follows one family's official template, token for token, and yields a
:class:`~olav.runtime.rescue.formats.Found` for every call with the span it takes in the
text. Two rules hold for all of them:

- **A value ends where its grammar ends it**, never at the next marker: a string runs to its
  own delimiter, a JSON value to its last bracket (read by the JSON decoder), a tagged value
  to its closing tag. A marker the model quoted inside an argument stays in the argument.
- **A call the model did not finish is never completed.** A call is ``closed`` when its
  closing marker was written, or, for a message that ended on a stop token (``finished``),
  when the text ends right after a complete value (the stop token that would close it is
  not part of the text). Anything cut short (on the token limit, or malformed) is yielded
  with ``closed=False``: its span is taken out of the answer and it never runs.

| family | a call as written |
|---|---|
| gemma4 | ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>`` |
| hermes | ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` |
| glm | ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`` |
| qwen3_xml | ``<function=NAME><parameter=K>\\nV\\n</parameter></function>`` |
| kimi | K2: ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}`` |
| | ``<|tool_call_end|>``; K3: ``<|open|>call tool="NAME"<|sep|>`` and arguments |
| | ``<|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|>`` |
| deepseek | V3: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` and a fenced JSON block; |
| | V3.1: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>``; V3.2 to V4.1 DSML |
| mistral | ``[TOOL_CALLS]NAME[ARGS]{…}``, ``[TOOL_CALLS][{"name": …, "arguments": …}]`` |
| gpt_oss | ``to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>{…}<|call|>`` |

A tagged value (GLM, Qwen3 XML, DSML, Kimi K3) is :class:`Written`: text whose type the
tool's schema decides (:func:`olav.runtime.rescue.salvage.typed`), as the engines do:
``3`` for an integer field, ``"3"`` for a string one.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

from olav.runtime.rescue.lenient import LenientError, closes_at, loads

_DECODER = json.JSONDecoder()


class Written(str):
    """A tagged argument value as written: its type comes from the tool's schema."""

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


def _ends(text: str, pos: int, finished: bool) -> bool:
    """The text ends at ``pos`` (blanks aside) on a stop token."""
    return finished and not text[pos:].strip()


# -- call-shaped JSON --------------------------------------------------------------------------

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


# -- Gemma 4 -----------------------------------------------------------------------------------

GEMMA_OPEN = "<|tool_call>"
GEMMA_CLOSE = "<tool_call|>"
GEMMA_QUOTE = '<|"|>'
_GEMMA_NAME = re.compile(r"call:([A-Za-z_][\w.\-]*+)")
_GEMMA_BARE = re.compile(r"[^,}\]\s]++")
_GEMMA_NUMBER = re.compile(r"-?(?:0|[1-9]\d*+)(?:\.\d++)?(?:[eE][+-]?\d++)?")


class _Cut(Exception):
    """The value is not complete (cut short or malformed)."""


def _gemma_value(text: str, pos: int) -> tuple[Any, int]:
    pos = skip_ws(text, pos)
    if text.startswith(GEMMA_QUOTE, pos):
        end = text.find(GEMMA_QUOTE, pos + len(GEMMA_QUOTE))
        if end < 0:
            raise _Cut
        return text[pos + len(GEMMA_QUOTE) : end], end + len(GEMMA_QUOTE)
    if pos >= len(text):
        raise _Cut
    ch = text[pos]
    if ch == "{":
        return _gemma_object(text, pos)
    if ch == "[":
        out: list[Any] = []
        pos = skip_ws(text, pos + 1)
        if text.startswith("]", pos):
            return out, pos + 1
        while True:
            value, pos = _gemma_value(text, pos)
            out.append(value)
            pos = skip_ws(text, pos)
            if text.startswith(",", pos):
                pos += 1
                continue
            if text.startswith("]", pos):
                return out, pos + 1
            raise _Cut
    bare = _GEMMA_BARE.match(text, pos)
    if bare is None:
        raise _Cut
    word = bare.group()
    if bare.end() >= len(text):
        raise _Cut  # the text ends inside the value: it may go on
    if word in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[word], bare.end()
    if _GEMMA_NUMBER.fullmatch(word):
        return json.loads(word), bare.end()
    raise _Cut


def _gemma_object(text: str, pos: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    pos = skip_ws(text, pos + 1)
    if text.startswith("}", pos):
        return out, pos + 1
    while True:
        pos = skip_ws(text, pos)
        if text.startswith(GEMMA_QUOTE, pos):
            key, pos = _gemma_value(text, pos)
            pos = skip_ws(text, pos)
        else:
            colon = text.find(":", pos)
            if colon < 0 or any(c in text[pos:colon] for c in "{}[],<"):
                raise _Cut
            key, pos = text[pos:colon].strip(), colon
        if not text.startswith(":", pos):
            raise _Cut
        value, pos = _gemma_value(text, pos + 1)
        out[str(key)] = value
        pos = skip_ws(text, pos)
        if text.startswith(",", pos):
            pos += 1
            continue
        if text.startswith("}", pos):
            return out, pos + 1
        raise _Cut


def gemma4(text: str, finished: bool) -> Iterator[tuple[str, Any, int, int, bool]]:
    """``(name, args, start, end, closed)`` of each Gemma 4 call."""
    pos = 0
    while (start := text.find(GEMMA_OPEN, pos)) >= 0:
        name = _GEMMA_NAME.match(text, start + len(GEMMA_OPEN))
        close = text.find(GEMMA_CLOSE, start)
        if name is None or not text.startswith("{", name.end()):
            end = close + len(GEMMA_CLOSE) if close >= 0 else len(text)
            yield (name.group(1) if name else "", None, start, end, False)
            pos = end
            continue
        try:
            args, end = _gemma_object(text, name.end())
        except _Cut:
            end = close + len(GEMMA_CLOSE) if close >= 0 else len(text)
            yield (name.group(1), None, start, end, False)
            pos = end
            continue
        after = skip_ws(text, end)
        if text.startswith(GEMMA_CLOSE, after):
            yield (name.group(1), args, start, after + len(GEMMA_CLOSE), True)
            pos = after + len(GEMMA_CLOSE)
        else:
            yield (name.group(1), args, start, end, _ends(text, end, finished))
            pos = end


# -- Kimi K3 (XTML) ----------------------------------------------------------------------------

K3_OPEN = re.compile(r"<\|open\|>([a-z_]++)([^<>|]*+)<\|sep\|>")
K3_CLOSE = re.compile(r"<\|close\|>([a-z_]++)<\|sep\|>")
_K3_ATTR = re.compile(r'(?<![\w-])([\w-]++)="([^"]*+)"')
_K3_ARG_END = re.compile(
    r"<\|close\|>argument<\|sep\|>(?=<\|open\|>argument\b|<\|close\|>call<\|sep\|>|\s*+\Z)"
)


def _k3_attrs(text: str) -> dict[str, str]:
    """XTML attributes; their values escape ``&`` and ``"`` as ``&amp;`` and ``&quot;``."""
    return {k: html.unescape(v) for k, v in _K3_ATTR.findall(text)}


def kimi_k3(text: str, finished: bool) -> Iterator[tuple[str, Any, int, int, bool]]:
    """Kimi K3's calls: ``<|open|>call tool="NAME" index="1"<|sep|>`` with its arguments,
    each ``<|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>``; a value
    ends at the closing tag that another argument or the call's close follows."""
    pos = 0
    while (m := re.compile(r"<\|open\|>call\b").search(text, pos)) is not None:
        start = m.start()
        head = K3_OPEN.match(text, start)
        if head is None:
            yield ("", None, start, len(text), False)
            return
        name = _k3_attrs(head.group(2)).get("tool", "")
        pos = head.end()
        args: dict[str, Any] = {}
        closed = False
        while True:
            if text.startswith("<|close|>call<|sep|>", pos):
                pos += len("<|close|>call<|sep|>")
                closed = True
                break
            arg = K3_OPEN.match(text, pos)
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
        if not closed and _ends(text, pos, finished) and args:
            closed = bool(args) and pos >= len(text.rstrip())
        yield (name, args if closed else None, start, pos if closed else len(text), closed)
        if not closed:
            return


# -- Harmony (gpt-oss) -------------------------------------------------------------------------

_H_TOKEN = re.compile(r"<\|(?:start|channel|constrain|message|end|call|return)\|>")
_H_RECIPIENT = re.compile(r"\bto=([^\s<]++)")
_H_CHANNEL = re.compile(r"\s*+([\w-]++)")
_H_ENDS = ("<|end|>", "<|call|>", "<|return|>")


def harmony_messages(text: str, finished: bool = True) -> list[dict[str, Any]]:
    """The Harmony messages of a completion, in order: ``{recipient, channel, body,
    closed}``. A header opens with ``<|start|>`` (or the prompt opened it: the text starts
    inside one), names a channel after ``<|channel|>`` and maybe a recipient (``to=``, in the
    role or the channel part), and its body runs from ``<|message|>`` to an end token. A call's
    body is JSON, read to its last bracket, so an end token quoted inside it stays text.
    Text outside any message has channel None; a header the text ends in has body None."""
    out: list[dict[str, Any]] = []
    first = _H_TOKEN.search(text)
    in_header = (
        first is not None
        and first.group() in ("<|channel|>", "<|constrain|>", "<|message|>")
        and not text[: first.start()].strip(" ").startswith(("<", "\n"))
    )
    pos = 0
    head = ""
    while pos < len(text):
        if in_header:
            m = text.find("<|message|>", pos)
            nxt = text.find("<|start|>", pos)
            if m < 0 or (0 <= nxt < m):
                stop = len(text) if nxt < 0 else nxt
                head += text[pos:stop]
                out.append(
                    {
                        "recipient": _recipient(head),
                        "channel": _h_channel(head),
                        "body": None,
                        "closed": False,
                    }
                )
                head, pos = "", stop + (len("<|start|>") if nxt >= 0 else 0)
                continue
            head += text[pos:m]
            pos = m + len("<|message|>")
            recipient, channel = _recipient(head), _h_channel(head)
            body_end, closed, after = _h_body(text, pos, recipient is not None, finished)
            out.append(
                {
                    "recipient": recipient,
                    "channel": channel,
                    "body": text[pos:body_end],
                    "closed": closed,
                }
            )
            pos, head, in_header = after, "", False
            continue
        start = text.find("<|start|>", pos)
        stop = len(text) if start < 0 else start
        chunk = text[pos:stop]
        for token in _H_ENDS:
            chunk = chunk.replace(token, "")
        if chunk.strip():
            out.append({"recipient": None, "channel": None, "body": chunk, "closed": True})
        if start < 0:
            break
        pos, in_header = start + len("<|start|>"), True
    return out


def _h_body(text: str, pos: int, call: bool, finished: bool) -> tuple[int, bool, int]:
    """Where a message body that starts at ``pos`` ends, whether its end was written (or
    the message ended on the stop token), and where the text goes on."""
    if call:
        got = json_value(text, skip_ws(text, pos))
        if got is not None:
            end = got[1]
            after = skip_ws(text, end)
            for token in _H_ENDS:
                if text.startswith(token, after):
                    return end, True, after + len(token)
            if _ends(text, end, finished):
                return end, True, len(text)
    enders = ("<|call|>", "<|end|>") if call else ("<|end|>", "<|return|>")
    hits = [(text.find(t, pos), t) for t in enders]
    hits = [(i, t) for i, t in hits if i >= 0]
    starts = text.find("<|start|>", pos)
    if hits:
        i, token = min(hits)
        if not (0 <= starts < i):
            return i, not call or json_value(text[pos:i].strip(), 0) is not None, i + len(token)
    if starts >= 0:
        return starts, False, starts
    closed = finished and (not call or json_value(text[pos:].strip(), 0) is not None)
    return len(text), closed, len(text)


def _recipient(head: str) -> str | None:
    m = _H_RECIPIENT.search(head)
    return m.group(1) if m else None


def _h_channel(head: str) -> str | None:
    cut = head.find("<|channel|>")
    if cut < 0:
        return None
    m = _H_CHANNEL.match(head, cut + len("<|channel|>"))
    return m.group(1) if m else None


# -- JSON between markers: Hermes, Kimi K2, DeepSeek V3 and V3.1, Mistral ------------------------

Call = tuple[str, Any, int, int, bool]  # name, args (None when not closed), start, end, closed


def _json_then(
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
    return value, end, _ends(text, end, finished)


def _mended(body: str) -> Any:
    """A call object whose closing tag came but one of its brackets did not, read leniently
    (the lenient reader closes what is open); None when it is not one."""
    from olav.runtime.rescue.lenient import LenientError, loads

    body = re.sub(r"^\s*```[\w]*\n|```\s*$", "", body).strip()
    if not body.startswith("{"):
        return None
    try:
        value = loads(body)
    except LenientError:
        return None
    return value if isinstance(value, dict) and json_calls(value) else None


_JSON_NAME = re.compile(r'"name"\s*+:\s*+"([^"\\]{1,64}+)"')


def hermes(text: str, body: int, start: int, finished: bool) -> Call | None:
    """``<tool_call>`` (ending at ``body``) and a JSON call object or list."""
    value, end, closed = _json_then(text, body, ("</tool_call>",), finished, fence=True)
    if value is None and not closed and text.endswith("</tool_call>", 0, end):
        value = _mended(text[body : end - len("</tool_call>")])  # the tag closed, a } was lost
        closed = value is not None
    if value is None and not closed:
        named = _JSON_NAME.search(text, body, min(end, body + 400))
        return (named.group(1) if named else "", None, start, end, False)
    calls = json_calls(value) if value is not None else None
    if not calls:
        return None
    return ("\x00hermes", calls, start, end, closed)


_KIMI_BEGIN = "<|tool_call_begin|>"
_KIMI_ARG = "<|tool_call_argument_begin|>"
_KIMI_END = "<|tool_call_end|>"
_KIMI_SECTION = "<|tool_calls_section_begin|>"
_KIMI_SECTION_END = "<|tool_calls_section_end|>"


def kimi_k2(text: str, finished: bool) -> Iterator[Call]:
    """Kimi K2: an optional section, calls of ``functions.NAME:IDX`` and JSON arguments.
    What stands between the section's start and its first call is not the answer."""
    pos = 0
    while True:
        sec = text.find(_KIMI_SECTION, pos)
        call = text.find(_KIMI_BEGIN, pos)
        if call < 0:
            if sec >= 0:  # a section opened with no call in it: cut, nothing to run
                end = text.find(_KIMI_SECTION_END, sec)
                yield ("", None, sec, len(text) if end < 0 else end + len(_KIMI_SECTION_END), False)
            return
        first = sec if 0 <= sec < call else call
        in_section = first == sec
        pos = call
        while text.startswith(_KIMI_BEGIN, pos):
            arg = text.find(_KIMI_ARG, pos)
            if arg < 0:
                yield ("", None, first, len(text), False)
                return
            name = text[pos + len(_KIMI_BEGIN) : arg].strip()
            value, end, closed = _json_then(text, arg + len(_KIMI_ARG), (_KIMI_END,), finished)
            if in_section and closed:
                after = skip_ws(text, end)
                if text.startswith(_KIMI_SECTION_END, after):
                    end = after + len(_KIMI_SECTION_END)
                elif not text.startswith(_KIMI_BEGIN, after) and not _ends(text, end, finished):
                    pass
            yield (name, value if closed else None, first, end, closed)
            if not closed:
                return
            first = end
            pos = skip_ws(text, end)
        pos = max(pos, first)


_DS = "[｜|]"
_DS_SEP = "[▁_ ]"


def _ds(word: str) -> str:
    return f"<{_DS}{_DS_SEP.join(word.split())}{_DS}>"


_DS_CALLS_BEGIN = re.compile(_ds("tool calls begin"))
_DS_CALLS_END = re.compile(r"\s*+" + _ds("tool calls end"))
_DS_CALL_BEGIN = re.compile(_ds("tool call begin"))
_DS_SEP_TOKEN = re.compile(_ds("tool sep"))
_DS_CALL_END = ("<｜tool▁call▁end｜>", "<|tool_call_end|>", "<｜tool call end｜>")


def deepseek_v3(text: str, finished: bool) -> Iterator[Call]:
    """DeepSeek V3 (``function<｜tool▁sep｜>NAME`` and a fenced JSON block) and V3.1
    (``NAME<｜tool▁sep｜>`` and JSON)."""
    pos = 0
    while (m := _DS_CALL_BEGIN.search(text, pos)) is not None:
        opened = _DS_CALLS_BEGIN.search(text, max(0, pos), m.start())
        start = (
            opened.start() if opened and not text[opened.end() : m.start()].strip() else (m.start())
        )
        sep = _DS_SEP_TOKEN.search(text, m.end())
        if sep is None:
            if m.group().startswith("<｜"):  # deepseek's own token: a call cut short
                yield ("", None, start, len(text), False)
            return
        head = text[m.end() : sep.start()].strip()
        body = sep.end()
        fence = False
        if head in ("function", "") or head.endswith("function"):
            nm = re.match(r"\s*+([\w.\-]++)", text[body:])
            if nm is None:
                yield ("", None, start, len(text), False)
                return
            name, body, fence = nm.group(1), body + nm.end(), True
        else:
            name = head
        value, end, closed = _json_then(text, body, _DS_CALL_END, finished, fence=fence)
        if closed:
            tail = _DS_CALLS_END.match(text, end)
            end = tail.end() if tail else end
        yield (
            name,
            value if closed else None,
            start,
            end if closed else (end if value is None and end < len(text) else len(text)),
            closed,
        )
        if not closed and end >= len(text):
            return
        pos = end


# DSML: V3.2 <｜DSML｜function_calls>, V4 <｜DSML｜tool_calls>, V4.1 <｜DSML｜ calls> (a space)
_DSML_TAG = r"<(/?)[｜|]DSML[｜|]\s*+"
_DSML_BLOCK = re.compile(_DSML_TAG + r"(function_calls|tool_calls|calls)>")
_DSML_INVOKE = re.compile(r"<[｜|]DSML[｜|]\s*+invoke\b([^<>]*+)>")
_DSML_INVOKE_END = re.compile(r"</(?:[｜|]DSML[｜|])?\s*+invoke>")
_DSML_PARAM = re.compile(r"<[｜|]DSML[｜|]\s*+parameter\b([^<>]*+)>")
_DSML_PARAM_END = re.compile(r"</(?:[｜|]DSML[｜|])?\s*+parameter>")
_ATTR = re.compile(r"(?<![\w:-])([\w:-]++)\s*+=\s*+(?:\"([^\"]*+)\"|'([^']*+)'|([^\s\"'>]++))")


def attrs(text: str) -> dict[str, str]:
    return {
        m.group(1): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(text)
    }


def dsml(text: str, finished: bool) -> Iterator[Call]:
    """DeepSeek's DSML: ``invoke`` a call, ``parameter`` an argument whose value runs to
    its closing tag (``string="true"``: the text as written; ``"false"``: JSON)."""
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
            tail = re.compile(r"\s*+" + _DSML_TAG + r"(?:function_calls|tool_calls|calls)>").match(
                text, p
            )
            p = tail.end() if tail else p
            yield (name, args, start, p, True)
            pos = p
            continue
        yield (name, None, start, len(text), False)
        return


# -- tags: GLM, Qwen3 XML (qwen3-coder) ----------------------------------------------------------

_NAME_RUN = re.compile(r"[^\s<>]++")
_GLM_KEY = re.compile(r"\s*+<arg_key>(.*?)</arg_key>\s*+<arg_value>", re.S)


def glm(text: str, body: int, start: int, finished: bool) -> Call:
    """GLM 4.5 to 5.3: ``<tool_call>NAME`` then ``<arg_key>K</arg_key><arg_value>V
    </arg_value>`` pairs, then ``</tool_call>``; a value runs to its ``</arg_value>``."""
    m = _NAME_RUN.match(text, skip_ws(text, body))
    if m is None:
        return ("", None, start, len(text), False)
    name, pos = m.group(), m.end()
    args: dict[str, Any] = {}
    while (key := _GLM_KEY.match(text, pos)) is not None:
        end = text.find("</arg_value>", key.end())
        if end < 0:  # no </arg_value>: the call's close ends the last value
            close = text.find("</tool_call>", key.end())
            if close < 0:
                return (name, None, start, len(text), False)
            args[key.group(1).strip()] = Written(text[key.end() : close])
            return (name, args, start, close + len("</tool_call>"), True)
        args[key.group(1).strip()] = Written(text[key.end() : end])
        pos = end + len("</arg_value>")
    after = skip_ws(text, pos)
    if text.startswith("</tool_call>", after):
        return (name, args, start, after + len("</tool_call>"), True)
    # GLM's template always writes </tool_call>: a call without it was cut, finish reason or not
    return (name, args, start, pos, False)


_XML_FN = re.compile(r"<function=([^<>\n]++)>")
_XML_PARAM = re.compile(r"\s*+<parameter=([^<>\n]++)>")
_XML_PARAM_END = re.compile(r"</parameter>(?=\s*+(?:<parameter=|</function>|\Z))")
_XML_NEXT_PARAM = re.compile(r"\n<parameter=[^<>\n]++>\n")


def _trim_line(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


def qwen3_xml(text: str, finished: bool, pos: int = 0) -> Iterator[Call]:
    """Qwen3's XML (qwen3-coder, Qwen3.5): ``<function=NAME>``, its parameters
    ``<parameter=K>\\nVALUE\\n</parameter>`` and ``</function>``, maybe inside
    ``<tool_call>``. A value ends at the ``</parameter>`` another parameter or the
    function's close follows, or where the next parameter opens on a line of its own (a
    ``</parameter>`` the model left out); one line break at each end is the template's."""
    while (fn := _XML_FN.search(text, pos)) is not None:
        opened = re.search(r"<tool_call>\s*+$", text[max(0, fn.start() - 40) : fn.start()])
        start = fn.start() - (len(opened.group()) if opened else 0)
        name = fn.group(1).strip()
        p = fn.end()
        after_name = skip_ws(text, p)
        if text.startswith(("{", "["), after_name):  # functionary: JSON in the tags
            value, end, closed = _json_then(text, after_name, ("</function>",), finished)
            end = after_token(text, end, "</tool_call>") if closed else end
            yield ("\x00functionary" + name, value if closed else None, start, end, closed)
            if not closed:
                return
            pos = end
            continue
        args: dict[str, Any] = {}
        closed = False
        while True:
            param = _XML_PARAM.match(text, p)
            if param is None:
                break
            stop = _XML_PARAM_END.search(text, param.end())
            nxt = _XML_NEXT_PARAM.search(text, param.end(), stop.start() if stop else len(text))
            if nxt is not None:  # no </parameter> before the next parameter: it ends the value
                args[param.group(1).strip()] = Written(_trim_line(text[param.end() : nxt.start()]))
                p = nxt.start()
                continue
            if stop is None:  # no </parameter>: the function's close ends the value
                fn_end = re.compile(r"\n?</function>").search(text, param.end())
                if fn_end is None:
                    p = len(text)
                    break
                value = text[param.end() : fn_end.start()]
                args[param.group(1).strip()] = Written(value[1:] if value[:1] == "\n" else value)
                p = fn_end.start()
                break
            value = text[param.end() : stop.start()]
            value = value[1:] if value.startswith("\n") else value
            value = value[:-1] if value.endswith("\n") else value
            args[param.group(1).strip()] = Written(value)
            p = stop.end()
        after = skip_ws(text, p)
        if text.startswith("</function>", after):
            p, closed = after + len("</function>"), True
        elif p < len(text) and _ends(text, p, finished) and args:
            closed = True
        if closed:
            p = after_token(text, p, "</tool_call>")
            yield (name, args, start, p, True)
            pos = p
            continue
        yield (name, None, start, len(text), False)
        return


# -- Mistral -------------------------------------------------------------------------------------

_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_NAMED = re.compile(
    r"\s*+([A-Za-z_][\w.\-]*+)\s*+(?:\[CALL_ID\]\s*+[\w-]*+\s*+)?(\[ARGS\])?\s*+(?=[\[{])"
)


def mistral(text: str, finished: bool) -> Iterator[Call]:
    """Mistral: ``[TOOL_CALLS]`` and a JSON list of calls (v3), or ``NAME[ARGS]{…}``
    (v11 and later; ``[CALL_ID]`` as llama.cpp's tests write it), repeated."""
    pos = 0
    while (start := text.find(_MISTRAL, pos)) >= 0:
        p = start + len(_MISTRAL)
        q = skip_ws(text, p)
        if text.startswith(("[", "{"), q):
            value, end, closed = _json_then(text, q, (), finished)
            calls = json_calls(value) if closed else None
            if calls:
                yield ("\x00mistral", calls, start, end, True)
                pos = end
                continue
            yield ("", None, start, len(text) if value is None else end, False)
            return
        named = _MISTRAL_NAMED.match(text, p)
        if named is None:  # [TOOL_CALLS] and nothing after it (the answer stopped there)
            yield ("", None, start, len(text) if not text[p:].strip() else p, False)
            pos = p
            continue
        value, end, closed = _json_then(text, named.end(), (), finished)
        closed = closed or (value is not None and text.startswith(_MISTRAL, skip_ws(text, end)))
        yield (
            named.group(1),
            value if closed else None,
            start,
            end if closed else len(text),
            closed,
        )
        if not closed:
            return
        pos = end
