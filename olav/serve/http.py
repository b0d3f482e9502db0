"""What the routes of ``olav serve`` share: the 4xx error, reading an Agent Protocol input,
and server-sent events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from olav.serve.runs import Run

HEARTBEAT_S = 15.0
STREAM_MODES = ("values", "updates", "messages", "messages-tuple")


class HTTPError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def error_response(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


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
    if value is not None and not isinstance(value, str | list):
        raise HTTPError(422, "stream_mode must be a mode or a list of modes")
    modes = [value] if isinstance(value, str) else list(value or default)
    out: list[str] = []
    for mode in modes:
        if not isinstance(mode, str) or mode not in STREAM_MODES:
            raise HTTPError(
                422,
                f"stream_mode {mode!r} is not supported; use: values, updates, messages-tuple",
            )
        out.append("messages" if mode == "messages-tuple" else mode)
    return tuple(out)


# -- server-sent events -------------------------------------------------------------------------


def sse_response(run: Run, after: int = 0, *, location: str = "") -> StreamingResponse:
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    if location:
        headers["Location"] = location
        headers["Content-Location"] = location
    return StreamingResponse(_events(run, after), media_type="text/event-stream", headers=headers)


async def _events(run: Run, after: int) -> AsyncIterator[bytes]:
    sent = after
    while True:
        events, done = await run.next_events(sent, HEARTBEAT_S)
        for number, event, data in events:
            sent = number
            payload = json.dumps(data, ensure_ascii=False, default=str)
            yield f"id: {number}\nevent: {event}\ndata: {payload}\n\n".encode()
        if done and sent >= len(run.events):
            return
        if not events:
            yield b": heartbeat\n\n"


def last_event_id(request: Request) -> int:
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return 0
    if not raw.isdigit():
        raise HTTPError(422, f"Last-Event-ID {raw!r} is not an event number")
    return int(raw)
