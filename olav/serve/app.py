"""The HTTP server: Starlette routes over one runtime (:mod:`.runs`), for the Agent Protocol
clients (langgraph-sdk, agent-chat-ui, LangGraph Studio) and OpenAI-compatible ones (the
``openai`` package, Open WebUI, LibreChat, Continue).

Every request but ``/ok`` needs an operator's token (``Authorization: Bearer …`` or the
``x-api-key`` header langgraph-sdk sends). The token's operator is the request's: their
threads, their runs, their private memories, nobody else's; a thread of another operator is
"not found", never "forbidden", so an id reveals nothing. Client mistakes get a 4xx JSON body
``{"detail": "..."}`` that names the problem, and what a client sends is bounded (ids,
metadata, limits, the body's size: :mod:`.http`); a 500 is olav's own bug, and even then the
connection stays usable (the token check, the console, the host check and the audit stand in
front of the routes: :mod:`.gate`). There is no CORS unless origins are given, and an
``OPTIONS`` without a token is answered only as a preflight from one of them. Every request
is audited (operator, route template, status, latency) by a background writer, so the audit
costs a request nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.core.log import get_logger
from olav.core.net import listen
from olav.serve.gate import crashed, guarded
from olav.serve.guard import SparseFilter, connection_cap, guarded_protocol, quiet_accept_errors
from olav.serve.http import MAX_ID, HTTPError, error_response, oai_error, shown
from olav.serve.limits import Sparse
from olav.serve.openapi import operations
from olav.serve.routing import Op
from olav.serve.runs import BusyError
from olav.serve.schema import read, read_query
from olav.serve.server import MAX_BODY, Server

log = get_logger("serve")
DEFAULT_PORT = 2280
GRACE_S = 5  # how long a stopping server waits for its open connections
BACKLOG = 1024  # connections the kernel holds before olav serve accepts them
SPARSE_S = 10.0  # the least time between two log lines of a kind a stranger can repeat
# the request headers a page on a --cors origin may send: the token's two headers, what the
# LangGraph SDKs add (agent-chat-ui's "Agent Builder" sends X-Auth-Scheme), reconnects
CORS_HEADERS = (
    "authorization",
    "content-type",
    "accept",
    "x-api-key",
    "x-auth-scheme",
    "x-request-id",
    "x-tenant-id",
    "x-user-id",
    "last-event-id",
    "langsmith-trace",
    "baggage",
)


def routes(server: Server) -> list[Route]:
    return [Route(op.path, _wrap(server, op), methods=[op.method]) for op in operations()]


def _wrap(server: Server, op: Op) -> Callable[[Request], Any]:
    handler = op.handler

    async def endpoint(request: Request) -> Response:
        """The route's handler on the request (an error it raises is answered by the app's
        exception handlers: :func:`create_app`)."""
        for name, value in request.path_params.items():
            if len(value) > MAX_ID:  # an id no store holds: said so, never looked up
                raise HTTPError(
                    422, f"{name} is {len(value)} characters long; the most is {MAX_ID}"
                )
        given: tuple[Any, ...] = (server, request, request.state.operator)
        if op.body is not None:
            given += (read(op.body, await server.body(request)),)
        if op.query is not None:
            given += (read_query(op.query, request.query_params),)
        if asyncio.iscoroutinefunction(handler):
            result = await handler(*given)
        else:  # off the event loop: a state read may build a session (a second or more)
            result = await anyio.to_thread.run_sync(handler, *given)
        return result if isinstance(result, Response) else JSONResponse(plain(result))

    return endpoint


def plain(answer: Any) -> Any:
    """An answer as JSON: a model with the fields it was given (a thread read without its
    values has none), a list of them, or JSON already."""
    if isinstance(answer, BaseModel):
        return answer.model_dump(mode="json", exclude_unset=True)
    if isinstance(answer, list):
        return [plain(item) for item in answer]
    return answer


def _shape(request: Request) -> Callable[..., Response]:
    """The error body of a route: OpenAI's under ``/v1`` (every OpenAI client shows its
    message), olav's ``{"detail": …}`` everywhere else."""
    return oai_error if request.url.path.startswith("/v1/") else error_response


def _status_of(exc: OlavError) -> int:
    from olav.memory.store.roles import WriteRefused
    from olav.runtime.threads import ThreadBusyError, ThreadNotFoundError

    if isinstance(exc, ThreadNotFoundError):
        return 404
    if isinstance(exc, WriteRefused):  # the token's role does not allow this write
        return 403
    if isinstance(exc, ThreadBusyError | BusyError):
        return 409
    return 422


def create_app(server: Server, *, cors: Sequence[str] = ()) -> Starlette:
    middleware = []
    if cors:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors),
                allow_methods=["GET", "POST", "PATCH", "DELETE", "PUT"],
                allow_headers=list(CORS_HEADERS),
                expose_headers=["location", "content-location", "x-pagination-total"],
            )
        )
    app = Starlette(routes=routes(server), middleware=middleware)
    app.state.cors = tuple(cors)

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        where = shown(request.url.path)
        if code == 405:
            return error_response(405, f"{shown(request.method, 20)} is not allowed on {where}")
        return error_response(code, f"no route {where}")

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_found)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPError)
        return _shape(request)(exc.status, exc.detail, headers=exc.headers)

    async def failed(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, OlavError)
        return _shape(request)(_status_of(exc), exc.one_line())

    async def bug(request: Request, exc: Exception) -> Response:
        # olav's own bug: Starlette sends this 500 and raises the error again, which the
        # gate's Audited layer ends (olav.serve.gate), so that the connection stays usable
        return crashed(request, exc)

    app.add_exception_handler(HTTPError, refused)
    app.add_exception_handler(OlavError, failed)
    app.add_exception_handler(Exception, bug)
    return app


class Listening:
    """A Server behind uvicorn on a socket that already listens: what `olav serve` runs, built
    apart from running it so that a test can serve the same wiring from a thread of its own
    (and stop it with :meth:`stop`, as a signal stops the process)."""

    def __init__(
        self,
        ws: Workspace,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        auto_approve: bool = False,
        cors: Sequence[str] = (),
        max_body: int = MAX_BODY,
        log_config: Any = "default",
    ) -> None:
        import uvicorn

        self.server = server = Server(ws, auto_approve=auto_approve, max_body=max_body)
        app = guarded(create_app(server, cors=cors), server, bound=host)
        self.sock = listen(host, port, backlog=BACKLOG)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.sock.getsockname()[1]}"
        logging: dict[str, Any] = {} if log_config == "default" else {"log_config": log_config}
        # what a stranger can open, or make the log say, is bounded (olav/serve/guard.py):
        # a head deadline and a connection cap below uvicorn's concurrency limit, and the
        # warnings and accept errors they could repeat at will said once every SPARSE_S
        limits = server.limits
        cap = connection_cap(limits.max_connections)
        self.sparse = sparse = Sparse(log, SPARSE_S)
        self.quiet = SparseFilter(sparse)
        config = uvicorn.Config(
            app,
            http=guarded_protocol(cap, limits.head_timeout_s, sparse),
            limit_concurrency=cap + 1,  # the cap makes room first; past it, only requests: 503
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACE_S,
            **logging,
        )

        class Stopping(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                quiet_accept_errors(asyncio.get_running_loop(), sparse)
                await super().startup(sockets=sockets)

            async def shutdown(self, sockets: Any = None) -> None:
                # the runs end first, their streams with them: uvicorn then waits for
                # connections that are closing, not for model calls
                server.runs.stop()
                await super().shutdown(sockets=sockets)
                # now, not after run() returns: on SIGTERM uvicorn raises the signal again as
                # it returns, and the process ends before a `finally` could flush the audit
                server.close()

        self.userver = Stopping(config)

    def run(self) -> None:
        """Serve until a signal (or :meth:`stop`) ends it."""
        import logging

        noisy = logging.getLogger("uvicorn.error")
        noisy.addFilter(self.quiet)
        try:
            self.userver.run(sockets=[self.sock])
        finally:
            noisy.removeFilter(self.quiet)
            self.server.close()
            self.sock.close()

    def stop(self) -> None:
        """End :meth:`run` as SIGTERM would: the runs stop, then the connections close."""
        self.userver.should_exit = True


def run_server(
    ws: Workspace,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    auto_approve: bool = False,
    cors: Sequence[str] = (),
    max_body: int = MAX_BODY,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until a signal ends it."""
    listening = Listening(
        ws, host=host, port=port, auto_approve=auto_approve, cors=cors, max_body=max_body
    )
    if on_ready is not None:
        on_ready(listening.url)
    else:
        print(f"olav serve: listening on {listening.url}", flush=True)
    listening.run()
