"""What ``olav serve`` does below its routes so that no client, with a token or without one,
can take the server from the others:

- :func:`guarded_protocol`: uvicorn's h11 protocol with a deadline on every request head (a
  connection that has not sent a whole head ``head_timeout_s`` after it opened, or after its
  last response, is closed) and a cap on open connections (past it, the oldest connection
  still without a whole head is closed to make room: a slow-loris socket first, then an idle
  keep-alive one, never a request in progress);
- :func:`quiet_accept_errors`: the event loop's report of a failed ``accept()`` (EMFILE, too
  many open files) as one log line every few seconds with a count, never a traceback each;
- :class:`SparseFilter`: the same for uvicorn's own warnings that any stranger can cause
  (a malformed request, the concurrency limit);
- :func:`host_refusal`: the Host header must name this server (DNS rebinding);
- :func:`until_revoked`: a stream whose token (or console session) is revoked ends within
  ``every_s`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import anyio

OUT_OF_FILES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
FILES_KEPT = 64  # descriptors left for what is not a connection (databases, logs, tokens.json)
NOISY = ("Invalid HTTP request received.", "Exceeded concurrency limit.")


def connection_cap(wanted: int) -> int:
    """``serve.max_connections``, below the process's open-file limit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return wanted
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, int(soft) - FILES_KEPT))


def guarded_protocol(max_connections: int, head_timeout_s: float, sparse: Any) -> type:
    """uvicorn's H11Protocol with a head deadline and a connection cap (module doc). One
    class per server: its connections waiting for a head are kept in its closure."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    # the connections waiting for a head, oldest first: those never answered, and those
    # kept alive after a response (closed to make room only when no fresh one is left)
    waiting: OrderedDict[Any, None] = OrderedDict()
    kept: OrderedDict[Any, None] = OrderedDict()

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            if len(self.connections) >= max_connections:
                self._make_room()
            super().connection_made(transport)
            self._await_head()

        def _make_room(self) -> None:
            victim = next(iter(waiting), None) or next(iter(kept), None)
            if victim is None:  # every connection is a request: uvicorn's limit answers 503
                return
            victim._drop()
            sparse.note(
                "evicted",
                f"olav serve: {max_connections} connections open; closed the oldest that had "
                "not sent a whole request head",
            )

        def _await_head(self, served: bool = False) -> None:
            (kept if served else waiting)[self] = None
            self._deadline = self.loop.call_later(head_timeout_s, self._head_late)

        def _head_arrived(self) -> None:
            waiting.pop(self, None)
            kept.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _head_late(self) -> None:
            self._deadline = None
            if self in waiting or self in kept:
                self._drop()
                sparse.note(
                    "late",
                    f"olav serve: closed a connection that sent no whole request head in "
                    f"{head_timeout_s:g} s",
                )

        def _drop(self) -> None:
            self._head_arrived()
            self.connections.discard(self)  # now: the cap counts it out before it is gone
            if not self.transport.is_closing():
                self.transport.abort()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if (self in waiting or self in kept) and self.conn.their_state is not h11.IDLE:
                self._head_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._head_arrived()
                self._await_head(served=True)  # keep-alive: the next head's deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

    return Guarded


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, sparse: Any) -> None:
    """The loop's failed accepts out of file descriptors, one line per interval with a count
    (asyncio pauses accepting for a second after each); every other report as before."""
    before = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in OUT_OF_FILES:
            sparse.note(
                "accept",
                f"olav serve: accepting a connection failed: {exc.strerror} (errno {exc.errno}); "
                "raise the file limit (ulimit -n) or lower serve.max_connections",
            )
            return
        if before is not None:
            before(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class SparseFilter(logging.Filter):
    """uvicorn's warnings that a stranger can cause at will, through :class:`Sparse`."""

    def __init__(self, sparse: Any) -> None:
        super().__init__()
        self.sparse = sparse

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in NOISY:
            self.sparse.note(message, f"uvicorn: {message}")
            return False
        return True


def host_refusal(scope: Any, bound: str, allowed: Iterable[str]) -> str:
    """Why the request's Host header is not this server's ("" when it is): a loopback name,
    the address it was bound to or reached on, or one of ``serve.allowed_hosts`` (a name
    allows any port, ``name:port`` that port only)."""
    raw = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"")
    host = raw.decode("latin-1").strip().lower()
    if not host:
        return "the request has no Host header"
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    names = {*LOOPBACK, bound.lower(), f"[{bound.lower()}]"}
    reached = (scope.get("server") or ("",))[0]
    if reached:
        names |= {str(reached).lower(), f"[{str(reached).lower()}]"}
    allowed = tuple(allowed)
    if name in names or host in allowed or name in allowed:
        return ""
    shown = host if len(host) <= 80 else host[:79] + "…"
    return (
        f"Host {shown!r} is not this server's name; add it to serve.allowed_hosts in olav.yaml "
        "if it is (a proxy's or a DNS name)"
    )


async def until_revoked(
    app: Callable[..., Any],
    scope: Any,
    receive: Any,
    send: Any,
    live: Callable[[], bool],
    *,
    every_s: float = 1.0,
) -> None:
    """``app`` on the request; while it streams server-sent events, ``live()`` is asked every
    ``every_s``: once it says no (the token revoked, the session ended), the app sees its
    client go away, and the stream ends with an ``error`` event that says why."""
    gone = anyio.Event()
    state = {"streaming": False, "ended": False}

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            kind = dict(message.get("headers") or ()).get(b"content-type", b"")
            state["streaming"] = kind.startswith(b"text/event-stream")
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            state["ended"] = True
        if not gone.is_set():
            await send(message)

    async def receiving() -> Any:
        got: list[Any] = []
        async with anyio.create_task_group() as group:

            async def real() -> None:
                got.append(await receive())
                group.cancel_scope.cancel()

            async def revoked() -> None:
                await gone.wait()
                group.cancel_scope.cancel()

            group.start_soon(real)
            group.start_soon(revoked)
        return got[0] if got else {"type": "http.disconnect"}

    async def watch() -> None:
        while True:
            await anyio.sleep(every_s)
            if state["streaming"] and not state["ended"] and not live():
                gone.set()
                return

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            await app(scope, receiving, sending)
        finally:
            group.cancel_scope.cancel()
    if gone.is_set() and not state["ended"]:
        why = {"error": "Unauthorized", "message": "the token was revoked: the stream ends"}
        final = f"event: error\ndata: {json.dumps(why)}\n\n".encode()
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": final, "more_body": False})
