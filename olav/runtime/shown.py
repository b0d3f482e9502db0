"""What the person sees of a run's answers while it streams (:class:`ShownText`).

Each model message goes through its own :class:`~olav.runtime.rescue.stream.StreamGuard`, which
holds back reasoning and a tool call written as text. What a guard held back and turned out to
be text is shown when the message is known to be complete: a new message begins, the state
holds the message (before the state is passed on, as LangGraph streams a message's last chunk
before the step's values), or the run ends. A step the rescue layer asked again (the nudge, a
cut answer, the loop guard) streams its first message only, so the person never reads the same
announcement twice; what the step settles on is printed whole at the end of the turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk

from olav.runtime.middleware import message_text
from olav.runtime.rescue.stream import StreamGuard, unshown


def is_main(meta: dict[str, Any]) -> bool:
    """Whether a streamed chunk is the top-level agent's (sub-agents run inside the tools
    node, and the person does not read them)."""
    return "tools:" not in str(meta.get("langgraph_checkpoint_ns", ""))


class ShownText:
    """One run's text on its way to ``on_token`` (None: nothing streams, as in ``olav ask``);
    ``rescue`` is the run's rescue record (its time to the first token)."""

    def __init__(self, on_token: Callable[[str], None] | None, rescue: Any) -> None:
        self.on_token = on_token
        self.rescue = rescue
        self.guards: dict[str, StreamGuard] = {}
        self.pieces: list[str] = []  # what was shown, in order
        self.step_first: dict[tuple[Any, Any], str] = {}
        self.token_id = ""  # the id of the message the token being shown belongs to
        self.final_id: str | None = None

    def seen(self) -> str:
        """Everything the person saw of the run's text."""
        return "".join(self.pieces).strip()

    def retry(self, chunk: AIMessageChunk, meta: dict[str, Any]) -> bool:
        """Whether ``chunk`` is of a message the rescue layer asked for again inside a model
        step that already streamed one (it is not shown)."""
        step = (meta.get("langgraph_step"), meta.get("langgraph_node"))
        first = self.step_first.setdefault(step, chunk.id or "")
        return (chunk.id or "") != first

    def token(self, chunk: AIMessageChunk, started: float) -> None:
        piece = message_text(chunk)
        if not piece:
            return
        if self.rescue.first_token_s is None:  # the person's approvals are not the model's
            waited = self.rescue.approval_s
            self.rescue.first_token_s = round(time.perf_counter() - started - waited, 3)
        key = chunk.id or ""
        if key not in self.guards:
            self.flush()  # a new message: what the last one held back is final
        guard = self.guards.setdefault(key, StreamGuard())
        self._show(key, guard.feed(piece))

    def settled(self, values: Any) -> None:
        """The state now holds its last model message: what that message's guard held back
        (text that was no call) is shown before the state is passed on."""
        msgs = values.get("messages") if isinstance(values, dict) else None
        last = msgs[-1] if msgs else None
        guard = self.guards.get(getattr(last, "id", None) or "")
        if guard is not None and isinstance(last, AIMessage):
            self._show(last.id or "", guard.flush())

    def flush(self) -> None:
        """Show what earlier messages held back and turned out to be text (a short lead-in
        before a structured tool call); a call written as text stays held."""
        for key, guard in self.guards.items():
            self._show(key, guard.flush())

    def unshown(self, answer: str) -> str:
        """What of the final answer the stream did not show: all of it when nothing of it
        streamed (nothing listens, or the guard held the message back), else its held end."""
        guard = self.guards.get(self.final_id or "")
        if guard is None or not self.on_token:
            return answer
        self._show(self.final_id or "", guard.flush())
        return unshown(guard.shown, answer)

    def _show(self, key: str, text: str) -> None:
        if text and self.on_token:
            self.token_id = key
            self.pieces.append(text)
            self.on_token(text)
