"""One way to follow a run's events as they come, for every stream the server sends.

The Agent Protocol's server-sent events (olav.serve.http), the OpenAI chunks of
``/v1/chat/completions`` (olav.serve.openai_api) and the console's chat events
(olav.serve.console.chat) are three encoders over :func:`follow`: each turns the batches it
yields into its own bytes, and a heartbeat where a batch is empty. The run has ended, for all
of them alike, when it says so and its last numbered event has been yielded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from olav.serve.run import Run

HEARTBEAT_S = 15.0  # an idle stream says so this often, so that no proxy closes it

Event = tuple[int, str, Any]  # (its number, its kind, its data)


async def follow(
    run: Run, after: int = 0, heartbeat: float = HEARTBEAT_S
) -> AsyncIterator[list[Event]]:
    """``run``'s events numbered above ``after``, a batch at a time as they come, until the
    run has ended and its last event is yielded; an empty batch when ``heartbeat`` seconds
    pass with none (the encoder's keep-alive)."""
    sent = after
    while True:
        events, done = await run.next_events(sent, heartbeat)
        if events:
            sent = events[-1][0]
            yield events
        if done and sent >= run.last_event:
            return
        if not events:
            yield []
