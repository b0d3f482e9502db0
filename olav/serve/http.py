"""What the routes of ``olav serve`` share: the 4xx error, the bounds on what a client sends,
reading an Agent Protocol input, and server-sent events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from olav.serve.follow import follow
from olav.serve.run import Run

# LangGraph's stream modes, as the SDKs name them (each emits what LangGraph emits for it;
# one with nothing to say in a run stays quiet)
STREAM_MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "checkpoints",
    "tasks",
)

# The bounds on what a client sends (docs/http-api.md, "Bounds"): each 4xx beyond one names it.
MAX_ID = 256  # a thread, run or assistant id, a store key, a namespace label, a model name
MAX_NAME = 256  # a thread's name
MAX_METADATA = 64 * 1024  # metadata (and a store item's value), as UTF-8 JSON
MAX_KEYS = 256  # keys of metadata, counted at every level
MAX_DEPTH = 4  # how deep metadata nests: {"a": {"b": {"c": {"d": 1}}}} is as deep as it goes
MAX_LIMIT = 1000
MAX_OFFSET = 2**31 - 1  # SQLite's integers stop at 2**63; nobody pages that far
MAX_QUERY = 8192  # a search query, in characters (the embedder reads far fewer)
MAX_EVENT_ID = 10**15  # Last-Event-ID: an event number, never more digits than this
MAX_LABELS = 16  # labels in a store namespace (olav's have three)
MAX_TAGS = 64  # a store put's value.tags
MAX_STORE_OFFSET = 10_000  # a store search asks the table for offset + limit hits


class HTTPError(Exception):
    def __init__(self, status: int, detail: str, *, retry_after: int = 0) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after  # a 429's (or a 503's) Retry-After, in seconds

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after else {}


def error_response(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


_OAI_TYPES = {401: "authentication_error", 404: "not_found_error", 409: "conflict_error"}
_OAI_CODES = {400: "unsupported_parameter", 401: "invalid_api_key", 404: "not_found",
              409: "conflict", 413: "request_too_large", 421: "misdirected_request",
              422: "invalid_request", 429: "rate_limit_exceeded", 502: "run_failed",
              503: "unavailable"}  # fmt: skip


def oai_error(
    status: int, message: str, *, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An error in OpenAI's shape, for everything under ``/v1``: ``{"error": {"message",
    "type", "param", "code"}}``, its ``code`` a string as OpenAI's is, so every OpenAI
    client (LiteLLM included) shows the message."""
    body = {
        "message": message,
        "type": _OAI_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error"),
        "param": param,
        "code": _OAI_CODES.get(status, str(status)),
    }
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def shown(text: str, width: int = 80) -> str:
    """``text`` cut to ``width`` characters for a message (a client's path or value is never
    echoed whole: it may be a megabyte)."""
    return text if len(text) <= width else text[: width - 1] + "…"


# -- bounds -------------------------------------------------------------------------------------


def ident(value: Any, field: str, *, required: bool = True) -> str | None:
    """A client's id (a thread's, an assistant's, a store key): a non-empty string of at most
    :data:`MAX_ID` characters; None when it is absent and not ``required``."""
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise HTTPError(422, f"{field} must be a non-empty string")
    if len(value) > MAX_ID:
        raise HTTPError(422, f"{field} is {len(value)} characters long; the most is {MAX_ID}")
    return value


def text_field(value: Any, field: str, most: int) -> str | None:
    """An optional string of at most ``most`` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise HTTPError(422, f"{field} must be a string")
    if len(value) > most:
        raise HTTPError(422, f"{field} is {len(value)} characters long; the most is {most}")
    return value


def bounded_object(value: Any, field: str = "metadata") -> dict[str, Any]:
    """A client's JSON object kept as it is (metadata, a store item's value): at most
    :data:`MAX_KEYS` keys in all, :data:`MAX_DEPTH` levels deep and :data:`MAX_METADATA`
    bytes as JSON. Absent or null is ``{}``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HTTPError(422, f"{field} must be an object")
    keys = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if isinstance(node, dict):
            keys += len(node)
            if keys > MAX_KEYS:
                raise HTTPError(
                    422, f"{field} has more than {MAX_KEYS} keys (counted at every level)"
                )
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_DEPTH:
                    raise HTTPError(422, f"{field} nests deeper than {MAX_DEPTH} levels")
                stack.append((child, depth + 1))
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_METADATA:
        raise HTTPError(422, f"{field} is {size} bytes as JSON; the most is {MAX_METADATA}")
    return value


def unreadable_text(data: Any) -> str:
    """Where a parsed JSON body holds text no store can keep (``metadata.x``, or ``body``
    for the body itself), or "" where it holds none: a lone surrogate (``"\\ud800"`` is valid
    JSON but no UTF-8 text, which SQLite and DuckDB refuse) or a NUL (which PostgreSQL
    refuses)."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if _unreadable(node):
                return path or "body"
        elif isinstance(node, dict):
            for key, child in node.items():
                if _unreadable(key):
                    return f"a key of {path or 'the body'}"
                stack.append((child, f"{path}.{shown(key, 40)}" if path else shown(key, 40)))
        elif isinstance(node, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(node))
    return ""


def _unreadable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def iso(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).isoformat()


def jsonsafe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def input_text(value: Any) -> str:
    """The request in an Agent Protocol input: ``{"messages": [...]}`` (the last human or user
    message), or a plain string."""
    if isinstance(value, str) and value.strip():
        return value
    if not isinstance(value, dict):
        raise HTTPError(422, "input must be an object with 'messages'")
    messages = value.get("messages")
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        raise HTTPError(422, "input.messages must be a non-empty list")
    for message in reversed(messages):
        if not isinstance(message, dict):
            raise HTTPError(422, "each of input.messages must be an object")
        role = message.get("role") or message.get("type")
        if role in ("user", "human"):
            text = content_text(message.get("content"))
            if text.strip():
                return text
            raise HTTPError(422, "the last user message has no text")
    raise HTTPError(422, "input.messages has no user message")


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    if content is None:
        return ""
    raise HTTPError(422, "message content must be a string or a list of text parts")


def stream_modes(value: Any, default: Sequence[str]) -> tuple[str, ...]:
    """The stream modes a client asks for (one, or a list), each once, in its order."""
    if value is not None and not isinstance(value, str | list):
        raise HTTPError(422, "stream_mode must be a mode or a list of modes")
    modes = [value] if isinstance(value, str) else list(value or default)
    out: list[str] = []
    for mode in modes:
        if not isinstance(mode, str) or mode not in STREAM_MODES:
            raise HTTPError(
                422,
                f"stream_mode {shown(str(mode), 40)!r} is not supported; "
                "use: " + ", ".join(STREAM_MODES),
            )
        if mode not in out:
            out.append(mode)
    return tuple(out)


# the events of each mode (a join that asks for some modes gets only theirs)
MODE_EVENTS = {
    "messages-tuple": ("messages",),
    "messages": ("messages/metadata", "messages/partial", "messages/complete"),
}
ALWAYS = ("metadata", "error", "end")


def event_filter(modes: Sequence[str]) -> frozenset[str] | None:
    """The event names a stream that asks for ``modes`` sends (None: every one)."""
    if not modes:
        return None
    names = {name for mode in modes for name in MODE_EVENTS.get(mode, (mode,))}
    return frozenset(names | set(ALWAYS))


# -- server-sent events -------------------------------------------------------------------------


def sse_response(
    run: Run,
    after: int = 0,
    *,
    location: str = "",
    only: frozenset[str] | None = None,
    cancel_on_disconnect: bool = False,
) -> StreamingResponse:
    """The run's events from after ``after`` as server-sent events. ``location``: the run's
    stream (``Location``, where langgraph-sdk reconnects) and the run itself
    (``Content-Location: /threads/T/runs/R``, where the SDKs read the run's id). ``only``:
    the event names to send. ``cancel_on_disconnect``: a client that goes away cancels it."""
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    if location:
        headers["Location"] = location
        headers["Content-Location"] = location.removesuffix("/stream")
    body = _events(run, after, only, cancel_on_disconnect)
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


async def _events(
    run: Run, after: int, only: frozenset[str] | None = None, cancel: bool = False
) -> AsyncIterator[bytes]:
    finished = False
    try:
        async for events in follow(run, after):
            if not events:
                yield b": heartbeat\n\n"
                continue
            chunk = []  # the events ready now, in one write: a burst costs one send, not one each
            for number, event, data in events:
                if only is not None and event not in only:
                    continue
                payload = json.dumps(data, ensure_ascii=False, default=str)
                chunk.append(f"id: {number}\nevent: {event}\ndata: {payload}\n\n")
            if chunk:
                yield "".join(chunk).encode()
        finished = True
    finally:
        if cancel and not finished and not run.done.is_set():
            run.cancel.set()  # on_disconnect "cancel": nobody listens to it any more


def last_event_id(request: Request) -> int:
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return 0
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 15 or int(raw) > MAX_EVENT_ID:
        raise HTTPError(
            422, f"Last-Event-ID {shown(raw, 40)!r} is not an event number (0 to {MAX_EVENT_ID})"
        )
    return int(raw)
