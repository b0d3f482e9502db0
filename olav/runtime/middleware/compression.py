""":class:`CompressionMiddleware`: working memory, when the conversation outgrows the context
budget."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import HumanMessage, ToolMessage

from olav.runtime.middleware.messages import message_text


class CompressionMiddleware(AgentMiddleware):
    """Working memory: when the conversation outgrows the budget, older turns become one
    structured state message (intent, confirmed parameters, open items) for the model call,
    instead of being dropped. The stored history is not changed."""

    KEEP_TURNS = 2

    def __init__(self, agent_name: str, budget_tokens: int) -> None:
        super().__init__()
        self.agent_name = agent_name
        self.budget = budget_tokens

    @property
    def name(self) -> str:
        return f"olav_compression_{self.agent_name}"

    def _compress(self, request: Any) -> Any:
        from olav.memory.store.token_counts import estimate_tokens

        messages = list(request.messages)
        total = sum(estimate_tokens(message_text(m)) + 4 for m in messages)
        if total <= self.budget:
            return request
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        if len(humans) <= self.KEEP_TURNS:
            return request
        cut = humans[-self.KEEP_TURNS]  # the last KEEP_TURNS user turns stay whole
        state = summarise_turns(messages[:cut])
        return request.override(messages=[HumanMessage(content=state), *messages[cut:]])

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._compress(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(self._compress(request))


def summarise_turns(messages: list[Any]) -> str:
    """A deterministic structured state of earlier turns."""
    from langchain_core.messages import AIMessage

    intents = [
        " ".join(message_text(m).split())[:160] for m in messages if isinstance(m, HumanMessage)
    ]
    params: dict[str, str] = {}
    failed: set[str] = set()
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    for m in messages:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                res = results.get(call.get("id") or "")
                ok = res is not None and res.status != "error"
                if not ok:
                    failed.add(call["name"])
                    continue
                for key, val in (call.get("args") or {}).items():
                    if key != "data":
                        params[f"{call['name']}.{key}"] = " ".join(str(val).split())[:80]
    lines = ["[conversation state: earlier turns, compressed]"]
    lines.append("User intents: " + " | ".join(intents[-6:]))
    if params:
        lines.append(
            "Confirmed parameters: " + "; ".join(f"{k}={v}" for k, v in list(params.items())[-20:])
        )
    if failed:
        lines.append("Open items (tools that failed): " + ", ".join(sorted(failed)))
    return "\n".join(lines)
