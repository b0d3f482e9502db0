"""langchain-openai's chat model, for servers that fail a streamed request with an empty body.

llama-cpp-python's server answers a streamed request it cannot serve (a prompt longer than its
window, above all) with ``200 OK`` and a stream that ends at once: the client then raises "No
generations found in stream", which says nothing of the cause. The same request unstreamed
gets the server's own error (``400 context_length_exceeded``, with the window in its message),
which olav.llm.models turns into one line that names the window and its fix. So a stream that
brought nothing is asked once more unstreamed: the answer comes as one chunk when there is one,
and the real error when there is not. A stream that brought anything is never asked again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI


class OpenAIChat(ChatOpenAI):
    """ChatOpenAI whose empty stream is asked again unstreamed (see the module)."""

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        empty = True
        for chunk in super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs):
            empty = False
            yield chunk
        if empty:
            kwargs.pop("stream_usage", None)
            yield _one_chunk(self._generate(messages, stop=stop, **kwargs))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        empty = True
        async for chunk in super()._astream(messages, stop=stop, run_manager=run_manager, **kwargs):
            empty = False
            yield chunk
        if empty:
            kwargs.pop("stream_usage", None)
            yield _one_chunk(await self._agenerate(messages, stop=stop, **kwargs))


def _one_chunk(result: ChatResult) -> ChatGenerationChunk:
    """An unstreamed answer as the one chunk of a stream."""
    msg = result.generations[0].message
    calls = msg.tool_calls if isinstance(msg, AIMessage) else []
    chunk = AIMessageChunk(
        content=msg.content,
        additional_kwargs=dict(msg.additional_kwargs),
        response_metadata=dict(msg.response_metadata),
        usage_metadata=getattr(msg, "usage_metadata", None),
        id=msg.id,
        tool_call_chunks=[
            {
                "name": c["name"],
                "args": json.dumps(c["args"]),
                "id": c.get("id"),
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(calls)
        ],
    )
    return ChatGenerationChunk(message=chunk, generation_info=result.generations[0].generation_info)
