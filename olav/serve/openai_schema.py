"""What an OpenAI client sends to ``/v1/chat/completions``: the request model, read as the
other bodies are (:mod:`.schema`); what olav refuses by name is a 400 that names the field
(:data:`olav.serve.openai_api.REFUSED`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from olav.serve.http import MAX_ID
from olav.serve.schema import Body


class ChatMessage(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[JsonValue] | None = None
    tool_calls: list[JsonValue] | None = Field(default=None, description="an assistant's calls")
    tool_call_id: str | None = Field(default=None, description="a tool result's")


class ChatFunction(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    description: str | None = None
    parameters: dict[str, JsonValue] | None = None


class ChatTool(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    type: Literal["function"]
    function: ChatFunction


class NamedChoice(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    type: Literal["function"]
    function: dict[str, JsonValue]


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    include_usage: bool | None = None


Stop = Annotated[str, Field(min_length=1, max_length=200)]


class ChatRequest(Body):
    """``POST /v1/chat/completions``: what olav reads of OpenAI's request (what it refuses is
    a 400 naming the field, :data:`olav.serve.openai_api.REFUSED`)."""

    model_config = ConfigDict(strict=True, extra="allow")
    model: Annotated[
        str,
        Field(min_length=1, max_length=MAX_ID, description="olav/<agent>, or the agent's name"),
    ]
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    tools: Annotated[list[ChatTool], Field(max_length=128)] | None = Field(
        default=None,
        description="the client's tools: olav is the model of the client's own loop "
        "(serve.client_tools)",
    )
    tool_choice: Literal["auto", "none", "required"] | NamedChoice | None = Field(
        default=None, description="with tools only; a named function must be offered"
    )
    parallel_tool_calls: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1, description="capped by llm.num_predict")
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    stop: Stop | Annotated[list[Stop], Field(max_length=4)] | None = None
    seed: int | None = None
    user: Annotated[str, Field(max_length=256)] | None = None
