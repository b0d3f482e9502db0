"""Who may write which memory: the one rule every write path asks (issue 52's "roles").

Three roles:

- ``owner``: the person at the workspace's terminal (``olav``, ``olav kb``, ``olav memory``,
  ``olav mcp``, the cron jobs). Whoever can run those can edit ``.olav/`` anyway.
- ``admin``: an ``olav serve`` token made with ``olav serve token create --admin``.
- ``operator``: any other ``olav serve`` token (the default).

An owner or admin may write shared memory: guides, ``global``, an agent's scope, a team's
scope. An operator writes only their own ``user:<name>`` scope, on every path (a run's draft and
its commit, the console, the store API); a guide (a YAML file in an agent's folder, imported
for everyone) is never an operator's. Nobody writes another operator's ``user:`` scope.

The role travels in the configuration an operator's session is built on (:data:`ROLE_KEY`,
set by ``olav serve``; ``olav.yaml`` cannot name it, an unknown key there is refused), so a
tool the model calls in a run is judged by the same rule as the route that started the run.
A configuration without it is the owner's: only the server sets a role, and it always does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from olav.core.errors import OlavError
from olav.memory.store.scopes import USER_PREFIX, user_name

OWNER = "owner"
ADMIN = "admin"
OPERATOR = "operator"
TOKEN_ROLES = (OPERATOR, ADMIN)  # what a token may hold; the owner is nobody's token
ROLE_KEY = "serve.role"
GUIDE_KINDS = ("usage_guide", "format_guide")  # drafts of these are written as guide files


class Operator(str):
    """An operator's name as the routes pass it, with the role of the token it came with
    (``role``). It is the name everywhere a name is used; the role decides what they may write
    (olav.memory.store.roles). A plain string where an Operator is expected is an operator
    without privileges: losing the role never grants one."""

    role: str

    def __new__(cls, name: str, role: str = OPERATOR) -> Operator:
        made = super().__new__(cls, name)
        made.role = role if role in TOKEN_ROLES else OPERATOR
        return made


class WriteRefused(OlavError):
    """A write into memory that the author's role does not allow."""


def role_of(config: Any) -> str:
    """The role a configuration was built for (:data:`ROLE_KEY`; absent: the owner)."""
    try:
        role = config[ROLE_KEY]
    except (KeyError, TypeError):
        return OWNER
    return str(role) if role in (OWNER, ADMIN, OPERATOR) else OPERATOR


@dataclass(frozen=True)
class Author:
    """Who writes: the operator's name (as scopes spell it) and their role."""

    name: str
    role: str = OPERATOR

    @classmethod
    def of(cls, config: Any) -> Author:
        return cls(user_name(config), role_of(config))

    @property
    def shares(self) -> bool:
        """Whether this author may write shared memory."""
        return self.role in (OWNER, ADMIN)

    @property
    def own_scope(self) -> str:
        return USER_PREFIX + self.name

    def refusal(self, scope: str, category: str = "") -> str | None:
        """Why this author may not write a ``category`` row (or draft) in ``scope``; None
        when they may."""
        if category in GUIDE_KINDS and not self.shares:
            return (
                f"a {category} is a guide, shared with every operator: only an admin or the "
                f"workspace's owner writes one. Propose it in your own scope {self.own_scope} "
                "as a fact or preference, or ask an admin"
            )
        if scope == self.own_scope:
            return None
        if scope.startswith(USER_PREFIX):
            return f"scope {scope} is another operator's private memory"
        if not self.shares:
            return (
                f"scope {scope} is shared memory, which an operator cannot write: use your own "
                f"scope {self.own_scope}, or ask an admin (`olav serve token create --admin`)"
            )
        return None

    def default_scope(self, scope: str | None, agent: str) -> str:
        """The scope a draft that names none goes to: an operator's own; for the owner and an
        admin, ``global`` (the core agent) or the agent's."""
        if scope and scope.strip():
            return scope.strip()
        if not self.shares:
            return self.own_scope
        return "global" if agent == "core" else agent

    def sees_draft(self, data: Mapping[str, Any]) -> bool:
        """Whether this author may see (and so confirm or reject) a draft: their own (its
        ``author``, or the ``operator`` of a store API put). One that names nobody was made at
        the workspace's terminal (``olav``, ``olav mcp``): the owner's and an admin's to decide
        on, unless it is in another operator's private scope."""
        made_by = data.get("author") or data.get("operator")
        if made_by:
            return bool(made_by == self.name)
        scope = str(data.get("scope") or "")
        return self.shares and (not scope.startswith(USER_PREFIX) or scope == self.own_scope)

    def check(self, scope: str, category: str = "", what: str = "this memory") -> None:
        """Raise :class:`WriteRefused` when :meth:`refusal` says no."""
        why = self.refusal(scope, category)
        if why:
            raise WriteRefused(
                f"{self.name} cannot write {what}: {why}",
                hint="Only an admin token (`olav serve token create --admin`) or the "
                "workspace's owner at its terminal writes shared memory",
            )
