"""Tool arguments repaired by the tool's JSON schema, and validated.

Small models get argument types wrong in a few ways, all repaired here before a call runs:
strings for numbers and booleans (``"9000"``, ``"true"``), a JSON string where an object or a
list is expected and an object where a string is, one value where a list is expected, leaked
quotes around a short string, an enum value in the wrong case, ``"None"`` for null.

:func:`coerce` returns the repaired arguments and the problems left. A problem names the
field, the expected type and an example, so the model can fix its call:
``argument 'mtu' must be an integer (got 'jumbo'), e.g. {"device": "sh1-core01", "mtu": 9000}``.

The schema subset is what pydantic emits for tool arguments: ``type``, ``properties``,
``required``, ``items``, ``enum``, ``anyOf``/``oneOf``, ``default``, ``$ref`` into ``$defs``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from olav.runtime.rescue.lenient import LenientError
from olav.runtime.rescue.lenient import loads as lenient_loads
from olav.runtime.tools.base import strip_quote_leak

_TRUE = {"true", "yes", "y", "1", "on"}
_FALSE = {"false", "no", "n", "0", "off"}
_NULL = {"none", "null", "nil", ""}
_QUOTES = "\"'`“”‘’"
_IDENT = re.compile(r"[\w.:/@-]{1,200}")
_EG = re.compile(r"\be\.g\.,?\s*([^\s,;)]+)")


class _Bad(Exception):
    def __init__(self, expected: str, got: Any) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = got


@dataclass
class Checked:
    """Arguments after repair: ``args`` and the ``problems`` left (empty when valid)."""

    args: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # the fields that were changed

    @property
    def ok(self) -> bool:
        return not self.problems


def coerce(args: Any, schema: dict[str, Any]) -> Checked:
    """``args`` repaired against a tool's argument ``schema`` (see the module docstring)."""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    if isinstance(args, str):  # the whole arguments object sent as a JSON string
        try:
            args = lenient_loads(args) if args.strip() else {}
        except LenientError:
            return Checked({}, ["the arguments must be a JSON object"])
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return Checked({}, [f"the arguments must be a JSON object, e.g. {example(schema)}"])
    props: dict[str, Any] = schema.get("properties") or {}
    out: dict[str, Any] = {}
    problems: list[str] = []
    repaired: list[str] = []
    wrong: set[str] = set()  # given, but not valid: a problem already, never "is required"
    for key, value in args.items():
        name = _known_key(key, props)
        if name is None:
            if props or schema.get("additionalProperties") is False:
                known = ", ".join(props) or "none"
                problems.append(f"unknown argument {key!r} (the arguments are: {known})")
            else:
                out[key] = value
            continue
        try:
            fixed = _value(value, props[name], defs)
        except _Bad as bad:
            problems.append(_problem(name, bad, schema))
            wrong.add(name)
            continue
        if fixed != value or type(fixed) is not type(value) or name != key:
            repaired.append(name)
        out[name] = fixed
    for name in schema.get("required") or []:
        if name not in out and name not in wrong:
            problems.append(f"argument {name!r} is required, e.g. {example(schema)}")
    return Checked(out, problems, repaired)


def _known_key(key: str, props: dict[str, Any]) -> str | None:
    if key in props:
        return key
    low = key.strip().strip(_QUOTES).lower().replace("-", "_")
    for name in props:
        if name.lower() == low:
            return name
    return None


def _problem(name: str, bad: _Bad, schema: dict[str, Any]) -> str:
    got = json.dumps(bad.got, ensure_ascii=False)
    if len(got) > 60:
        got = got[:57] + "..."
    return f"argument {name!r} must be {bad.expected} (got {got}), e.g. {example(schema)}"


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
        return {**defs[ref.rsplit("/", 1)[-1]], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _value(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if value is None:  # null as written; the tool's own validation decides whether it may be
        return None
    schema = _resolve(schema, defs)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return _any_of(value, [_resolve(o, defs) for o in options], defs)
    if "enum" in schema:
        return _enum(value, schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _any_of(value, [{**schema, "type": k} for k in kind], defs)
    if kind is None:
        return value
    return _typed(value, kind, schema, defs)


def _any_of(value: Any, options: list[dict[str, Any]], defs: dict[str, Any]) -> Any:
    """The first option that takes ``value`` as it is, else the first that takes it repaired
    (``"3"`` stays a string when a string is allowed)."""
    for opt in options:
        if _fits(value, opt):
            return value
    for opt in options:
        if opt.get("type") == "null" and not (isinstance(value, str) and value.lower() in _NULL):
            continue
        try:
            return _value(value, opt, defs)
        except _Bad:
            continue
    raise _Bad(" or ".join(_describe(o) for o in options), value)


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if "enum" in schema:
        return value in schema["enum"]
    return {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "array": isinstance(value, list) and "items" not in schema,
        "object": isinstance(value, dict) and "properties" not in schema,
    }.get(str(kind), False)


def _describe(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return f"a list of {_describe(schema.get('items') or {}).removeprefix('a ')}s"
    return {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "true or false",
        "null": "null",
        "object": "an object",
    }.get(str(kind), "a value")


def _enum(value: Any, allowed: list[Any]) -> Any:
    if value in allowed:
        return value
    if isinstance(value, str):
        low = value.strip().strip(_QUOTES).lower()
        for option in allowed:
            if str(option).lower() == low:
                return option
    raise _Bad("one of " + ", ".join(str(v) for v in allowed), value)


def _typed(value: Any, kind: str, schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    if kind == "string":
        return _string(value)
    if kind == "integer":
        return _integer(value)
    if kind == "number":
        return _number(value)
    if kind == "boolean":
        return _boolean(value)
    if kind == "null":
        if value is None or (isinstance(value, str) and value.strip().lower() in _NULL):
            return None
        raise _Bad("null", value)
    if kind == "array":
        return _array(value, schema, defs)
    if kind == "object":
        return _object(value, schema, defs)
    return value


def _string(value: Any) -> str:
    if isinstance(value, str):
        # a name or an id in leaked quotes ('"sh1-core01"') loses them; anything else stays as
        # written: a quoted phrase ('"cool units"') or content may mean its quotes
        bare = strip_quote_leak(value)
        return bare if bare != value.strip() and _IDENT.fullmatch(bare) else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):  # content given as structure: its JSON text
        return json.dumps(value, ensure_ascii=False)
    raise _Bad("a string", value)


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise _Bad("an integer", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = strip_quote_leak(value).replace("_", "")
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        if re.fullmatch(r"[+-]?\d+\.0*", text):
            return int(float(text))
    raise _Bad("an integer", value)


def _number(value: Any) -> float | int:
    if isinstance(value, bool):
        raise _Bad("a number", value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        text = strip_quote_leak(value)
        try:
            num = float(text)
        except ValueError:
            raise _Bad("a number", value) from None
        return int(num) if re.fullmatch(r"[+-]?\d+", text) else num
    raise _Bad("a number", value)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = strip_quote_leak(value).lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise _Bad("true or false", value)


def _array(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> list[Any]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = lenient_loads(text)
            except LenientError:
                raise _Bad(_describe(schema), value) from None
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        value = [value]  # one value where a list is expected
    items = schema.get("items")
    if not items:
        return list(value)
    return [_value(v, items, defs) for v in value]


def _object(value: Any, schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = lenient_loads(value)
        except LenientError:
            raise _Bad("an object", value) from None
    if not isinstance(value, dict):
        raise _Bad("an object", value)
    if not schema.get("properties"):
        return value
    checked = coerce(value, {**schema, "$defs": defs})
    if checked.problems:
        raise _Bad("an object: " + "; ".join(checked.problems), value)
    return checked.args


def example(schema: dict[str, Any]) -> str:
    """An example arguments object for ``schema``: its required fields (all fields when none
    is required, up to three), each with a value taken from its description's "e.g.", its
    enum, its default or its type."""
    props: dict[str, Any] = schema.get("properties") or {}
    names = list(schema.get("required") or []) or list(props)[:3]
    defs = schema.get("$defs") or {}
    return json.dumps(
        {n: _example_value(_resolve(props.get(n) or {}, defs)) for n in names}, ensure_ascii=False
    )


def _example_value(schema: dict[str, Any]) -> Any:
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        real = [o for o in options if o.get("type") != "null"] or options
        return _example_value({**real[0], "description": schema.get("description", "")})
    if "enum" in schema:
        return schema["enum"][0]
    m = _EG.search(str(schema.get("description") or ""))
    hint = m.group(1).strip(_QUOTES + ".") if m else None
    kind = schema.get("type")
    if kind == "integer":
        return int(hint) if hint and hint.isdigit() else 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        item = _example_value(schema.get("items") or {"type": "string"})
        return [hint or item]
    if kind == "object":
        return {}
    return hint or "..."
