"""The one token estimate: one token per CJK character, one per four other characters.

Cheap enough for the recall hot path and the working-memory budget; close enough to the
tokenisers of qwen3 and llama for budgeting a prompt block."""

from __future__ import annotations

import re

CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


def char_counts(text: str) -> tuple[int, int]:
    """(CJK characters, other characters)."""
    cjk = len(CJK.findall(text))
    return cjk, len(text) - cjk


def tokens_from_counts(cjk: int, other: int) -> int:
    """The estimate from character counts, so that running totals stay cheap."""
    return cjk + (other + 3) // 4


def estimate_tokens(text: str) -> int:
    return tokens_from_counts(*char_counts(text))
