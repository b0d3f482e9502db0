"""A request too large for the model's window by itself is refused before anything is sent or
recorded."""

from __future__ import annotations

from olav.core.errors import OlavError


class RequestTooLongError(OlavError):
    """The person's message alone is larger than the model's window."""


def check_fits(window: int | None, text: str) -> None:
    """Refuse a request that cannot fit the model's ``window`` by itself, before anything is
    sent or recorded: the server would cut it from the front, and with it the system prompt
    and the memories (a prompt that only overflows with the thread's history is sent, with
    the window warning)."""
    if not window or len(text) < window:  # at most a token per character
        return
    from olav.memory.store.token_counts import estimate_tokens

    size = estimate_tokens(text)
    if size >= window:
        raise RequestTooLongError(
            f"this message is about {size} tokens, more than the model's window of "
            f"{window}: it was not sent",
            hint="Send the part that matters, save the rest as a file and ask about it, or "
            "raise llm.num_ctx (and the server's window)",
        )
