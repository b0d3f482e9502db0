""":class:`StaticContextMiddleware`: ``on_intent`` reference files (L1) join the system prompt
when the query hits their keywords. ``static_context`` files (L0) are part of the system
prompt already."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import SystemMessage

from olav.runtime.middleware.messages import last_human_index, message_text


class StaticContextMiddleware(AgentMiddleware):
    """L1: reference files whose keywords appear in the query join the system prompt."""

    def __init__(self, agent_name: str, on_intent: list[tuple[list[str], str, str]]) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.on_intent = on_intent  # (keywords, file name, content)

    @property
    def name(self) -> str:
        return f"olav_static_context_{self.agent_name}"

    def _extend(self, request: Any) -> Any:
        idx = last_human_index(list(request.messages))
        if idx is None or not self.on_intent:
            return request
        query = message_text(request.messages[idx]).lower()
        extra = [
            f"## Reference: {name}\n{content}"
            for kws, name, content in self.on_intent
            if any(k.lower() in query for k in kws)
        ]
        if not extra:
            return request
        base = message_text(request.system_message) if request.system_message else ""
        return request.override(
            system_message=SystemMessage(content=base + "\n\n" + "\n\n".join(extra))
        )

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._extend(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._extend(request))
