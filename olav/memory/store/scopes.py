"""Whose memory is whose: ``user:<name>`` (one operator's, private) and ``team:<name>``.

What the learning loop derives from an operator's runs (captured precedents and query patterns,
lessons from their failures, episodes) lands in that operator's ``user:`` scope, on a local
table as on a team table; promoting a row to a shared scope is a draft a person allowed to
write there confirms (``olav memory promote``). Recall reads the agent's scope, ``global``,
the operator's own ``user:`` scope and the team's scope, as a LanceDB pre-filter, so another
operator's private rows never reach it. Every other read path (show by id, listings, searches,
promote, the MCP tools) applies the same rule, :class:`Reader`, which every listing's filter
carries (olav.memory.store.filters.SearchFilter), so an id alone never reveals another operator's
row. An ``olav serve`` workspace has many operators on one
local table, so "local" never means "one operator".

This is a visibility rule, not access control: anyone who may read the bucket prefix can open
the table with LanceDB directly. Keep what must stay secret in another bucket or prefix.
"""

from __future__ import annotations

import getpass
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

USER_PREFIX = "user:"
TEAM_PREFIX = "team:"
_NAME = re.compile(r"[^a-z0-9_.-]+")


def _setting(config: Any, key: str) -> str:
    """A scope setting; a partial mapping (tests, benchmarks) counts as unset."""
    try:
        return str(config[key] or "")
    except KeyError:
        return ""


def scope_name(raw: str) -> str:
    """``raw`` as a name inside a scope: lower case, other characters ``-`` ("Alice B" is
    ``alice-b``), "" when nothing is left."""
    return _NAME.sub("-", raw.strip().lower()).strip("-")


def user_name(config: Any) -> str:
    """``memory.user``, else the login name (lower case; other characters become ``-``)."""
    raw = _setting(config, "memory.user")
    if not raw.strip():
        try:
            raw = getpass.getuser()
        except (KeyError, OSError):  # no login name (a container without a passwd entry)
            raw = "operator"
    return scope_name(raw) or "operator"


def user_scope(config: Any) -> str:
    return USER_PREFIX + user_name(config)


def team_scope(config: Any) -> str | None:
    team = scope_name(_setting(config, "memory.team"))
    return TEAM_PREFIX + team if team else None


def shared_table(config: Any) -> bool:
    return bool(_setting(config, "memory.uri").strip())


def personal_scopes(config: Any) -> tuple[str, ...]:
    """The scopes recall reads besides the agent's and ``global``."""
    team = team_scope(config)
    return (user_scope(config), *([team] if team else []))


def private_scope(config: Any | None) -> str:
    """Where what an operator's runs derive is written (captured precedents and query patterns,
    lessons from their failures, episodes): that operator's ``user:`` scope, on a local table as
    on a team table. Nothing a run derives reaches another operator's prompt until someone
    allowed to promotes it (``olav memory promote``)."""
    return user_scope(config if config is not None else {})


def scoped_id(memory_id: str, scope: str) -> str:
    """A content id made private to a ``user:`` scope, so two operators who capture the same
    operation each keep their own row (and one never overwrites the other's)."""
    if not scope.startswith(USER_PREFIX):
        return memory_id
    return f"{memory_id}_{hashlib.sha256(scope.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Reader:
    """Whose rows one operator may read: every scope but other operators' ``user:`` scopes,
    and, when a team is configured, other teams' ``team:`` scopes. A read takes it as a
    pre-filter (SQL for LanceDB, a mask for the in-process snapshot).

    :data:`EVERYONE` reads every scope: the library's own passes over the whole table (gc,
    capacity, exports and re-embedding, pattern extraction, the benchmarks), never a person's
    listing."""

    user: str  # the operator's own user: scope
    team: str | None  # the team's scope, when memory.team is set
    everyone: bool = False  # every scope (EVERYONE)

    @classmethod
    def of(cls, config: Any) -> Reader:
        return cls(user_scope(config), team_scope(config))

    @classmethod
    def owning(cls, scopes: Sequence[str]) -> Reader:
        """The operator whose own ``user:`` and ``team:`` scopes are those named in ``scopes``
        (recall's list): no other operator's or team's rows, and none at all of a private
        kind when ``scopes`` names none."""
        user = next((s for s in scopes if s.startswith(USER_PREFIX)), "")
        team = next((s for s in scopes if s.startswith(TEAM_PREFIX)), None)
        return cls(user, team)

    def allows(self, scope: str) -> bool:
        if self.everyone:
            return True
        if scope.startswith(USER_PREFIX):
            return scope == self.user
        if scope.startswith(TEAM_PREFIX) and self.team is not None:
            return scope == self.team
        return True

    def where(self) -> str:
        """:meth:`allows` as a LanceDB predicate over the ``scope`` column."""
        if self.everyone:
            return "true"
        mine = self.user.replace("'", "''")
        if self.team is None:
            return f"(scope NOT LIKE '{USER_PREFIX}%' OR scope = '{mine}')"
        theirs = self.team.replace("'", "''")
        return (
            f"((scope NOT LIKE '{USER_PREFIX}%' AND scope NOT LIKE '{TEAM_PREFIX}%')"
            f" OR scope = '{mine}' OR scope = '{theirs}')"
        )


EVERYONE = Reader("", None, everyone=True)
"""The reader of every scope (see :class:`Reader`)."""


def readable(config: Any, scope: str) -> bool:
    """Whether this operator may read a row of ``scope`` by its id or in a listing: the same
    rule recall applies, for every agent. Another operator's ``user:`` scope never; another
    team's ``team:`` scope not when a team is configured (memory.team); everything else
    (``global``, agent names, the operator's own scopes) yes."""
    return Reader.of(config).allows(scope)


def read_by_id(store: Any, config: Any, memory_id: str) -> Any:
    """The row ``memory_id`` if this operator may read it, else None: a row of another
    operator's (or team's) scope is reported as missing, so its existence is not revealed."""
    return store.read(memory_id, Reader.of(config))
