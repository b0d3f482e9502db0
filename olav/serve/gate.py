"""What stands in front of every route of ``olav serve``, one plain ASGI layer per job (pure
ASGI: streams pass through), composed by :func:`guarded`, outermost first:

- :class:`Audited`: the request's audit row (operator, route template, status, latency), and
  a 500 for olav's own bug that keeps the connection usable;
- :class:`HostChecked`: a request whose Host names another server is refused (DNS rebinding);
- :class:`ConsoleFirst`: the web console's requests go to the console (its own session
  cookie, never a token), every other one to the API;
- :class:`TokenChecked`: the API's requests need a live token, whose operator the request is;
  a stream ends soon after its token is revoked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Match

from olav.core.errors import OlavError
from olav.core.log import get_logger
from olav.memory.store.roles import Operator
from olav.serve.guard import host_refusal, until_revoked
from olav.serve.http import HTTPError, error_response, oai_error, shown
from olav.serve.server import Server

log = get_logger("serve")
OPEN_PATHS = {"/ok"}
NO_ROUTE = "(no route)"  # the audit's route for a path no route matches, before a short prefix
REVOKED_S = 1.0  # how often an open stream asks whether its token (or session) is still live


def crashed(request: Request, exc: Exception) -> JSONResponse:
    log.exception("request %s %s failed", request.method, shown(request.url.path))
    return error_response(500, f"internal error: {type(exc).__name__}")


class Audited:
    """The audit row of every request, written by a background writer (so it costs the
    request nothing), and the 500 of an error no route caught."""

    def __init__(self, app: Any, server: Server, tables: Sequence[Sequence[Any]]) -> None:
        self.app, self.server, self.tables = app, server, tables

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: dict[str, Any] = {"code": 500, "started": False, "sent": False}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["started"] = message["status"], True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                status["sent"] = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            # Starlette answers an unhandled error with its 500 and raises it again, and
            # uvicorn closes a connection whose request raised: the client's next request on
            # it would be reset. A 500 sent whole ends here; one never started is sent now;
            # only a response cut off mid-way (a stream) still closes the connection.
            if not status["started"]:
                await crashed(Request(scope, receive), exc)(scope, receive, sending)
            elif not status["sent"]:
                raise
        finally:
            self.server.audit.record(
                {
                    "operator": scope.get("state", {}).get("operator", ""),
                    "method": scope.get("method", ""),
                    "route": route_name(scope, self.tables),
                    "status": status["code"],
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                }
            )


class HostChecked:
    """DNS rebinding: a page of another name must not reach this server (421)."""

    def __init__(self, app: Any, server: Server, bound: str) -> None:
        self.app, self.server, self.bound = app, server, bound

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refusal = host_refusal(scope, self.bound, self.server.limits.allowed_hosts)
        if refusal and scope["type"] == "http":
            await error_response(421, refusal)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ConsoleFirst:
    """The console's own routes, and a logged-in browser's GET of a path no API route has,
    go to the console; a stream of it ends soon after its session does."""

    def __init__(self, app: Any, console: Any, api_routes: Sequence[Any]) -> None:
        self.app, self.console, self.api_routes = app, console, api_routes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (
            self.console.handles(scope) or self.console.claims(scope, self.api_routes)
        ):
            live = self.console.live_check(scope)
            await until_revoked(self.console, scope, receive, send, live, every_s=REVOKED_S)
            return
        await self.app(scope, receive, send)


class TokenChecked:
    """Every API request but ``/ok`` (and a CORS preflight from an allowed origin) needs a
    live token: its operator is the request's (``scope["state"]["operator"]``)."""

    def __init__(self, app: Any, server: Server) -> None:
        self.app, self.server = app, server
        self.cors = tuple(getattr(getattr(app, "state", None), "cors", ()))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        state = scope.setdefault("state", {})
        state["operator"] = ""
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS or self.preflight(scope):
            await self.app(scope, receive, send)
            return
        shape = oai_error if scope.get("path", "").startswith("/v1/") else error_response
        try:
            token = self.server.token_of(Request(scope, receive))
        except HTTPError as exc:
            await shape(exc.status, exc.detail, headers=exc.headers)(scope, receive, send)
            return
        except OlavError as exc:  # tokens.json unreadable: nobody can be checked
            await shape(503, exc.one_line())(scope, receive, send)
            return
        state["operator"] = Operator(token.operator, token.role)

        def live() -> bool:
            return self.server.token_live(token.id)

        await until_revoked(self.app, scope, receive, send, live, every_s=REVOKED_S)

    def preflight(self, scope: Any) -> bool:
        """Whether an ``OPTIONS`` is a CORS preflight from an origin ``--cors`` allows: the only
        request but ``/ok`` that needs no token (a browser sends none with it). Any other
        ``OPTIONS`` needs one, or it would tell a stranger which routes there are."""
        if scope.get("method") != "OPTIONS" or not self.cors:
            return False
        headers = Request(scope).headers
        origin, asked = headers.get("origin"), headers.get("access-control-request-method")
        return bool(origin and asked) and (origin in self.cors or "*" in self.cors)


def guarded(app: Any, server: Server, *, bound: str = "127.0.0.1") -> Audited:
    """``app`` (the API) behind the gate, the server's console beside it."""
    from olav.serve.console import Console

    console = Console(server)
    routes = getattr(app, "routes", [])
    front = ConsoleFirst(TokenChecked(app, server), console, routes)
    return Audited(HostChecked(front, server, bound), server, [routes, console.app.routes])


def route_name(scope: Any, tables: Sequence[Sequence[Any]] = ()) -> str:
    """The audit's route: the template of the route that answered, or of the one the path
    matches when none did (a request refused for its token); else ``(no route)`` and a short
    prefix of the path. Never the whole path: ids stay out of the audit, and a path can be
    megabytes long."""
    route = scope.get("route")
    template = getattr(route, "path", "")
    if isinstance(template, str) and template:
        return template
    for table in tables:
        for candidate in table:
            try:
                match, _ = candidate.matches(scope)
            except Exception:  # a scope no route can read: no route
                continue
            if match is not Match.NONE:
                return str(candidate.path)
    return f"{NO_ROUTE} {shown(str(scope.get('path', '')), 48)}"
