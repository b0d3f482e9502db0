"""Tool calls written as text, in every format family local models are reported to emit.

:func:`find_calls` returns each call it finds with its family, where it sits in the text,
and whether the format is *strong* (tags or special tokens that only a tool call uses) or
*weak* (JSON or a Python call list, which an answer may also show as content). Names and
arguments are raw here; :mod:`olav.runtime.rescue.salvage` decides what may run.

One cohesive catalogue (over 500 lines on purpose): one entry per family, each beside its
markers, so that a family is added or read in one place.

| family | what the model wrote |
|---|---|
| ``hermes`` | ``<tool_call>{"name": …, "arguments": …}</tool_call>`` (closing tag optional) |
| ``qwen3_xml`` | ``<function=NAME><parameter=KEY>VALUE</parameter></function>`` (qwen3-coder) |
| ``glm`` | ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`` |
| ``functionary`` | ``<function=NAME>{json}</function>`` (llama 3.1, functionary v3.1); |
| | ``>>>NAME\n{json}`` after a ``>>>all\n`` text turn or another call (functionary v3.2) |
| ``minimax`` | ``<invoke name="NAME"><parameter name="K">V</parameter></invoke>`` |
| ``mistral`` | ``[TOOL_CALLS][{…}]``, ``[TOOL_CALLS]NAME[ARGS]{…}`` or ``[TOOL_CALLS]NAME{…}`` |
| ``deepseek`` | ``<｜tool▁call▁begin｜>…NAME<｜tool▁sep｜>…{json}<｜tool▁call▁end｜>``; |
| | V3.2's ``<｜DSML｜invoke name="NAME"><｜DSML｜parameter name="K" string="true">V…`` |
| ``kimi`` | ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}`` |
| ``gpt_oss`` | ``to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`` (harmony) |
| ``granite`` | ``<|tool_call|>[{…}]``; granite-20b-functioncalling's ``<function_call> {…}`` |
| ``phi4`` | ``functools[{…}]`` |
| ``llama_python_tag`` | ``<|python_tag|>{"name": …, "parameters": …}`` |
| ``internlm`` | ``<|action_start|><|plugin|>{…}<|action_end|>`` |
| ``json_fenced`` | a ```` ```json ```` block holding a call object or a list of them |
| ``json`` | a call object (or list) on lines of its own; also OpenAI's ``tool_calls`` shape |
| ``pythonic`` | ``[name(a=1, b="x"), other()]`` on lines of its own (llama 3.2/4) |
| ``llama4_pythonic`` | ``<|python_start|>[name(a=1)]<|python_end|>`` |

Strong formats count wherever they appear outside code the answer shows: a fenced block in
another language and inline code are masked first, so a ``<tool_call>`` quoted in an
explanation runs nothing.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from olav.runtime.rescue import grammars as g
from olav.runtime.rescue.lenient import LenientError, closes_at, loads, scan_value

STRONG = frozenset(
    {
        "gemma4",
        "hermes",
        "qwen3_xml",
        "glm",
        "functionary",
        "minimax",
        "mistral",
        "deepseek",
        "kimi",
        "gpt_oss",
        "granite",
        "phi4",
        "llama_python_tag",
        "internlm",
        "llama4_pythonic",
    }
)
WEAK = frozenset({"json_fenced", "json", "pythonic"})

# a cheap test before any regex: every format has one of these
TRIGGERS = (
    "<|tool_call>",  # gemma 4
    "<|open|>call",  # kimi k3
    "<tool_call",
    "<function",
    "<invoke",
    "DSML",  # deepseek v3.2's <｜DSML｜invoke …>
    "[TOOL_CALLS]",
    "tool",  # deepseek's and kimi's tokens, to=functions, tool_calls
    "<|",
    "functools[",
    "{",
    "(",
)


@dataclass(frozen=True)
class Found:
    """One call as written: raw ``name`` and ``args`` (a dict, or text to read as JSON)."""

    name: str
    args: Any
    family: str
    start: int
    end: int
    closed: bool = True  # the call's grammar was completed (olav.runtime.rescue.grammars)

    @property
    def strong(self) -> bool:
        return self.family in STRONG


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


# -- call-shaped JSON ------------------------------------------------------------------------

json_calls = g.json_calls


_DECODER = json.JSONDecoder()


def _json_at(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value opening at ``start`` and the offset after it: strict JSON at C speed,
    else read leniently (quotes, trailing commas, Python words), but only up to where its
    brackets close: a value the model never closed is never completed."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = closes_at(text, start)
    if end is None:
        return None
    try:
        return loads(text[start:end]), end
    except LenientError:
        return None


# -- the strong formats ----------------------------------------------------------------------

# Model output of any length passes through these on every call: each pattern reads a run of
# characters once (possessive quantifiers), never once for every place it might stop.
_INVOKE = re.compile(
    r"<invoke\s++name=[\"']?+([^\"'<>]++)[\"']?+[^<>]*+>(.*?)(?:</invoke>|\Z)", re.S
)
# other attributes may follow the name (DeepSeek V3.2's string="true|false" without DSML)
_INVOKE_PARAM = re.compile(
    r"<parameter\s++name=[\"']?+([^\"'<>]++)[\"']?+([^<>]*+)>(.*?)(?:</parameter>|\Z)", re.S
)
# gpt-oss (Harmony): a recipient in the role or the channel part of the header, then the body
_HARMONY = re.compile(
    r"to=(?:functions\.)?([\w.\-]++)(?:(?!to=)[^<])*+(?:<\|channel\|>[^<]*+)?"
    r"(?:<\|constrain\|>\s*+\w++\s*+)?<\|message\|>"
)
_TOKEN_JSON = {
    "granite": re.compile(r"<\|tool_call\|>|<function_call>"),  # the second: granite-20b-fc
    "phi4": re.compile(r"functools(?=\[)"),
    "llama_python_tag": re.compile(r"<\|python_tag\|>"),
    "internlm": re.compile(r"<\|action_start\|>\s*<\|plugin\|>"),
}


def _found(calls: Iterator[g.Call], family: str) -> Iterator[Found]:
    """The readers' calls as finds; a reader's list of calls (one JSON block) shares a span."""
    for name, args, start, end, closed in calls:
        if name.startswith("\x00functionary"):
            yield Found(name[len("\x00functionary") :], args, "functionary", start, end, closed)
        elif name.startswith("\x00"):
            for n, a in args:
                yield Found(n, a, family, start, end, closed)
        else:
            yield Found(name, args, family, start, end, closed)


_TOOL_CALL = re.compile(r"<tool_call>")


def _tool_call_tags(text: str, finished: bool) -> Iterator[Found]:
    """``<tool_call>``: Hermes's JSON, GLM's name and key/value tags (Qwen3's XML inside the
    tags is :func:`_qwen3_xml`'s)."""
    pos = 0
    while (m := _TOOL_CALL.search(text, pos)) is not None:
        body = g.skip_ws(text, m.end())
        if text.startswith("<function=", body):  # Qwen3's XML: skip what it spans
            xml = next(g.qwen3_xml(text, finished, m.start()), None)
            pos = xml[3] if xml is not None and xml[3] > m.end() else m.end()
            continue
        if text.startswith(("{", "[", "```"), body):
            call = g.hermes(text, m.end(), m.start(), finished)
            if call is None:
                pos = m.end()
                continue
            yield from _found(iter([call]), "hermes")
        else:
            call = g.glm(text, m.end(), m.start(), finished)
            yield from _found(iter([call]), "glm")
        pos = max(call[3], m.end())


def _qwen3_xml(text: str, finished: bool) -> Iterator[Found]:
    yield from _found(g.qwen3_xml(text, finished), "qwen3_xml")


def _mistral(text: str, finished: bool) -> Iterator[Found]:
    yield from _found(g.mistral(text, finished), "mistral")


def _deepseek(text: str, finished: bool) -> Iterator[Found]:
    found = list(_found(g.deepseek_v3(text, finished), "deepseek"))
    sep = text.find("<｜tool▁sep｜>")
    if not found and sep >= 0:  # its separator without the call's opening token: broken
        found = [Found("", None, "deepseek", max(0, text.rfind("<｜", 0, sep)), len(text), False)]
    yield from found


def _dsml(text: str, finished: bool) -> Iterator[Found]:
    yield from _found(g.dsml(text, finished), "deepseek")


def _kimi(text: str, finished: bool) -> Iterator[Found]:
    yield from _found(g.kimi_k2(text, finished), "kimi")
    yield from _found(g.kimi_k3(text, finished), "kimi")


def _harmony(text: str, finished: bool) -> Iterator[Found]:
    for m in _HARMONY.finditer(text):
        start = text.rfind("<|", 0, m.start())
        head = text[start : m.start()] if start >= 0 else ""
        start = (
            start
            if start >= 0 and re.fullmatch(r"(<\|start\|>assistant)?(<\|channel\|>\w*)?\s*", head)
            else m.start()
        )
        value, end, closed = g._json_then(
            text, m.end(), ("<|call|>", "<|end|>", "<|return|>"), finished
        )
        yield Found(m.group(1), value if closed else None, "gpt_oss", start, end, closed)


def _gemma4(text: str, finished: bool) -> Iterator[Found]:
    yield from _found(g.gemma4(text, finished), "gemma4")


def _scalar(text: str) -> Any:
    """A parameter value written between tags: JSON when it reads as JSON, else the text."""
    value = text.strip("\n")
    stripped = value.strip()
    if stripped[:1] in "[{" or stripped in ("true", "false", "null") or _NUMBER.fullmatch(stripped):
        try:
            return loads(stripped)
        except LenientError:
            pass
    return value


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _minimax(text: str) -> Iterator[Found]:
    for m in _INVOKE.finditer(text):
        args = {k.strip(): _param(v, _attrs(a)) for k, a, v in _INVOKE_PARAM.findall(m.group(2))}
        wrapper = re.search(
            r"<(minimax:tool_call|function_calls|tool_calls)>\s*$", text[: m.start()]
        )
        start = wrapper.start() if wrapper else m.start()
        end = m.end()
        close = re.match(r"\s*</(minimax:tool_call|function_calls|tool_calls)>", text[end:])
        yield Found(m.group(1).strip(), args, "minimax", start, end + (close.end() if close else 0))


_attrs = g.attrs


def _param(value: str, attrs: dict[str, str]) -> Any:
    """A parameter's value: the text as written (less line breaks at its ends) when
    ``string="true"``, JSON when ``"false"``, else read as :func:`_scalar` does."""
    kind = attrs.get("string", "").lower()
    if kind == "true":
        return value.strip("\n")
    if kind == "false":
        try:
            return loads(value.strip())
        except LenientError:
            return value.strip()
    return _scalar(value)


# functionary v3.2 (v3.llama3 template): each turn is ">>>RECIPIENT\n…", "all" for text to
# the person, a function's name for a call with its JSON arguments; recipients follow each
# other with no separator. "python" (raw code) and the recipient the prompt already opened
# (a message that starts "NAME\n{") are not read: neither is marked as a call.
_RECIPIENT = re.compile(r">>>([A-Za-z_][\w.\-]*)[ \t]*\n[ \t]*(?=\{)")
_RECIPIENT_END = re.compile(r"\s*(?:>>>|<\|eot_id\|>|<\|eom_id\|>|\Z)")


def _functionary_v32(text: str) -> Iterator[Found]:
    if ">>>" not in text:
        return
    for m in _RECIPIENT.finditer(text):
        if m.group(1) in ("all", "python") or text[m.start() - 1 : m.start()] == ">":
            continue
        got = _json_at(text, m.end())
        if got is None or not isinstance(got[0], dict):
            continue
        value, end = got
        after = _RECIPIENT_END.match(text, end)
        if after is None:  # prose goes on after the object: not a call turn
            continue
        stop = re.match(r"\s*<\|(?:eot_id|eom_id)\|>", text[end:])
        yield Found(m.group(1), value, "functionary", m.start(), end + (stop.end() if stop else 0))


_PY_START = re.compile(r"<\|python_start\|>\s*+((?:.*?\S)??)\s*+(?:<\|python_end\|>|\Z)", re.S)


def _llama4(text: str) -> Iterator[Found]:
    """Llama 4's ``<|python_start|>[f(a=1)]<|python_end|>``."""
    for m in _PY_START.finditer(text):
        for name, args in _python_calls(m.group(1)) or []:
            yield Found(name, args, "llama4_pythonic", m.start(), m.end())


def _token_json(text: str) -> Iterator[Found]:
    for family, pattern in _TOKEN_JSON.items():
        for m in pattern.finditer(text):
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
            end = pos
            values: list[Any] = []
            while pos < len(text) and text[pos] in "[{":  # llama: several, ; or newline apart
                got = _json_at(text, pos)
                if got is None:
                    break
                values.append(got[0])
                end = got[1]
                sep = re.match(r"\s*;?\s*", text[end:])
                pos = end + (sep.end() if sep else 0)
            tail = re.match(
                r"\s*(?:<\|(?:action_end|eom_id|eot_id|endoftext)\|>|</function_call>)", text[end:]
            )
            end += tail.end() if tail else 0
            for value in values:
                for name, args in json_calls(value) or []:
                    yield Found(name, args, family, m.start(), end)


# -- the weak formats ------------------------------------------------------------------------


def _fenced_json(text: str, masked: Masked) -> Iterator[Found]:
    for start, end, body_start, body_end in masked.fences:
        got = _json_at(
            text,
            body_start + (len(text[body_start:body_end]) - len(text[body_start:body_end].lstrip())),
        )
        if got is None or text[got[1] : body_end].strip():
            continue
        for name, args in json_calls(got[0]) or []:
            yield Found(name, args, "json_fenced", start, end)


_LINE_JSON = re.compile(r"^[ \t]*(?=[\[{])", re.M)


def _bare_json(text: str, masked: Masked) -> Iterator[Found]:
    pos = 0
    while True:
        m = _LINE_JSON.search(text, pos)
        if m is None:
            return
        start = m.end()
        if masked.hides(start) or masked.in_fence(start):
            pos = start + 1
            continue
        got = _json_at(text, start)
        if got is None:
            pos = start + 1
            continue
        value, end = got
        calls = json_calls(value)
        line_end = text.find("\n", end)
        rest_of_line = text[end : line_end if line_end >= 0 else len(text)]
        if calls and not rest_of_line.strip():
            for name, args in calls:
                yield Found(name, args, "json", m.start(), end)
        pos = max(end, start + 1)


_LINE_LIST = re.compile(r"^[ \t]*\[(?=[ \t]*[A-Za-z_][\w.]*\()", re.M)
_LINE_CALL = re.compile(r"^[ \t]*(?=[A-Za-z_][\w.]*\(.*\)[ \t]*$)", re.M)


def _pythonic(text: str, masked: Masked, whole: bool) -> Iterator[Found]:
    """``[f(a=1), g()]`` on lines of its own; a lone ``f(a=1)`` only as the whole message."""
    for m in _LINE_LIST.finditer(text):
        start = m.start()
        if masked.hides(m.end()) or masked.in_fence(m.end()):
            continue
        end = scan_value(text, m.end() - 1)
        line_end = text.find("\n", end)
        if text[end : line_end if line_end >= 0 else len(text)].strip():
            continue
        calls = _python_calls(text[m.end() - 1 : end])
        for name, args in calls or []:
            yield Found(name, args, "pythonic", start, end)
    if whole:
        stripped = text.strip()
        if _LINE_CALL.match(stripped) and "\n" not in stripped:
            for name, args in _python_calls(stripped) or []:
                yield Found(name, args, "pythonic", text.find(stripped), len(text))


def _python_calls(source: str) -> list[tuple[str, Any]] | None:
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
        if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
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


# -- all of them -----------------------------------------------------------------------------


def find_calls(text: str, *, weak: bool = True, finished: bool = True) -> list[Found]:
    """Every call written in ``text``, in order, outside code the answer shows. Where two
    families claim the same text (a JSON call inside ``<tool_call>`` tags), the first
    found, strong before weak, keeps it. ``finished``: the message ended on a stop token,
    not on the token limit (a call the text ends in may then be complete)."""
    if not text or not any(t in text for t in TRIGGERS):
        return []
    masked = mask(text)
    found: list[Found] = []
    strong = (
        _gemma4,
        _tool_call_tags,
        _qwen3_xml,
        _mistral,
        _kimi,  # before deepseek: <|tool_call_begin|> is also deepseek's token in ASCII
        _deepseek,
        _dsml,
        _harmony,
    )
    for finder in strong:
        for f in finder(text, finished):
            if not masked.hides(f.start) and not _overlaps(f, found):
                found.append(f)
    for plain in (_minimax, _functionary_v32, _token_json, _llama4):
        for f in plain(text):
            if not masked.hides(f.start) and not _overlaps(f, found):
                found.append(f)
    if weak:
        whole = not found
        for f in [
            *_fenced_json(text, masked),
            *_bare_json(text, masked),
            *_pythonic(text, masked, whole),
        ]:
            if not _overlaps(f, found):
                found.append(f)
    return sorted(found, key=lambda f: f.start)


def _overlaps(f: Found, found: list[Found]) -> bool:
    """``f`` claims text another find has (several calls in one block share its span)."""
    for other in found:
        same_block = (other.start, other.end) == (f.start, f.end) and other.family == f.family
        if other.start < f.end and f.start < other.end and not same_block:
            return True
    return False
