"""What ``olav serve`` answers: one pydantic model per response shape, the declarations the
document (``/openapi.json``) is made from, and that the routes answer in."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from olav.serve.run import STATUSES

Stamp = str  # ISO 8601
EVENTS = (
    "metadata",
    "values",
    "updates",
    "messages",
    "messages/metadata",
    "messages/partial",
    "messages/complete",
    "custom",
    "events",
    "debug",
    "checkpoints",
    "tasks",
    "error",
    "end",
)


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Error(Answer):
    detail: str = Field(description="what was wrong")


class OpenAIErrorBody(Answer):
    message: str
    type: str
    param: str | None = None
    code: str


class OpenAIError(Answer):
    error: OpenAIErrorBody


class Event(Answer):
    """One server-sent event (its schema, as OpenAPI 3.2's itemSchema: schemathesis reads it
    from the media type's schema)."""

    event: Literal[EVENTS]  # type: ignore[valid-type]
    data: str = Field(description="JSON")
    id: str = Field(pattern="^[0-9]+$")


class ChatChunk(Answer):
    data: str = Field(description="JSON, or [DONE] at the end")


class Ok(Answer):
    ok: Literal[True]


class Info(Answer):
    version: str = Field(description="olav's version")
    langgraph_py_version: str
    olav: Literal[True]
    flags: dict[str, JsonValue]
    metadata: dict[str, JsonValue]
    operator: str


class Assistant(Answer):
    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: dict[str, JsonValue] = {}
    context: dict[str, JsonValue] = {}
    metadata: dict[str, JsonValue]
    version: int = 1
    created_at: Stamp
    updated_at: Stamp = ""


class Graph(Answer):
    nodes: list[JsonValue]
    edges: list[JsonValue]
    name: str = ""


class AssistantSchemas(Answer):
    graph_id: str
    input_schema: dict[str, JsonValue]
    output_schema: dict[str, JsonValue] = {}
    state_schema: dict[str, JsonValue]
    config_schema: dict[str, JsonValue] = {}
    context_schema: dict[str, JsonValue] = {}


class Thread(Answer):
    thread_id: str
    created_at: Stamp
    updated_at: Stamp
    metadata: dict[str, JsonValue] = Field(
        description="the client's labels, and graph_id, assistant_id, owner, name"
    )
    status: Literal["idle", "busy", "interrupted"]
    interrupts: dict[str, JsonValue] = {}
    values: dict[str, JsonValue] = Field(default={}, description="the thread's state (GET only)")


class Checkpoint(Answer):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None

    @classmethod
    def of(cls, thread_id: str, configurable: dict[str, Any]) -> Checkpoint:
        """The checkpoint a graph config's ``configurable`` names, under the id its owner
        knows the thread by."""
        return cls(
            thread_id=thread_id,
            checkpoint_ns=configurable.get("checkpoint_ns", ""),
            checkpoint_id=configurable.get("checkpoint_id"),
        )


class ThreadState(Answer):
    values: dict[str, JsonValue]
    next: list[str]
    tasks: list[JsonValue]
    metadata: dict[str, JsonValue] = {}
    created_at: str | None = None
    checkpoint: Checkpoint
    parent_checkpoint: Checkpoint | None = None
    interrupts: list[JsonValue]


class NewCheckpoint(Answer):
    checkpoint: Checkpoint


class Run(Answer):
    run_id: str
    thread_id: str
    assistant_id: str
    created_at: Stamp
    updated_at: Stamp = ""
    status: Literal[STATUSES]  # type: ignore[valid-type]
    metadata: dict[str, JsonValue] = {}
    kwargs: dict[str, JsonValue] = {}
    multitask_strategy: Literal["reject", "enqueue"] = "reject"
    error: str | None = Field(default=None, description="why it failed, or empty")


class Values(Answer):
    """The thread's values when the run ended (``__error__`` when it failed)."""


class StoredValue(Answer):
    text: str
    category: str
    scope: str
    origin: str = ""
    confidence: float = 0.0
    tags: list[str] = []
    metadata: dict[str, JsonValue] = {}


class StoreItem(Answer):
    namespace: list[str]
    key: str
    value: StoredValue
    created_at: str | None
    updated_at: str | None
    score: float = 0.0


class StoreItems(Answer):
    items: list[StoreItem]


class Namespaces(Answer):
    namespaces: list[list[str]]


class Draft(Answer):
    draft: str
    status: Literal["pending"]
    confirm: str = Field(description="the command that confirms it")


class Model(Answer):
    id: str
    object: Literal["model"]
    created: int = 0
    owned_by: str = ""


class Models(Answer):
    object: Literal["list"]
    data: list[Model]


class ChatCompletion(Answer):
    id: str
    object: Literal["chat.completion"]
    created: int = 0
    model: str
    choices: list[JsonValue]
    usage: dict[str, JsonValue] = {}
