"""Tool calls read by the offered tools themselves, beneath the family grammars.

The family grammars (:mod:`olav.runtime.rescue.families`) read the shapes a model family is
known to write. A new model writes one nobody listed. What every call has, whatever the
shape, is the name of a tool on offer and arguments that its JSON schema accepts; this
reader starts from those:

- **an object that names an offered tool** anywhere in the text: ``{"name": T, "arguments"
  | "parameters" | "args" | "input": {...}}``, OpenAI's ``{"function": {"name", "arguments"}}``
  (arguments as an object or as JSON text), alone or in a list;
- **an offered tool's name followed by its arguments**, in any of the common notations: a
  Python call with keyword or positional arguments (``T(city="Paris")``, ``T("Paris")``,
  a list of them, several joined by ``;``), a Python call around a JSON object
  (``T({"city": "Paris"})``), a JSON object after the name (``T {...}``, ``T: {...}``), XML
  parameters (``<parameter=city>Paris</parameter>``, ``<parameter name="city">``,
  ``<city>Paris</city>``), or ``key: value`` lines of the schema's own fields.

Nothing here decides what runs: :func:`olav.runtime.rescue.salvage.salvage` checks every
find against the tool's schema and the rules for content an answer shows, as it does the
grammars' finds. A call whose brackets never close is a find with ``closed=False``: it is
never run. Positional arguments are given the schema's fields in their declared order, and
only when there are no more of them than fields.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Iterator, Mapping
from typing import Any

from olav.runtime.rescue.families import Found, Masked, mask
from olav.runtime.rescue.lenient import LenientError, closes_at, loads

FAMILY = "schema"
NAME_KEYS = (
    "name", "function", "tool", "tool_name", "function_name", "recipient_name", "action",
)  # fmt: skip
ARG_KEYS = (
    "arguments", "parameters", "args", "input", "params", "tool_input", "kwargs",
    "action_input",
)  # fmt: skip
_PY_NAMES = {"true": True, "false": False, "null": None, "none": None}
_PREFIX = r"(?:(?:functions|tools|default_api|api)[.:]|call:\s*)?"
# a closing tag or token right after a call: </function>, <|python_end|>, <｜tool▁call▁end｜>
_CLOSERS = re.compile(
    r"[ \t\r\n]*(?:</(?:｜DSML｜ ?)?[\w:=|-]{1,32}>|<\|[\w]{1,24}\|>|<｜[^｜\n]{1,32}｜>|```(?!\w))"
)


def read_calls(
    text: str, tools: Mapping[str, Any], *, masked: Masked | None = None, objects: bool = True
) -> list[Found]:
    """Every call of an offered tool written in ``text``, in order, outside code the answer
    shows (``tools``: name to argument schema). ``objects=False`` reads only a name followed
    by arguments (in Harmony's channels, JSON that names a tool is the answer's content)."""
    low = text.lower() if text else ""
    if not text or not tools or not any(_bare(t) in low for t in tools):
        return []  # no offered tool is named: nothing here is a call
    masked = masked or mask(text)
    found: list[Found] = []
    for f in (*(_objects(text, tools) if objects else ()), *_named(text, tools)):
        shown = masked.hides(f.start) and not _broken_tag(text, f.start)
        taken = any(o.start < f.end and f.start < o.end for o in found)
        if shown or taken or _at_a_prompt(text, f.start):
            continue
        found.append(f)
    return _joined(text, sorted(found, key=lambda f: f.start), masked)


def _bare(tool: str) -> str:
    """The part of a tool's name any spelling of it keeps (case and ``-`` aside)."""
    return re.split(r"[_\-.]", tool)[-1].lower() if tool else tool


def _at_a_prompt(text: str, start: int) -> bool:
    """A call typed at a prompt (``>>> f(x)``, ``$ f x``, ``In [3]: f(x)``) shows a session
    the answer quotes, with its output after it: not a call to run now."""
    line = text[text.rfind("\n", 0, start) + 1 : start]
    return re.fullmatch(r"\s*(?:>>>|\.\.\.|\$|In \[\d+\]:)\s+", line) is not None


def _broken_tag(text: str, start: int) -> bool:
    """A backtick where ``<`` was meant (`` `tool_call>{...}`/tool_call> ``): not code shown."""
    return re.search(r"`[\w|]{2,24}>\s*\Z", text[max(0, start - 32) : start]) is not None


_WRITTEN_PREFIX = re.compile(r"^(?:functions?|tools?|default_api|api)[.:]", re.I)


def offered_name(name: str, tools: Mapping[str, Any]) -> str | None:
    """The offered tool a written name means, or None: a ``functions.``/``tools.`` prefix,
    an index suffix (``name:0``), case, ``-`` for ``_`` and gpt-oss's ``json`` glued on."""
    raw = name.strip().strip("\"'`")
    if raw in tools:
        return raw
    bare = _WRITTEN_PREFIX.sub("", raw)
    bare = re.sub(r":\d+$", "", bare).strip()
    if bare in tools:
        return bare
    key = bare.lower().replace("-", "_").replace(" ", "_")
    for tool in tools:
        if tool.lower() == key:
            return tool
    if key.endswith("json") and key[:-4] in tools:  # harmony's "<name>json" (llama.cpp #15158)
        return key[:-4]
    return None


# -- objects that name a tool -----------------------------------------------------------------


def _objects(text: str, tools: Mapping[str, Any]) -> Iterator[Found]:
    i = text.find("{")
    while i >= 0:
        end = closes_at(text, i)
        value, closed = None, end is not None
        if end is None:
            end, value = _closed_by_tag(text, i)
            closed = value is not None
        elif any(f'"{k}"' in text[i:end] for k in NAME_KEYS):
            value = _json(text[i:end])
        call = _call_of(value, tools) if isinstance(value, dict) else None
        if call is not None:
            yield Found(call[0], call[1], FAMILY, i, end, closed=closed, strong=False)
            i = text.find("{", end)
            continue
        named = None if closed else _names_a_tool(text[i:], tools)
        if named is not None:  # cut off inside a call
            yield Found(named, {}, FAMILY, i, len(text), False, strong=False)
            return
        i = text.find("{", i + 1)


def _closed_by_tag(text: str, start: int) -> tuple[int, Any]:
    """An object that lost its last brace but is followed by a closing tag (a Hermes call
    missing its ``}`` before ``</tool_call>``): the object as far as the tag, read leniently."""
    tag = text.find("</", start)
    if tag < 0:
        return len(text), None
    value = _json(text[start:tag])
    return (tag, value) if isinstance(value, dict) else (len(text), None)


def _json(text: str) -> Any:
    try:
        return loads(text)
    except LenientError:
        return None


def _call_of(obj: dict[str, Any], tools: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(tool, arguments) when ``obj`` is a call of an offered tool."""
    inner = obj.get("function")
    if isinstance(inner, dict):  # OpenAI's {"type": "function", "function": {...}}
        return _call_of(inner, tools)
    name = next((obj[k] for k in NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None or offered_name(name, tools) is None:
        return None
    args = next((obj[k] for k in ARG_KEYS if k in obj), None)
    if isinstance(args, str):
        args = _json(args) if args.strip() else {}
    if args is None:  # the arguments beside the name: {"name": T, "city": "Paris"}
        args = {k: v for k, v in obj.items() if k not in NAME_KEYS and k not in ("type", "id")}
    return (name, args) if isinstance(args, dict) else None


def _names_a_tool(text: str, tools: Mapping[str, Any]) -> str | None:
    for m in re.finditer(r'"(?:' + "|".join(NAME_KEYS) + r')"\s*:\s*"([^"]{1,80})"', text):
        if offered_name(m.group(1), tools):
            return m.group(1)
    return None


# -- a tool's name followed by its arguments --------------------------------------------------


def _named(text: str, tools: Mapping[str, Any]) -> Iterator[Found]:
    names = sorted(tools, key=len, reverse=True)
    pattern = re.compile(
        r"(?:(?<![\w.\-\"'])|(?<=name=\"))"
        + _PREFIX
        + "("
        + "|".join(map(re.escape, names))
        + r")(?![\w\-])"
    )
    pos = 0
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return
        name, begin, after = m.group(1), m.start(), m.end()
        if text[begin - 1 : begin] == "<" and text[after : after + 1] == ">":  # <read>...</read>
            begin, after = begin - 1, after + 1
        after += 5 if text.startswith(".call", after) else 0  # llama's built-in tools
        got = _arguments(text, after, tools[name] or {})
        if got is None:
            pos = m.end()
            continue
        args, end, closed = got
        yield Found(name, args, FAMILY, begin, end, closed=closed, strong=False)
        pos = end


# what may sit between a tool's name and its arguments: quotes, ``:``, ``=``, ``>``, an index
# (``name:0``), special tokens (``<|x|>``, ``<｜x｜>``, ``[ARGS]``; a word between two, as
# Harmony's channel), a fence opening, "json"
_SEP = re.compile(
    r"(?:```[\w]*+\n|[\"'`]|[ \t\r\n]+|:\d+|[:=>]|<\|[^|>\n]{1,32}\|>(?:\w{1,24}(?=<\|))?"
    r"|<｜[^｜\n]{1,32}｜>|\[[A-Z_]{2,24}\]"
    r"|json(?=<\||\n|\s*\{)|tool_call(?=\()"
    r"|(?i:action[ _]input|arguments|parameters|args)[ \t]*+:)*+"
)


def _arguments(text: str, at: int, schema: Mapping[str, Any]) -> tuple[Any, int, bool] | None:
    """The arguments written just after a tool's name at ``at``: (args, end, closed)."""
    props = list((schema.get("properties") or {}).keys())
    m = _SEP.match(text, at)
    i = m.end() if m else at
    ch = text[i : i + 1]
    if ch == "(":
        return _python_call(text, i, props)
    if ch == "{":
        end = closes_at(text, i)
        if end is None:
            return {}, len(text), False
        args = _json(text[i:end].replace('<|"|>', '"'))  # gemma 4 quotes strings so
        return (args, _closer(text, end), True) if isinstance(args, dict) else None
    if ch == "<":
        return _xml(text, i, props)
    if text.startswith("BEGIN_ARG:", i):  # Continue's TOOL_NAME/BEGIN_ARG/END_ARG blocks
        return _begin_args(text, i, props)
    label = r"(?i:input|arguments|parameters|args)[ \t]*+:[ \t]*+[\"'`]?\Z"
    labelled = re.search(label, text[at:i])
    if labelled and len(props) == 1:  # ReAct's "Action Input: <the one value>"
        end = text.find("\n", i)
        value = text[i : end if end >= 0 else len(text)].strip().strip("\"'")
        return ({props[0]: value}, end if end >= 0 else len(text), True) if value else None
    if "\n" in text[at:i]:
        return _key_lines(text, i, props)
    return None


_BEGIN_ARG = re.compile(r"BEGIN_ARG:[ \t]*+([\w.\-]++)[ \t]*+\n")


def _begin_args(text: str, start: int, props: list[str]) -> tuple[Any, int, bool] | None:
    """``BEGIN_ARG: key`` then the value's lines then ``END_ARG``, one block per field."""
    args: dict[str, Any] = {}
    i = start
    while (m := _BEGIN_ARG.match(text, i)) is not None:
        end = text.find("\nEND_ARG", m.end())
        if m.group(1) not in props:
            return None
        if end < 0:
            return {}, len(text), False  # cut off inside a value: never run
        value = text[m.end() : end]
        parsed = _json(value) if value.strip()[:1] in "[{" else None
        args[m.group(1)] = parsed if parsed is not None else value
        i = end + len("\nEND_ARG")
        while text[i : i + 1] in ("\n", " ", "\t"):
            i += 1
    return (args, _closer(text, i), True) if args else None


def _python_call(text: str, start: int, props: list[str]) -> tuple[Any, int, bool] | None:
    end = closes_at(text, start, "([{", ")]}")  # strings skipped
    if end is None:
        return {}, len(text), False
    inner = text[start + 1 : end - 1].strip()
    if inner.startswith("{"):
        obj = _json(inner)
        return (obj, _closer(text, end), True) if isinstance(obj, dict) else None
    try:
        node = ast.parse("f(" + inner + ")", mode="eval").body
    except (SyntaxError, ValueError):
        return None
    assert isinstance(node, ast.Call)
    if len(node.args) > len(props) or any(kw.arg is None for kw in node.keywords):
        return None
    args: dict[str, Any] = {}
    try:
        for key, value in zip(props, node.args, strict=False):
            args[key] = _literal(value)
        for kw in node.keywords:
            args[str(kw.arg)] = _literal(kw.value)
    except ValueError:
        return None
    return args, _closer(text, end), True


def _literal(node: ast.expr) -> Any:
    """A Python literal, and the JSON words a model writes in one (true, null)."""
    if isinstance(node, ast.Name) and node.id.lower() in _PY_NAMES:
        return _PY_NAMES[node.id.lower()]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return {_literal(k) if k else None: _literal(v) for k, v in pairs}
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        raise ValueError("not a literal") from None


_DSML = r"(?:｜DSML｜ ?)?"
_XML_PARAM = re.compile(
    r"\s*+<" + _DSML + r"(?:parameter=([\w.\-]++)|parameter\s++name=[\"']([^\"']++)[\"'][^>]*+"
    r"|arg_key>\s*+([\w.\-]++)\s*+</arg_key>\s*+<arg_value|([\w.\-]++))\s*+>"
    r"(.*?)</" + _DSML + r"(?:parameter|arg_value|\4)\s*>",
    re.S,
)


def _xml(text: str, start: int, props: list[str]) -> tuple[Any, int, bool] | None:
    """``<parameter=K>V</parameter>``, ``<parameter name="K">V</parameter>`` or ``<K>V</K>``,
    one after another, each K a field of the schema."""
    args: dict[str, Any] = {}
    i = start
    while True:
        m = _XML_PARAM.match(text, i)
        if m is None:
            break
        key = m.group(1) or m.group(2) or m.group(3) or m.group(4)
        if key not in props:
            break
        value = m.group(5)
        if m.group(1):  # qwen3-coder's <parameter=K>: the value on lines of its own
            value = value.removeprefix("\n").removesuffix("\n")
        if "&" in value:  # an XML value's entities (&gt; for >), as an XML reader reads them
            value = html.unescape(value)
        parsed = _json(value) if value.strip()[:1] in "[{" else None
        args[key] = parsed if parsed is not None else value
        i = m.end()
    if re.match(r"\s*<" + _DSML + r"(?:parameter|arg_key|arg_value)\b", text[i:]):
        return {}, len(text), False  # cut off inside a parameter: never run
    if not args and not re.match(r"\s*</", text[i:]):  # <invoke name="T"></invoke>: no args
        return None
    return args, _closer(text, i), True


_KEY_LINE = re.compile(  # a key starts no later than its run of key characters does
    r"(?:(?<![\w.\-*])[-*][ \t]*+|(?<![\w.\-]))([\w.\-]++)[ \t]*+[:=][ \t]*+([^\n]++)\n?"
)


def _key_lines(text: str, start: int, props: list[str]) -> tuple[Any, int, bool] | None:
    """``key: value`` (or ``key = value``) lines naming the schema's fields."""
    args: dict[str, Any] = {}
    i = start
    while True:
        while text[i : i + 1] in (" ", "\t"):  # the indent, outside the pattern (linear)
            i += 1
        m = _KEY_LINE.match(text, i)
        if m is None or m.group(1) not in props:
            break
        raw = m.group(2).strip().strip(",")
        parsed = _json(raw) if raw[:1] in '[{"' or raw in ("true", "false", "null") else None
        # a bare value is text; the salvage's schema check gives it its type
        args[m.group(1)] = parsed if parsed is not None else raw.strip("'`")
        i = m.end()
    if not args:
        return None
    return args, i, True


_TOKEN = r"<\|?[\w]{1,32}\|?>|<｜[^｜\n]{1,32}｜>|\[[A-Z_]{2,24}\]|</?｜DSML｜ ?[\w]{1,32}>"
_OPENER = re.compile(
    r"(?:(?:" + _TOKEN + r"|`[\w|]{2,24}>|<function=|<" + _DSML + r"invoke name=\")[ \t\n]*"
    r"|(?<![\w])(?:function|call:|to=))\Z"
)
_CLOSER = re.compile(r"[ \t\n]*(?:</[\w:=|｜-]{1,32}>|" + _TOKEN + r"|`?/[\w|]{1,24}>`?)")


def _wrapped(text: str, start: int, end: int) -> tuple[int, int]:
    """The span widened over the tags or tokens wrapped around it (``<tool_call>``…
    ``</tool_call>``, a backtick for ``<``): what is cut out of the answer with the call."""
    while (m := _OPENER.search(text[max(0, start - 40) : start])) is not None:
        start -= len(m.group(0))
    while (m := _CLOSER.match(text, end)) is not None:
        end = m.end()
    return start, end


def _closer(text: str, end: int) -> int:
    """Past a closing tag or token right after a call (``</function>``, ``<|python_end|>``)."""
    while (m := _CLOSERS.match(text, end)) is not None and m.end() > end:
        end = m.end()
    return end


# -- the text around the calls ----------------------------------------------------------------


def _joined(text: str, found: list[Found], masked: Masked) -> list[Found]:
    """Calls written together (``[a(), b()]``, ``a(); b()``, a fence around them) share the
    span of the whole, so that cutting them out of the answer leaves no brackets behind."""
    if not found:
        return found
    groups: list[list[Found]] = [[found[0]]]
    for f in found[1:]:
        gap = text[groups[-1][-1].end : f.start]
        if re.fullmatch(r"[\s,;]*", gap):
            groups[-1].append(f)
        else:
            groups.append([f])
    out: list[Found] = []
    floor = 0  # a widened span never reaches into the group before it
    for group in groups:
        start, end = group[0].start, group[-1].end
        lead = re.search(r"\[\s*\Z", text[:start])
        tail = re.match(r"\s*\]", text[end:])
        if lead and tail:
            start, end = lead.start(), end + tail.end()
        start, end = _wrapped(text, start, end)
        start = max(start, floor)
        for a, b, body_a, _ in masked.fences:
            inside = body_a <= start and end <= b
            if inside and not text[body_a:start].strip() and not text[end:b].strip("`\n \t"):
                start, end = min(start, a), max(end, b)
        floor = end
        cut = any(not f.closed for f in group)  # a list cut short runs none of its calls
        out += [
            Found(f.name, f.args, f.family, start, end, f.closed and not cut, f.strong)
            if len(group) > 1 or (start, end) != (f.start, f.end)
            else f
            for f in group
        ]
    return out
