"""What every tool shares: the context it runs in, strict argument models that strip leaked
quotes, failures returned as values, and the person's consent for tools that store for good."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, field_validator

# Tools that change the outside world and need a human's approval in the chat.
DANGEROUS = frozenset({"execute_skill_script", "take_snapshot"})
# Tools that store something for good: they run only after a person's yes to what they will
# store (never auto-approved; refused where nobody can be asked). See ConsentTool.
NEEDS_CONSENT = frozenset({"commit_to_memory"})
_QUOTES = "\"'`“”‘’"


def strip_quote_leak(value: str) -> str:
    """Small models sometimes wrap string arguments in literal quotes: '"reports"' -> reports."""
    out = value.strip()
    while len(out) >= 2 and out[0] in _QUOTES and out[-1] in _QUOTES:
        out = out[1:-1].strip()
    return out


class ToolArgs(BaseModel):
    """Base for tool arguments: every str field is stripped of leaked quotes."""

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, v: object) -> object:
        # only short single-line values (names, formats, ids); content is left as written
        if isinstance(v, str) and "\n" not in v and len(v) <= 200:
            return strip_quote_leak(v)
        return v


@dataclass
class ToolContext:
    root: Path
    exports: Path
    domain_db: Path
    audit_db: Path
    agent: str
    store_factory: Callable[[], Any]
    agent_dir: Path | None = None
    logs: Path | None = None
    tier: str = "small"
    config: Any = None
    run: Any = None  # the session's RunContext: its run_id changes every turn
    _store: Any = field(default=None, repr=False)

    @property
    def run_id(self) -> str | None:
        return getattr(self.run, "run_id", None)

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = self.store_factory()
        return self._store


class ToolFailure(str):
    """A tool's error, returned to the model as a value. The tool wrapper turns it into a
    ToolMessage with status "error", so a result that merely begins with "Error" (an "Error
    rates per port" table) is not a failure."""


def tool_error(msg: str) -> str:
    return ToolFailure(f"Error: {msg}")


@dataclass(frozen=True)
class ConsentRequest:
    """What a consent tool call would do, for the person's y/N prompt."""

    subject: str  # what is approved, e.g. the draft's intent
    preview: str  # what would be stored, shown to the person
    refusal: str  # the error the model gets when the person says no (or cannot be asked)


@dataclass(frozen=True)
class Consent:
    """A person's yes to one tool call on ``subject``; ``by`` says where they gave it."""

    by: str
    subject: str


_CONSENT: ContextVar[Consent | None] = ContextVar("olav_consent", default=None)


@contextmanager
def consent_given(consent: Consent | None) -> Iterator[None]:
    """Run a tool call with the person's yes, which only the approval middleware can grant:
    the model cannot forge it through the call's arguments."""
    token = _CONSENT.set(consent)
    try:
        yield
    finally:
        _CONSENT.reset(token)


def current_consent() -> Consent | None:
    return _CONSENT.get()


class ConsentTool(StructuredTool):
    """A tool in NEEDS_CONSENT: ``describe(args)`` says what a person is asked to approve."""

    describe: Callable[[dict[str, Any]], ConsentRequest]
