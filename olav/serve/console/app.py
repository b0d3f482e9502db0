"""The console's routes and its guard: a logged-in session for every page, and for every POST
the session, its CSRF token and the console's own origin.

The server's request guard (:mod:`olav.serve.gate`) hands the console the requests
:func:`handles` names and checks a token on every other one: the session cookie never
authenticates an API route, so a page of another site cannot drive the API with it. A page's
JSON twin (``?format=json``) also takes an API token, for scripts; a POST never does, since a
Confirm must be a person's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Match, Route

from olav.core.errors import NotFoundError, OlavError
from olav.core.log import get_logger
from olav.memory.store.roles import WriteRefused
from olav.serve.console import chat, drafts, health, lessons, memory, memory_row, runs, why
from olav.serve.console.context import AfterRun, BadRequest, Ctx, Page, Redirect, Refused
from olav.serve.console.html import Markup, cards, h, join, page, url
from olav.serve.console.sessions import COOKIE, Sessions, cookie, csrf_ok, same_origin
from olav.serve.http import HTTPError, jsonsafe
from olav.serve.limits import Rate, TooMany
from olav.serve.server import Server

log = get_logger("serve.console")

STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
}
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
View = Callable[[Ctx], Any]


def _best_match(routes: Any, scope: Any) -> Match:
    """How well the best of ``routes`` matches the request: FULL (path and method), PARTIAL
    (the path, another method) or NONE; a scope no route can read matches none."""
    best = Match.NONE
    for route in routes:
        try:
            match, _ = route.matches(scope)
        except Exception:  # a scope no route can read
            continue
        if match is Match.FULL:
            return match
        if match is Match.PARTIAL:
            best = match
    return best


class Console:
    """The console as an ASGI app over one :class:`~olav.serve.server.Server`."""

    def __init__(self, server: Server) -> None:
        self.server = server
        limits = server.limits
        self.sessions = Sessions(server.tokens, per_operator=limits.sessions_per_operator)
        self.logins = Rate(limits.logins_per_minute, what="logins", key_name="address")
        self.app = Starlette(routes=self._routes())
        self.app.add_exception_handler(404, self._not_found)
        self.app.add_exception_handler(405, self._not_found)
        self.app.add_exception_handler(Exception, self._crashed)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers + HEADERS}
            await send(message)

        await self.app(scope, receive, sending)

    def handles(self, scope: Any) -> bool:
        """Whether a request is one of the console's routes, path and method (else it is
        the API's, and needs a token): the routes below are the one list of its pages and
        buttons. ``POST /runs/stream`` and every other API route stay the API's."""
        return _best_match(self.app.routes, scope) is Match.FULL

    def claims(self, scope: Any, api_routes: Any) -> bool:
        """Whether a request :meth:`handles` does not name is the console's all the same: a
        GET for a path no API route has, from a browser logged in to the console (its
        session cookie, no API token). The console answers it with its Not found page; a
        stranger, a script with a token, and every API path keep the API's JSON answers."""
        if scope.get("method") not in ("GET", "HEAD"):
            return False
        request = Request(scope)
        if _has_token(request) or self._session(request) is None:
            return False
        return _best_match(api_routes, scope) is Match.NONE

    def live_check(self, scope: Any) -> Callable[[], bool]:
        """Whether the request's session is still live (its token not revoked), asked while
        a stream of it (the chat's) is open; no session: nothing to end."""
        session_id = Request(scope).cookies.get(COOKIE)
        return lambda: not session_id or self.sessions.get(session_id) is not None

    def _routes(self) -> list[Route]:
        return [
            Route("/", self._page(dashboard), methods=["GET"]),
            Route("/login", self._login_form, methods=["GET"]),
            Route("/login", self._login, methods=["POST"]),
            Route("/logout", self._logout, methods=["POST"]),
            Route("/static/{name}", self._static, methods=["GET"]),
            Route("/memory", self._page(memory.memory_page), methods=["GET"]),
            Route("/memory/{memory_id}", self._page(memory_row.memory_row_page), methods=["GET"]),
            Route("/memory/{memory_id}/pin", self._action(memory_row.pin_action), methods=["POST"]),
            Route(
                "/memory/{memory_id}/delete",
                self._action(memory_row.delete_action),
                methods=["POST"],
            ),
            Route(
                "/memory/{memory_id}/edit", self._action(memory_row.edit_action), methods=["POST"]
            ),
            Route(
                "/memory/{memory_id}/quarantine",
                self._action(memory_row.quarantine_action),
                methods=["POST"],
            ),
            Route(
                "/memory/{memory_id}/release",
                self._action(memory_row.release_action),
                methods=["POST"],
            ),
            Route("/runs", self._page(runs.runs_page), methods=["GET"]),
            Route("/runs/{run_id}", self._page(runs.run_page), methods=["GET"]),
            Route("/drafts", self._page(drafts.drafts_page), methods=["GET"]),
            Route("/why", self._page(why.why_page), methods=["GET"]),
            Route("/lessons", self._page(lessons.lessons_page), methods=["GET"]),
            Route("/health", self._page(health.health_page), methods=["GET"]),
            Route("/chat", self._page(chat.chat_page), methods=["GET"]),
            Route("/chat/send", self._action(chat.send_action), methods=["POST"]),
            Route("/chat/answer", self._action(chat.answer_action), methods=["POST"]),
            Route("/drafts/keyword", self._action(lessons.keyword_action), methods=["POST"]),
            Route(
                "/drafts/{draft_id}/confirm", self._action(drafts.confirm_action), methods=["POST"]
            ),
            Route(
                "/drafts/{draft_id}/reject", self._action(drafts.reject_action), methods=["POST"]
            ),
        ]

    # -- who is asking ------------------------------------------------------------------------

    def _session(self, request: Request) -> Any:
        return self.sessions.get(request.cookies.get(COOKIE))

    def _page(self, view: View) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            wants_json = request.query_params.get("format") == "json"
            session = self._session(request)
            operator = session.operator if session is not None else ""
            if session is None and _has_token(request):
                try:  # a script's API token, for the JSON twin (never for a POST)
                    operator = self.server.operator_of(request)
                except HTTPError as exc:
                    return JSONResponse({"detail": exc.detail}, status_code=exc.status)
                except OlavError as exc:  # tokens.json unreadable: nobody can be checked
                    return JSONResponse({"detail": exc.one_line()}, status_code=503)
            if not operator:
                if wants_json:
                    return JSONResponse({"detail": "log in first: POST /login"}, status_code=401)
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(url("/login", {"next": target}), status_code=303)
            request.state.operator = operator
            ctx = Ctx(
                self.server,
                operator,
                session,
                dict(request.query_params),
                dict(request.path_params),
                wants_json=wants_json,
            )
            return await self._render(view, ctx)

        return endpoint

    def _action(self, view: View) -> Callable[[Request], Any]:
        """A POST that changes something: a live session, the console's origin, the
        session's CSRF token; anything missing or wrong is 403 and changes nothing."""

        async def endpoint(request: Request) -> Response:
            session = self._session(request)
            if session is None:
                return self._refused("log in first: this button needs a console session")
            request.state.operator = session.operator
            if not same_origin(request.headers, request.url.scheme):
                return self._refused("the request did not come from this console's pages")
            form = await self._form(request)
            if not csrf_ok(session, form.get("csrf")):
                return self._refused("the form's CSRF token is missing or wrong; reload the page")
            ctx = Ctx(
                self.server,
                session.operator,
                session,
                form,
                dict(request.path_params),
                wants_json=form.get("format") == "json",  # errors as JSON, for a script's fetch
            )
            return await self._render(view, ctx)

        return endpoint

    async def _form(self, request: Request) -> dict[str, str]:
        """A urlencoded form body, at most the server's body limit."""
        raw = bytearray()
        async for chunk in request.stream():
            raw.extend(chunk)
            if len(raw) > self.server.max_body:
                break
        if len(raw) > self.server.max_body:
            return {}
        fields = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
        return {k: v[0] for k, v in fields.items() if v}

    # -- rendering ----------------------------------------------------------------------------

    async def _render(self, view: View, ctx: Ctx) -> Response:
        try:
            result = await anyio.to_thread.run_sync(view, ctx)
        except NotFoundError as exc:
            return self._error(ctx, 404, "Not found", exc.one_line())
        except (Refused, WriteRefused) as exc:  # WriteRefused: the token's role (roles.py)
            return self._error(ctx, 403, "Refused", exc.one_line())
        except BadRequest as exc:
            return self._error(ctx, 400, "Bad request", exc.one_line())
        except OlavError as exc:
            return self._error(ctx, 422, "That did not work", exc.one_line())
        except HTTPError as exc:  # the run machinery's refusals (a busy thread: 409, 429)
            return self._error(ctx, exc.status, "That did not work", exc.detail, exc.headers)
        if isinstance(result, Response):  # a view's own answer (the chat's stream)
            return result
        if isinstance(result, AfterRun):  # a form without JavaScript: back once its run ended
            with anyio.move_on_after(result.wait_s):
                await result.run.ended()
            result = Redirect(result.location)
        if isinstance(result, Redirect):
            if result.flash and ctx.session is not None:
                ctx.session.flash.append(result.flash)
            return RedirectResponse(result.location, status_code=303)
        if ctx.wants_json:
            return JSONResponse(jsonsafe(result.data), status_code=result.status)
        return self._html(ctx, result)

    def _html(self, ctx: Ctx, result: Page) -> HTMLResponse:
        notes = ctx.session.take_flash() if ctx.session is not None else []
        text = page(
            result.title,
            result.body,
            operator=ctx.operator,
            csrf=ctx.csrf,
            active=result.active,
            flash=notes,
        )
        return HTMLResponse(text, status_code=result.status)

    def _error(
        self, ctx: Ctx, status: int, title: str, detail: str, headers: Any = None
    ) -> Response:
        if ctx.wants_json:
            return JSONResponse({"detail": detail}, status_code=status, headers=headers)
        body = h('<p class="error" role="alert">{}</p><p><a href="/">Back</a></p>', detail)
        response = self._html(ctx, Page(title, body, None, status=status))
        response.headers.update(headers or {})
        return response

    def _refused(self, detail: str) -> HTMLResponse:
        body = h(
            '<p class="error" role="alert">Refused: {}.</p><p><a href="/">Back</a></p>', detail
        )
        return HTMLResponse(page("Refused", body), status_code=403)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        what = "Not allowed" if code == 405 else "Not found"
        body = h(
            '<p class="error" role="alert">{} {}: the console has no such page.</p>'
            '<p><a href="/">Back to the dashboard</a></p>',
            request.method,
            request.url.path,
        )
        session = self._session(request)  # logged in: the page keeps its navigation
        if session is not None:
            request.state.operator = session.operator
            text = page(what, body, operator=session.operator, csrf=session.csrf)
        else:
            text = page(what, body)
        return HTMLResponse(text, status_code=code)

    async def _crashed(self, request: Request, exc: Exception) -> Response:
        log.exception("console %s %s failed", request.method, request.url.path)
        body = h('<p class="error" role="alert">internal error: {}</p>', type(exc).__name__)
        return HTMLResponse(page("Error", body), status_code=500)

    # -- login, logout, files -----------------------------------------------------------------

    async def _login_form(self, request: Request) -> Response:
        if self._session(request) is not None:
            return RedirectResponse("/", status_code=303)
        return _login_page(_safe_next(request.query_params.get("next")))

    async def _login(self, request: Request) -> Response:
        if not same_origin(request.headers, request.url.scheme):
            return self._refused("the login did not come from this console's login page")
        form = await self._form(request)
        target = _safe_next(form.get("next"))
        try:  # per client address: a token cannot be guessed, nor the table churned, at speed
            self.logins.take(request.client.host if request.client else "")
        except TooMany as exc:
            refused = _login_page(target, exc.one_line(), status=429)
            refused.headers["Retry-After"] = str(exc.retry_after)
            return refused
        try:
            opened = await anyio.to_thread.run_sync(self.sessions.login, form.get("token", ""))
        except OlavError as exc:  # tokens.json unreadable: nobody can be checked
            return _login_page(target, exc.one_line(), status=503)
        if opened is None:
            return _login_page(target, "That token is not valid, or it was revoked.", status=401)
        session_id, session = opened
        request.state.operator = session.operator
        response = RedirectResponse(target, status_code=303)
        secure = request.url.scheme == "https"
        response.headers.append("set-cookie", cookie(session_id, secure=secure))
        return response

    async def _logout(self, request: Request) -> Response:
        session_id = request.cookies.get(COOKIE)
        session = self.sessions.get(session_id)
        if session is not None:
            request.state.operator = session.operator
            form = await self._form(request)
            if not same_origin(request.headers, request.url.scheme) or not csrf_ok(
                session, form.get("csrf")
            ):
                return self._refused("the logout did not come from this console's pages")
            self.sessions.end(session_id)
        response = RedirectResponse("/login", status_code=303)
        response.headers.append("set-cookie", cookie("", secure=False, max_age=0))
        return response

    async def _static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return await self._not_found(request, NotFoundError(name))
        return Response(
            _static_file(name),
            media_type=STATIC[name],
            headers={"cache-control": "max-age=300"},
        )


def _has_token(request: Request) -> bool:
    return bool(request.headers.get("authorization") or request.headers.get("x-api-key"))


def _safe_next(target: str | None) -> str:
    """Where to go after the login: a path of this server, never another site."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


@cache
def _static_file(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _login_page(target: str, error: str = "", *, status: int = 200) -> HTMLResponse:
    note = h('<p class="error" role="alert">{}</p>', error) if error else Markup("")
    body = h(
        '<div class="login">{}'
        '<p class="lead">Log in with your operator token (<code>olav serve token create '
        "NAME</code> prints one). The browser keeps a session cookie, never the token.</p>"
        '<form method="post" action="/login">'
        '<input type="hidden" name="next" value="{}">'
        '<label for="token">Token</label>'
        '<input id="token" name="token" type="password" autocomplete="off" required autofocus '
        'placeholder="olav_…">'
        '<button type="submit" class="primary">Log in</button></form></div>',
        note,
        target,
    )
    return HTMLResponse(page("Log in", body), status_code=status)


# -- the dashboard ------------------------------------------------------------------------------


def dashboard(ctx: Ctx) -> Page:
    counts = {
        "memory": memory.count_readable(ctx),
        "runs": runs.count_visible(ctx),
        "drafts": drafts.count_visible(ctx),
    }
    latest = runs.recent(ctx, 5)
    body = join(
        [
            cards(
                [
                    ("/memory", counts["memory"], "live memories you may read"),
                    ("/runs", counts["runs"], "runs of yours in the audit"),
                    ("/drafts", counts["drafts"], "drafts waiting for your decision"),
                ]
            ),
            runs.whose_runs(ctx) if not counts["runs"] else Markup(""),
            Markup("<h2>Latest runs</h2>"),
            runs.runs_table(latest),
        ]
    )
    data = {"operator": ctx.operator, "counts": counts, "latest_runs": [r.id for r in latest]}
    return Page("Dashboard", body, data, active="/")
