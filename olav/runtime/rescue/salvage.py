"""Which tool calls written as text may run. Precision first.

:func:`salvage` reads a model message that carries no structured tool call: its answer and,
when the answer holds no call, its reasoning. A call found by :mod:`olav.runtime.rescue.families`
runs only when all of these hold:

1. its name is a tool this agent is offered, after the documented normalisations: a
   ``functions.``/``tools.`` prefix, an index suffix (``name:0``), case, ``-`` for ``_``,
   and gpt-oss's ``json`` glued to the name;
2. its arguments validate against the tool's schema after repair
   (:mod:`olav.runtime.rescue.schema`);
3. it is not content the answer shows: never from a fenced block in another language or inline
   code; never when the person asked to see an example or a format; and for the weak formats
   (bare JSON, a ```` ```json ```` block, a Python call list) only when the message is the call
   with a short lead-in, not an answer that explains, lists or quotes.

A call that fails 2 is kept apart as ``invalid``, with the problems, so that the model can be
told what to fix; it never runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from olav.runtime.rescue.byschema import offered_name, read_calls
from olav.runtime.rescue.families import Found, find_calls, mask
from olav.runtime.rescue.families.reading import Typed, Written
from olav.runtime.rescue.lenient import closes_at
from olav.runtime.rescue.markers import scrub
from olav.runtime.rescue.schema import coerce
from olav.runtime.rescue.think import opened_by, split_reasoning

# the person asked to see a call, a format or an example, not to have one run
_EXAMPLE_REQUEST = re.compile(
    r"\b(?:examples?|samples?|syntax|schema|snippet|template)\b"
    r"|\bshow\s+(?:me\s+)?(?:how|what)\b|\bwhat\s+(?:does|would|should)\b.{0,40}\b(?:call|json|format|payload|request|syntax)\b.{0,20}\blook\s+like\b"
    r"|\bhow\s+(?:do|would|should|can)\s+(?:i|you|we)\s+(?:call|invoke|use|format|write)\b"
    r"|\bformat\s+of\b|\bexplain\b.{0,40}\b(?:call|format|json)\b"
    # "just show me, don't call it", "show me the exact call ... don't run it yet"
    r"|\b(?:don'?t|do\s+not|never|without)\s+(?:actually\s+)?(?:call|calling|run|running|"
    r"execute|executing|invoke|invoking)\b|\bjust\s+show\b"
    r"|\bshow\s+(?:me\s+)?(?:the\s+|an?\s+)?(?:exact\s+)?(?:call|payload|request|json)\b"
    r"|示例|例子|样例|举例|范例|模板|格式是|什么格式|怎么调用|如何调用|怎样调用|怎么写|长什么样|解释"
    r"|不要执行|别执行|先别|不要调用|别调用|不用执行|只是看看|给我看看",
    re.I | re.S,
)
# prose that presents what follows as an illustration. Words sit between \b's; abbreviations
# end in a dot, which no \b can follow when a space or a line break does ("e.g.\n{...}"), so
# they have their own branch; Chinese has no word boundaries at all.
_EXAMPLE_PROSE = re.compile(
    r"\b(?:for\s+example|for\s+instance|example|such\s+as|like\s+this|looks?\s+like|"
    r"would\s+look|you\s+(?:can|could|would|might|should)|one\s+could|here\s+is\s+how|"
    r"the\s+format\s+is|a\s+sample|sample\s+call|here[’']s\s+how|to\s+call\s+it)\b"
    r"|\b(?:e\. ?g|i\. ?e)(?:\.|\b)|\beg\."
    r"|\bnot\s+(?:yet\s+)?(?:executed|run|sent|called)\b|\b(?:i\s+)?would\s+(?:send|make|run|use)\b"
    r"|例如|比如|示例|例子|举例|如下格式|格式如下|可以这样|你可以|可以调用|调用方式|样例"
    r"|未执行|不会执行|没有执行|尚未执行",
    re.I,
)
WEAK_PROSE_LIMIT = 300  # characters of prose a weak-format call may come with


@dataclass(frozen=True)
class TextCall:
    """A salvaged call: the offered tool's exact ``name``, repaired ``args``, and where it
    came from (``family``; ``in_reasoning`` when it was written inside ``<think>``)."""

    name: str
    args: dict[str, Any]
    family: str
    in_reasoning: bool = False


@dataclass(frozen=True)
class Invalid:
    name: str
    family: str
    problems: list[str]


@dataclass
class Salvage:
    """What :func:`salvage` made of a message: the ``calls`` to run, the ``invalid`` ones
    (an offered tool, arguments that do not validate), the ``answer`` without the calls and
    the reasoning, the ``reasoning`` and why nothing was taken (``skipped``)."""

    calls: list[TextCall] = field(default_factory=list)
    invalid: list[Invalid] = field(default_factory=list)
    answer: str = ""
    reasoning: str = ""
    skipped: str = ""
    unfinished: list[str] = field(default_factory=list)  # calls cut short: never run

    @property
    def families(self) -> list[str]:
        return sorted({c.family for c in self.calls})


# addresses say nothing about what the person asks for ("ops@example.com", example.org)
# each tried where its run of characters starts (a scheme is at most 32 long), so a long
# word is read once, not once for every offset in it
_ADDRESSES = re.compile(
    r"(?<!\S)\S+@\S+|\b[a-z][a-z0-9+.-]{0,31}+://\S+"
    r"|(?<![\w.-])[.-]*+[\w-]++(?:\.[\w-]++)*\.(?:com|org|net)\b",
    re.I,
)


def asks_for_example(request: str, tools: Iterable[str] = ()) -> bool:
    """Whether the person asks to be shown a call rather than to have one made. The names of
    the offered ``tools`` are no such words: "run the example tool" names ``example_tool``,
    "render the template" may name ``template_render``."""
    if not request:
        return False
    text = _ADDRESSES.sub(" ", request)
    for name in tools:
        parts = [re.escape(p) for p in re.split(r"[_\-\s.]+", name) if p]
        if len(parts) > 1 and any(_EXAMPLE_REQUEST.fullmatch(p) for p in parts):
            text = re.sub(r"\b" + r"[\s_.\-]?".join(parts) + r"\b", " ", text, flags=re.I)
    return bool(_EXAMPLE_REQUEST.search(text))


def salvage(
    content: str,
    tools: Mapping[str, dict[str, Any]],
    *,
    request: str = "",
    reasoning: str = "",
    finished: bool = True,
    prompt: str = "",
    grammars: bool = True,
) -> Salvage:
    """The calls to run from a message's text. ``tools`` maps each offered tool's name to
    its argument JSON schema; ``request`` is the person's message; ``reasoning`` is what the
    server returned apart from the content (the reasoning channel). ``finished`` is False
    when the message stopped on the token limit: a call it ends in is never run, nor
    completed. ``prompt`` is the end of the prompt the model went on from, when known (a
    template that opens reasoning there). The family grammars read first; beneath them the
    offered tools' schemas do (:mod:`olav.runtime.rescue.byschema`); ``grammars=False``
    leaves the schemas alone (what ``olav bench toolcalls --schema-only`` measures)."""
    answer, thought = split_reasoning(content or "", opened=opened_by(prompt), finished=finished)
    thought = "\n\n".join(t for t in (reasoning.strip(), thought) if t)
    out = Salvage(answer=answer, reasoning=thought)
    if not tools:
        out.skipped = "no tools offered"
        out.answer = scrub(answer)
        return out
    if asks_for_example(request, tools):
        out.skipped = "the request asks for an example"
        return out
    # a message in Harmony's channels has its own call syntax: JSON in its answer is content
    weak = "<|channel|>" not in (content or "")
    found = find_calls(answer, finished=finished, weak=weak) if grammars else []
    taken = _take(found, answer, tools, out, in_reasoning=False)
    if not taken and not out.unfinished:  # a cut or broken frame is never guessed at
        found, taken = _by_schema(
            answer, tools, out, finished=finished, grammars=found, objects=weak
        )
    if not taken and not out.invalid and thought and len(answer) <= WEAK_PROSE_LIMIT:
        more = find_calls(thought, finished=finished) if grammars else []
        if not _take(more, thought, tools, out, in_reasoning=True) and not out.unfinished:
            _by_schema(thought, tools, out, finished=finished, grammars=more, in_reasoning=True)
    cut = [f for f in found if not f.closed]
    if taken or cut:
        out.answer = _without(answer, [*taken, *cut])
    out.answer = scrub(out.answer)
    return out


def _by_schema(
    text: str,
    tools: Mapping[str, dict[str, Any]],
    out: Salvage,
    *,
    finished: bool,
    grammars: list[Found],
    in_reasoning: bool = False,
    objects: bool = True,
) -> tuple[list[Found], list[Found]]:
    """The schema-driven reader where the grammars took nothing: (its finds, those taken).
    What it reads replaces the grammars' verdicts (an invalid or unnamed call) only when it
    takes a call; a call the text ends in, when the message stopped on the token limit, is
    never run."""
    read = read_calls(text, tools, objects=objects)
    if not finished:
        tail = len(text.rstrip())
        read = [replace(f, closed=False) if f.end >= tail else f for f in read]
    if not read:
        return grammars, []
    trial = Salvage(answer=out.answer, reasoning=out.reasoning)
    taken = _take(read, text, tools, trial, in_reasoning=in_reasoning)
    if taken:
        out.calls += trial.calls
        out.invalid, out.unfinished, out.skipped = trial.invalid, trial.unfinished, trial.skipped
        return read, taken
    if trial.unfinished and not out.unfinished:
        out.unfinished = trial.unfinished
        return read, taken
    if not out.invalid:
        out.invalid = trial.invalid
    return grammars, []


def _take(
    found: list[Found],
    text: str,
    tools: Mapping[str, dict[str, Any]],
    out: Salvage,
    *,
    in_reasoning: bool,
) -> list[Found]:
    """Add the calls of ``found`` that may run to ``out``; the finds taken."""
    named = [(f, offered_name(f.name, tools)) for f in found]
    for f, n in named:
        if n is None and not f.closed:
            out.unfinished.append(f.name or "a tool")
    offered = [(f, n) for f, n in named if n is not None]
    if not offered:
        if found and not out.skipped:
            out.skipped = "no offered tool: " + ", ".join(sorted({f.name for f in found}))
        return []
    weak = [f for f, _ in offered if not f.strong]
    if weak and not _weak_allowed(text, [f for f, _ in offered]):
        offered = [(f, n) for f, n in offered if f.strong]
        out.skipped = "the JSON or call list reads as the answer's content"
    taken: list[Found] = []
    for f, name in offered:
        if not f.closed or (isinstance(f.args, str) and not _complete_json(f.args)):
            out.unfinished.append(name)
            continue
        checked = coerce(typed(f.args, tools[name]), tools[name])
        if not checked.ok:
            out.invalid.append(Invalid(name, f.family, checked.problems))
            continue
        out.calls.append(TextCall(name, checked.args, f.family, in_reasoning))
        taken.append(f)
    return taken


def _complete_json(text: str) -> bool:
    """Arguments given as JSON text are closed (an empty text is no arguments)."""
    start = next((i for i, ch in enumerate(text) if not ch.isspace()), None)
    if start is None:
        return True
    return text[start] not in "{[" or closes_at(text, start) is not None


def typed(args: Any, schema: Mapping[str, Any]) -> Any:
    """Tagged values as their field's type: text for a string field, else the JSON they
    spell (``7`` is 7, ``null`` is None, ``False`` is False); a value whose tag names its
    type (:class:`~olav.runtime.rescue.families.reading.Typed`) as the tag says."""
    if not isinstance(args, dict):
        return args
    props = schema.get("properties") or {}
    return {k: _typed_value(v, props.get(k)) for k, v in args.items()}


def _typed_value(value: Any, prop: Any) -> Any:
    if isinstance(value, Typed):
        if value.kind == "string":
            return str(value)
        return _json_or_text(str(value))
    if not isinstance(value, Written):
        return value
    text = str(value)
    if text.strip() == "null":  # null whatever the field's type, as the engines read it
        return None
    if isinstance(prop, dict) and _text_field(prop):
        return text
    return _json_or_text(text)


def _text_field(prop: dict[str, Any]) -> bool:
    kinds = prop.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    options = prop.get("anyOf") or prop.get("oneOf") or []
    kinds += [o.get("type") for o in options if isinstance(o, dict)]
    if "enum" in prop and all(isinstance(e, str) for e in prop["enum"]):
        return True
    return "string" in kinds and not any(
        k in kinds for k in ("integer", "number", "boolean", "object", "array")
    )


_PY_LITERALS = {"True": True, "False": False, "None": None}


def _json_or_text(text: str) -> Any:
    stripped = text.strip()
    if stripped in _PY_LITERALS:
        return _PY_LITERALS[stripped]
    try:
        return json.loads(stripped)
    except ValueError:
        return text


def _weak_allowed(text: str, found: list[Found]) -> bool:
    """A weak-format call counts only as the message's point: no code shown besides it, no
    example wording, and little prose around it."""
    prose = _without(text, found)
    if mask(prose).other_code:  # code shown besides the call (a fence the call is in is its own)
        return False
    if len(prose) > WEAK_PROSE_LIMIT:
        return False
    return not _EXAMPLE_PROSE.search(prose)


def _without(text: str, found: list[Found]) -> str:
    """``text`` with the spans of ``found`` cut out, its blank lines folded."""
    spans = sorted({(f.start, f.end) for f in found})
    parts, pos = [], 0
    for start, end in spans:
        if start >= pos:
            parts.append(text[pos:start])
        pos = max(pos, end)  # spans that overlap are cut as one
    parts.append(text[pos:])
    return re.sub(r"\n{3,}", "\n\n", "".join(parts)).strip()
