"""Tool calls written as text, one module per format family, and the order they are read in.

Each module declares one :class:`~olav.runtime.rescue.families.reading.Family`: its reader
and every marker the rest of the rescue layer needs from it (the triggers that let a message
skip its reader, the stream markers, where a call starts for the reasoning filter, its control
tokens, its reasoning tags). **Adding a family is one new module here and one line in**
:data:`FAMILIES`; nothing else names a family.

:func:`find_calls` returns each call it finds with its family, where it sits in the text,
and whether the family is *strong* (tags or special tokens that only a tool call uses) or
*weak* (JSON or a Python call list, which an answer may also show as content). Names and
arguments are raw here; :mod:`olav.runtime.rescue.salvage` decides what may run. Strong
families count wherever they appear outside code the answer shows: a fenced block in another
language and inline code are masked first, so a ``<tool_call>`` quoted in an explanation
runs nothing.
"""

from __future__ import annotations

import re

from olav.runtime.rescue.families import (
    bare_json,
    deepseek,
    fenced_json,
    functionary,
    gemma4,
    glm,
    gpt_oss,
    granite,
    hermes,
    internlm,
    kimi,
    llama4_pythonic,
    llama_python_tag,
    minimax,
    mistral,
    phi4,
    pythonic,
    qwen3_xml,
)
from olav.runtime.rescue.families.reading import Family, Found, Masked, Reading, mask

# The order a message is read in. Where two families claim the same text, the first keeps it:
# strong before weak, and kimi before deepseek (<|tool_call_begin|> is also deepseek's token
# in ASCII).
FAMILIES: tuple[Family, ...] = (
    gemma4.FAMILY,
    hermes.FAMILY,
    glm.FAMILY,
    qwen3_xml.FAMILY,
    mistral.FAMILY,
    kimi.FAMILY,
    deepseek.FAMILY,
    gpt_oss.FAMILY,
    minimax.FAMILY,
    functionary.FAMILY,
    granite.FAMILY,
    phi4.FAMILY,
    llama_python_tag.FAMILY,
    internlm.FAMILY,
    llama4_pythonic.FAMILY,
    fenced_json.FAMILY,
    bare_json.FAMILY,
    pythonic.FAMILY,
)

__all__ = ["FAMILIES", "Family", "Found", "Masked", "find_calls", "mask"]


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


TRIGGERS = _unique([t for f in FAMILIES for t in f.triggers])
STREAM_MARKERS = _unique([m for f in FAMILIES for m in f.stream])
CALL_START = re.compile("|".join(_unique([f.call_start for f in FAMILIES if f.call_start])))
# control tokens: the patterns first (a channel token with its name), then the literal
# tokens, longest first, so that a token that begins another is never cut out of it
CONTROL_TOKENS = re.compile(
    "|".join(
        [
            *_unique([p for f in FAMILIES for p in f.token_patterns]),
            *(
                re.escape(t)
                for t in sorted(_unique([t for f in FAMILIES for t in f.tokens]), key=len)[::-1]
            ),
        ]
    )
)
THINK_OPEN = _unique([t for f in FAMILIES for t in f.think_open])
THINK_CLOSE = _unique([t for f in FAMILIES for t in f.think_close])
THINK_OPENERS = tuple(dict.fromkeys(o for f in FAMILIES for o in f.think_openers))


def find_calls(text: str, *, weak: bool = True, finished: bool = True) -> list[Found]:
    """Every call written in ``text``, in order, outside code the answer shows. Where two
    families claim the same text (a JSON call inside ``<tool_call>`` tags), the first in
    :data:`FAMILIES` keeps it. ``finished``: the message ended on a stop token, not on the
    token limit (a call the text ends in may then be complete)."""
    if not text or not any(t in text for t in TRIGGERS):
        return []
    masked = mask(text)
    found: list[Found] = []
    strong_found = False
    for family in FAMILIES:
        if not family.strong and not weak:
            break
        if not any(t in text for t in family.triggers):
            continue
        reading = Reading(text, finished, masked, alone=not strong_found)
        for f in family.read(reading):
            if family.strong and masked.hides(f.start):
                continue
            if not _overlaps(f, found):
                found.append(f)
        strong_found = strong_found or (family.strong and bool(found))
    return sorted(found, key=lambda f: f.start)


def _overlaps(f: Found, found: list[Found]) -> bool:
    """``f`` claims text another find has (several calls in one block share its span)."""
    for other in found:
        same_block = (other.start, other.end) == (f.start, f.end) and other.family == f.family
        if other.start < f.end and f.start < other.end and not same_block:
            return True
    return False
