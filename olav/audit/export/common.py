"""What every format shares: the options, redacting again by today's rules (rows written by
an older olav were redacted by older rules, :mod:`olav.core.redact`), the person's message
with or without the memories block, a call's arguments, and the skip a writer raises for a
run its format cannot express."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from olav.audit.export.runs import AuditedRun, Step
from olav.core.redact import REDACTED, redact, redact_text

MEMORY_BLOCK = re.compile(r"^\s*<relevant-memories>.*?</relevant-memories>\s*", re.S)


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """``system``: a system message to put first (None: none); ``memories``: keep the
    ``<relevant-memories>`` block in front of the person's message; ``reasoning``: add the
    model's reasoning; ``split``: the share of threads for the test file."""

    format: str = "openai"
    system: str | None = None
    memories: bool = False
    reasoning: bool = False
    split: float = 0.0
    seed: int = 42


# stands for [REDACTED] while a row is redacted again: redact_text is not idempotent
# ("token=[REDACTED]" would become "token=[REDACTED]]")
_KEPT = "OLAVXREDACTEDX"


def _swap(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_swap(v, old, new) for v in value]
    return value


def clean(text: str | None) -> str:
    """Text redacted again by today's rules (what an older olav let through is masked)."""
    if not text:
        return ""
    return redact_text(text.replace(REDACTED, _KEPT)).replace(_KEPT, REDACTED)


def redacted(value: Any) -> Any:
    return _swap(redact(_swap(value, REDACTED, _KEPT)), _KEPT, REDACTED)


def redact_again(value: Any) -> Any:
    """A value read from the audit (text, or JSON data) redacted again by today's rules, for
    whoever shows it (the web console); what is masked already stays masked once."""
    return redacted(value)


def user_text(run: AuditedRun, step: Step, first: bool, memories: bool) -> str:
    text = MEMORY_BLOCK.sub("", clean(step.content), count=1)
    if memories and first and run.memory_block:
        return f"{clean(run.memory_block)}\n\n{text}"
    return text


def call_args(call: dict[str, Any]) -> Any:
    args = call.get("args")
    return redacted(args if args is not None else {})


class Skip(Exception):
    """A run that a format cannot express; the argument is the reason counted."""
