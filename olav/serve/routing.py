"""Each route of ``olav serve`` declared once: its method and path, the model its body is read
as, what it answers and which errors it may give. The app serves the declarations
(:mod:`.app`) and the document is made from them (:mod:`.openapi`), so a route cannot be
served without its entry in ``/openapi.json``, nor documented with a body other than the one
it reads.

A small decorator of olav's own, not FastAPI: olav's errors are one line naming the field
(``{"detail": "limit must be an integer from 1 to 1000"}``, OpenAI's shape under ``/v1``),
its handlers take the server and the request's operator, and its auth, audit and console sit
in front of every route as plain ASGI. FastAPI would bring its own 422 shape, dependency
injection and routing to undo; what olav needs of it is pydantic's models and their JSON
Schema, which it has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

Answered = Any  # a JSON value, or a starlette Response (a stream, a status without a body)
Handler = Callable[..., Answered | Awaitable[Answered]]


@dataclass(frozen=True)
class Reply:
    """One answer of a route: its description, and the type its JSON (``json``) or its
    server-sent events (``events``, each one's type) have; neither: no body."""

    description: str
    json: Any = None
    events: Any = None


@dataclass(frozen=True)
class Param:
    """A query or header parameter (path parameters are read from the path)."""

    name: str
    where: str  # "query" or "header"
    type: Any
    required: bool = False
    description: str = ""
    repeated: bool = False  # ?stream_mode=a&stream_mode=b


@dataclass(frozen=True)
class Op:
    method: str
    path: str
    handler: Handler
    summary: str
    replies: dict[int, Reply]
    errors: tuple[int, ...] = ()
    body: Any = None  # the pydantic model the JSON body is read as
    query: Any = None  # the pydantic model the query string is read as
    body_required: bool = False
    params: tuple[Param, ...] = ()
    openai: bool = False  # its errors have OpenAI's shape
    open: bool = False  # no token needed


@dataclass
class Routes:
    """A module's routes, declared with its handlers (``@API.post(...)``)."""

    ops: list[Op] = field(default_factory=list)

    def add(
        self, method: str, path: str, summary: str, ok: Reply | dict[int, Reply], **more: Any
    ) -> Callable[[Handler], Handler]:
        replies = ok if isinstance(ok, dict) else {200: ok}

        def declare(handler: Handler) -> Handler:
            self.ops.append(Op(method, path, handler, summary, replies, **more))
            return handler

        return declare

    def get(self, path: str, summary: str, ok: Any, **more: Any) -> Callable[[Handler], Handler]:
        return self.add("GET", path, summary, ok, **more)

    def post(self, path: str, summary: str, ok: Any, **more: Any) -> Callable[[Handler], Handler]:
        return self.add("POST", path, summary, ok, **more)

    def __iter__(self) -> Any:
        return iter(self.ops)
