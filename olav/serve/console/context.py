"""What every console view gets (:class:`Ctx`: the server, the logged-in operator and the
request's parameters) and what it returns (a :class:`Page`, whose ``data`` is its JSON twin, or
a :class:`Redirect`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from olav.core.errors import NotFoundError, OlavError
from olav.serve.console.html import Markup
from olav.serve.console.sessions import ConsoleSession
from olav.serve.server import Server

MAX_LIMIT = 200
MAX_OFFSET = 100_000


class Missing(NotFoundError):
    """What a page names does not exist, or is not this operator's (the same answer)."""


class Refused(OlavError):
    """The operator may see this, but not change it (403)."""


class BadRequest(OlavError):
    """A parameter or form field the page cannot use (400); the message says which."""


@dataclass
class Page:
    title: str
    body: Markup
    data: Any  # the same content as JSON (?format=json)
    active: str = ""
    status: int = 200


@dataclass
class Redirect:
    location: str
    flash: str = ""


@dataclass
class AfterRun:
    """A form's answer once its run has ended: the console waits for it on the event loop
    (no worker thread held, however long the run), at most ``wait_s``, then redirects."""

    run: Any
    location: str
    wait_s: float


@dataclass
class Ctx:
    server: Server
    operator: str
    session: ConsoleSession | None
    params: Mapping[str, str] = field(default_factory=dict)
    path_params: Mapping[str, str] = field(default_factory=dict)
    wants_json: bool = False  # the page's JSON twin was asked for (?format=json)

    @cached_property
    def ws(self) -> Any:
        """The workspace as this operator sees it (their ``memory.user``)."""
        from olav.serve.pool import operator_workspace

        return operator_workspace(self.server.ws, self.operator)

    @property
    def config(self) -> Any:
        return self.ws.config

    @property
    def author(self) -> Any:
        """Who writes from this page: the operator, with their token's role."""
        from olav.memory.store.roles import Author

        return Author.of(self.config)

    @property
    def audit_path(self) -> Path:
        return Path(self.server.ws.audit_path)

    @property
    def audit(self) -> Any:
        """The audit as this operator may read it (olav.audit.reader.AuditReader): their runs,
        and for the workspace's own operator those that name nobody."""
        from olav.audit.reader import AuditReader

        return AuditReader(self.audit_path, self.operator, or_unnamed=self.operator == self.owner)

    @cached_property
    def owner(self) -> str:
        """The workspace's own operator (``memory.user``, else the login name): the one whose
        terminal this is."""
        from olav.memory.store.scopes import user_name

        return user_name(self.server.ws.config)

    @property
    def csrf(self) -> str:
        return self.session.csrf if self.session is not None else ""

    def store(self) -> Any:
        """The memory table the server's sessions share."""
        return self.server.pool.memory()

    def text(self, name: str, limit: int = 500) -> str:
        return str(self.params.get(name, "") or "").strip()[:limit]

    def choice(self, name: str, allowed: tuple[str, ...] | list[str]) -> str:
        value = self.text(name, 100)
        return value if value in allowed else ""

    def number(self, name: str, default: int, high: int) -> int:
        try:
            value = int(self.params.get(name, default))
        except (TypeError, ValueError):
            return default
        return max(0, min(value, high))

    def window(self, default: int = 50) -> tuple[int, int]:
        """(offset, limit) of a paginated page."""
        limit = self.number("limit", default, MAX_LIMIT) or default
        return self.number("offset", 0, MAX_OFFSET), limit


# -- who sees which runs (the runs, drafts, health and memory pages) ------------------------

VISIBILITY_NOTE = (
    "You see your own runs, whoever has their thread's id now. A run that names no operator "
    "(olav's own jobs, or one recorded before runs named theirs) is shown to the workspace's "
    "own operator only."
)


def visible_runs(ctx: Ctx, run_ids: Iterable[str]) -> set[str]:
    """Which of the audit's ``run_ids`` the operator may see (an unknown id is not one)."""
    return set(ctx.audit.visible(run_ids))
