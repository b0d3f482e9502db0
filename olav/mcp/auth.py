"""Who is calling ``olav mcp --http``: the bearer token, and the memory its operator may see.

Over HTTP any process on the machine can open a socket, so every request carries a token, as
MCP's authorization rules have it (a bearer token in ``Authorization``; without one, or with a
token that is not live, a 401 with ``WWW-Authenticate: Bearer``, and the protected-resource
metadata at ``/.well-known/oauth-protected-resource/mcp``). The tokens are ``olav serve``'s
(``olav serve token create NAME``): one list of who may reach the workspace, one revoke.

A token names its operator and role, and a session acts as them: recall reads their private
scope and the shared ones, and writes land where their role lets them (olav.memory.store.roles).
The SDK binds a session to the principal that opened it, so a token cannot borrow another's
session. Stdio needs none of this: the process is the workspace owner's.
"""

from __future__ import annotations

import threading
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from olav.access.tokens import TokenFileError, TokenStore
from olav.core.config import Workspace
from olav.core.log import get_logger
from olav.mcp.service import MemoryService, check_agent
from olav.memory.store.roles import OPERATOR, Operator
from olav.serve.pool import operator_workspace

log = get_logger("mcp.auth")
SCOPE = "olav:memory"  # the one scope a live token carries


class ServeTokens:
    """MCP's ``TokenVerifier`` over the workspace's ``olav serve`` tokens."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        import anyio.to_thread

        try:
            info = await anyio.to_thread.run_sync(self.store.verify, token)
        except TokenFileError as exc:  # no token can be checked: refuse, and say why
            log.error("%s", exc.one_line())
            return None
        if info is None:
            return None
        return AccessToken(
            token=token,
            client_id=info.id,
            subject=info.operator,
            scopes=[SCOPE],
            claims={"role": info.role},
        )


def auth_settings(url: str) -> AuthSettings:
    """The resource-server settings for the MCP endpoint at ``url``: olav issues its own tokens
    (``olav serve token create``), so the issuer is the server itself."""
    origin = url.split("/mcp", 1)[0]
    # validate_token_resource off: the tokens are this workspace's own, checked by ServeTokens
    return AuthSettings(
        issuer_url=AnyHttpUrl(origin),
        resource_server_url=AnyHttpUrl(url),
        required_scopes=[SCOPE],
        validate_token_resource=False,
    )


class Operators:
    """The MemoryService of the operator whose token opened the current session, opened once
    per operator and role. Attribute access goes to it, so the tools and the audit built over
    one service serve every operator, each as themselves."""

    def __init__(self, ws: Workspace, *, agent: str, tier: str) -> None:
        self._ws, self._agent, self._tier = ws, agent, tier
        self._open: dict[tuple[str, str], MemoryService] = {}
        self._lock = threading.Lock()
        check_agent(ws, agent)  # an unknown agent fails at start, not at the first call

    def current(self) -> MemoryService:
        token = get_access_token()
        if token is None or not token.subject:
            raise PermissionError("no token on this MCP session")  # RequireAuth stops it first
        role = str((token.claims or {}).get("role") or OPERATOR)
        key = (token.subject, role)
        with self._lock:
            svc = self._open.get(key)
            if svc is None:
                view = operator_workspace(self._ws, Operator(*key))
                svc = MemoryService.open(view, agent=self._agent, tier=self._tier)
                self._open[key] = svc
        return svc

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current(), name)
