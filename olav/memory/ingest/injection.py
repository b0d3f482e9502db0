"""Memory as an injection vector: text that tries to instruct the model is quarantined.

Recalled memories are data. Anything written from tool output or documents is scanned for
instruction-like content; flagged rows are stored retired (``invalidated_at`` set,
``superseded_by = "quarantine:<reason>"``) so recall never serves them, and
``olav memory quarantine`` lists them for a human to release or delete.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from olav.memory.store.schema import QUARANTINE as QUARANTINE
from olav.memory.store.schema import MemoryRecord

# Scanned on every tool result and document written to memory, whatever its size, so each
# pattern costs time linear in the text: the windows are bounded, a tag's attributes stop at
# the next "<" (XML attributes cannot hold one), and whitespace once matched is not given back
# (tests/test_redact_linear.py times them on a megabyte of openers with no closers).
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "override",
        re.compile(
            r"\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|"
            r"system)\b.{0,30}\b(instructions?|prompts?|rules?|messages?)",
            re.I | re.S,
        ),
    ),
    (
        "override",
        re.compile(r"(忽略|无视|忘记).{0,12}(之前|以上|上面|所有|系统).{0,12}(指令|提示|规则)"),
    ),
    (
        "role tag",
        re.compile(
            r"<\s*+/?\s*+(system|assistant|user|im_start|im_end)\b[^<>]*+>|"
            r"\[/?(INST|SYS)\]|<<\s*+SYS\s*+>>|<\|im_(start|end)\|>",
            re.I,
        ),
    ),
    ("block closer", re.compile(r"<\s*+/?\s*+relevant-memories\s*+>", re.I)),
    (
        "persona",
        re.compile(
            r"\byou are now\b|\bnew (system )?instructions?\s*+:|"
            r"\bfrom now on,? you (must|will|should)\b",
            re.I,
        ),
    ),
)


def scan(text: str) -> str | None:
    """The reason the text looks like an injection attempt, or None."""
    for reason, pattern in _PATTERNS:
        if pattern.search(text):
            return reason
    return None


def quarantine_if_needed(rec: MemoryRecord) -> MemoryRecord:
    reason = scan(rec.text)
    if reason:
        rec.invalidated_at = datetime.now(UTC)
        rec.superseded_by = QUARANTINE + reason
    return rec
