"""Robust parsing of small models' JSON answers (code fences, chatter, thinking tags)."""

from __future__ import annotations

import json
import re
from typing import Any

from olav.core.errors import OlavError

# a think block ends at the first </think> and never spans another <think> (so an opener with
# no closer is read to the next opener, not to the end of the text, once per opener)
_THINK = re.compile(r"<think>(?:(?!</?think>).)*+</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json|JSON)?\s*+(.*?)```", re.S)


class ParseError(OlavError):
    pass


def extract_json(text: str) -> Any:
    """The first JSON object or array in a model answer; ParseError if there is none."""
    cleaned = _THINK.sub("", text or "").strip()
    candidates = [m.group(1).strip() for m in _FENCE.finditer(cleaned)] + [cleaned]
    decoder = json.JSONDecoder()
    for cand in candidates:
        for i, ch in enumerate(cand):
            if ch in "[{":
                try:
                    value, _ = decoder.raw_decode(cand[i:])
                except json.JSONDecodeError:
                    continue
                return value
    snippet = " ".join(cleaned.split())[:80]
    raise ParseError(
        f"the model returned no JSON ({snippet!r})",
        hint="Retry, or use a larger model for this job",
    )


def ask_model(model: Any, prompt: str) -> str:
    """One plain call to a chat model; returns its text."""
    from langchain_core.messages import HumanMessage

    reply = model.invoke([HumanMessage(content=prompt)])
    content = reply.content
    if isinstance(content, list):
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content)
