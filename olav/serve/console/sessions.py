"""Who is logged in to the console, and the checks a form that changes something passes.

A person logs in with an operator's token (the API's :class:`~olav.access.tokens.TokenStore`).
The browser then holds a random session id in an HttpOnly, SameSite=Strict cookie; the token
itself is never in the cookie and never in a page. The server keeps, per session, the
operator, the token it was opened with (a revoked token ends its sessions at the next request),
a CSRF token, and its expiry (12 hours after the login). Sessions live in the server's memory:
a restart logs everyone out. An operator holds at most ``per_operator`` sessions: a new login
ends their own oldest, never another operator's (``serve.sessions_per_operator``).

A state-changing request (every console POST) must carry the session's CSRF token in its form
(compared in constant time) and come from the console's own origin (``Origin``, else
``Referer``): a page of another site can neither read the token nor pass the origin check.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from olav.core.errors import OlavError
from olav.memory.store.roles import Operator

COOKIE = "olav_console"
SESSION_S = 12 * 3600
MAX_SESSIONS = 10_000  # beyond this, the oldest of whoever holds the most go first
PER_OPERATOR = 20


@dataclass
class ConsoleSession:
    operator: str
    token_id: str
    csrf: str
    expires: float
    flash: list[str] = field(default_factory=list)  # one-time notes for the next page

    def take_flash(self) -> list[str]:
        notes, self.flash = self.flash, []
        return notes


def _key(session_id: str) -> str:
    """Sessions are kept under a hash of their id: the table never holds a usable cookie."""
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """The console's sessions (thread-safe)."""

    def __init__(
        self, tokens: Any, *, ttl: float = SESSION_S, per_operator: int = PER_OPERATOR
    ) -> None:
        self.tokens = tokens
        self.ttl = ttl
        self.per_operator = per_operator
        self._by_key: dict[str, ConsoleSession] = {}
        self._lock = threading.Lock()

    def login(self, presented: str) -> tuple[str, ConsoleSession] | None:
        """A new session for a live token: (the cookie's session id, the session); None for a
        wrong or revoked token."""
        info = self.tokens.verify(presented.strip())
        if info is None:
            return None
        session_id = secrets.token_urlsafe(32)
        session = ConsoleSession(
            operator=Operator(info.operator, info.role),  # the name, with its role
            token_id=str(info.id),
            csrf=secrets.token_urlsafe(32),
            expires=time.time() + self.ttl,
        )
        with self._lock:
            self._prune(str(session.operator))
            self._by_key[_key(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> ConsoleSession | None:
        """The live session of this cookie value, or None (expired, logged out, unknown, or
        its token revoked since)."""
        if not session_id or len(session_id) > 128:
            return None
        key = _key(session_id)
        with self._lock:
            session = self._by_key.get(key)
            if session is not None and session.expires <= time.time():
                del self._by_key[key]
                session = None
        if session is None or not self._token_live(session.token_id):
            if session is not None:
                self.end(session_id)
            return None
        return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._by_key.pop(_key(session_id), None)

    def _token_live(self, token_id: str) -> bool:
        try:
            return bool(self.tokens.find(token_id).live)
        except OlavError:  # gone from tokens.json, or the file is unreadable: nobody is checked
            return False

    def of(self, operator: str) -> int:
        """How many sessions ``operator`` holds."""
        with self._lock:
            return sum(1 for s in self._by_key.values() if s.operator == operator)

    def _prune(self, operator: str) -> None:
        """Room for one more session of ``operator``'s: the expired go, then their own oldest
        past ``per_operator``; past MAX_SESSIONS in all, the oldest of whoever holds the
        most (the dict keeps the order of the logins)."""
        now = time.time()
        for key in [k for k, s in self._by_key.items() if s.expires <= now]:
            del self._by_key[key]
        mine = [k for k, s in self._by_key.items() if s.operator == operator]
        for key in mine[: max(0, len(mine) - self.per_operator + 1)]:
            del self._by_key[key]
        while len(self._by_key) >= MAX_SESSIONS:
            held = Counter(str(s.operator) for s in self._by_key.values())
            most = held.most_common(1)[0][0]
            del self._by_key[next(k for k, s in self._by_key.items() if s.operator == most)]


def csrf_ok(session: ConsoleSession, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(session.csrf, str(presented))


def same_origin(headers: Any, scheme: str) -> bool:
    """Whether the request comes from a page of this server: its ``Origin`` (else its
    ``Referer``) names the scheme and host the request was sent to. Neither header: no."""
    host = str(headers.get("host", "")).lower()
    origin = headers.get("origin")
    if origin and origin != "null":
        parts = urlsplit(origin)
    else:
        referer = headers.get("referer")
        if not referer:
            return False
        parts = urlsplit(referer)
    return bool(host) and parts.scheme == scheme and parts.netloc.lower() == host


def cookie(session_id: str, *, secure: bool, max_age: int = SESSION_S) -> str:
    """The Set-Cookie value of a session (an empty id with max_age 0 clears it)."""
    value = f"{COOKIE}={session_id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"
    return value + ("; Secure" if secure else "")
