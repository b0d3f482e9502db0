"""Whose memory is whose: ``user:<name>`` (one operator's, private) and ``team:<name>``.

On a team table (``memory.uri``), what the learning loop writes (captured precedents and
lessons) lands in the operator's ``user:`` scope first; promoting a row to the team scope is a
draft a person confirms (``olav memory promote``). Recall reads the agent's scope, ``global``,
the operator's own ``user:`` scope and the team's scope, as a LanceDB pre-filter, so another
operator's private rows never reach it. A local workspace has one operator, and its writes keep
the scopes they always had.
"""

from __future__ import annotations

import getpass
import hashlib
import re
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


def _name(raw: str) -> str:
    return _NAME.sub("-", raw.strip().lower()).strip("-")


def user_name(config: Any) -> str:
    """``memory.user``, else the login name (lower case; other characters become ``-``)."""
    raw = _setting(config, "memory.user")
    if not raw.strip():
        try:
            raw = getpass.getuser()
        except (KeyError, OSError):  # no login name (a container without a passwd entry)
            raw = "operator"
    return _name(raw) or "operator"


def user_scope(config: Any) -> str:
    return USER_PREFIX + user_name(config)


def team_scope(config: Any) -> str | None:
    team = _name(_setting(config, "memory.team"))
    return TEAM_PREFIX + team if team else None


def shared_table(config: Any) -> bool:
    return bool(_setting(config, "memory.uri").strip())


def personal_scopes(config: Any) -> tuple[str, ...]:
    """The scopes recall reads besides the agent's and ``global``."""
    team = team_scope(config)
    return (user_scope(config), *([team] if team else []))


def private_scope(config: Any | None) -> str | None:
    """Where captured precedents and lessons are written on a team table: the operator's
    ``user:`` scope. None on a local table (they keep their usual scopes)."""
    if config is None or not shared_table(config):
        return None
    return user_scope(config)


def scoped_id(memory_id: str, scope: str) -> str:
    """A content id made private to a ``user:`` scope, so two operators who capture the same
    operation each keep their own row (and one never overwrites the other's)."""
    if not scope.startswith(USER_PREFIX):
        return memory_id
    return f"{memory_id}_{hashlib.sha256(scope.encode()).hexdigest()[:8]}"


def hide_others(config: Any) -> str | None:
    """On a team table, the predicate that hides other operators' ``user:`` rows from
    listings and searches (a pre-filter); None on a local table."""
    if not shared_table(config):
        return None
    mine = user_scope(config).replace("'", "''")
    return f"(scope NOT LIKE '{USER_PREFIX}%' OR scope = '{mine}')"


def allowed_scope(config: Any, scope: str) -> bool:
    """Whether an explicitly requested scope may be read: anything but another operator's."""
    return not scope.startswith(USER_PREFIX) or scope == user_scope(config)
