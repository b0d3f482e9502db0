"""What a client sends to ``olav serve``: one pydantic model per request body, each bound a
validator of the model (:mod:`.http`'s bounds), so that the check and the document
(``/openapi.json``, :mod:`.openapi`) are one declaration and cannot drift.

A model refuses a body with the first problem it finds, said in one line that names the
field (:func:`problem`): the routes answer it as a 422. What no schema can say (metadata's size
as JSON and its depth, whether an assistant exists, whether a thread waits for an answer) is
checked by the validators here or by the route, with a 4xx the document lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, ValidationError
from pydantic import ValidationInfo as Info

from olav.serve.http import (
    MAX_DEPTH,
    MAX_ID,
    MAX_KEYS,
    MAX_LABELS,
    MAX_LIMIT,
    MAX_METADATA,
    MAX_NAME,
    MAX_OFFSET,
    MAX_QUERY,
    MAX_STORE_OFFSET,
    MAX_TAGS,
    STREAM_MODES,
    HTTPError,
    bounded_object,
    ident,
    shown,
    stream_modes,
)
from olav.serve.run import STATUSES

M = TypeVar("M", bound=BaseModel)

# -- the problem a refused body has, in one line ------------------------------------------------


def where(loc: tuple[int | str, ...]) -> str:
    """A field's place as a client writes it: ``metadata.name``, ``input.messages[0]`` (the
    parts pydantic adds for a union's members, ``str`` or ``list[...]``, are not places)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _MEMBER.fullmatch(part):
            out += f".{part}" if out else part
    return out or "the body"


_MEMBER = re.compile(r"[a-z-]+\[.*\]|[a-z]+-[a-z-]+|[A-Z]\w*|str|int|bool|float|none|dict|list")


def problem(exc: ValidationError) -> str:
    """The first problem of a refused body, naming its field and saying what would do. Of a
    union's errors, a bound broken beats a type that did not match; when no member's type
    matched, the types it may have are said together."""
    errors = exc.errors(include_url=False)
    first = where(errors[0]["loc"])
    same = [e for e in errors if where(e["loc"]) == first]
    kinds = [_kind(e) for e in same]
    if all(kinds):
        value = shown(repr(same[0].get("input")), 40)
        return f"{first} {value} is not {' or '.join(dict.fromkeys(k for k in kinds if k))}"
    error = next((e for e, k in zip(same, kinds, strict=True) if not k), errors[0])
    field, kind, ctx = where(error["loc"]), error["type"], error.get("ctx") or {}
    value = shown(repr(error.get("input")), 40)
    if kind == "missing":
        return f"{field} is required"
    if kind == "literal_error":
        return f"{field} {value} is not supported; use: {ctx.get('expected', '')}"
    if kind == "string_too_long":
        return f"{field} is longer than {ctx.get('max_length')} characters"
    if kind == "string_too_short":
        return f"{field} must be a non-empty string"
    if kind == "too_long":
        return f"{field} has more than {ctx.get('max_length')} items"
    if kind == "too_short":
        return f"{field} must have at least {ctx.get('min_length')} item"
    message = str(error["msg"])
    return f"{field}: {message[:1].lower()}{message[1:]}"


_KINDS = {
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "list_type": "a list",
    "none_required": "null",
}


def _kind(error: Any) -> str:
    """What a type error says the value should have been ("" for any other error)."""
    if error["type"] == "literal_error":
        return str((error.get("ctx") or {}).get("expected", ""))
    return _KINDS.get(error["type"], "")


def read(model: type[M], data: dict[str, Any]) -> M:
    """``data`` (a parsed JSON body) as ``model``, or the 422 that names its first problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise HTTPError(422, problem(exc)) from None


def read_query(model: type[M], params: Any) -> M:
    """A query string (Starlette's ``QueryParams``) as ``model``: a list field takes every
    value given, an integer field its digits (else the 422 that says so), any other field its
    last value; an empty value is none given (the SDKs send ``stream_mode=`` for all)."""
    data: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        given = [value for value in params.getlist(name) if value]
        if not given:
            continue
        kind = _kind_of(field.annotation)
        if kind is list:
            data[name] = given
        elif kind is int:
            data[name] = integer_of(name, given[-1])
        else:
            data[name] = given[-1]
    return read(model, data)


def integer_of(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise HTTPError(422, f"{name} must be an integer, not {shown(text, 40)!r}") from None


def _kind_of(annotation: Any) -> Any:
    """``list`` or ``int`` for a field of that kind (optional or not), else the type itself."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    origin = get_origin(annotation)
    if origin in (Union, UnionType) and len(args) == 1:
        return _kind_of(args[0])
    return origin or annotation


# -- the fields, each with its bound ------------------------------------------------------------


def _check(check: Callable[[Any, str], Any]) -> BeforeValidator:
    """A validator that runs ``check(value, field)`` first (its 422 says what the bound is);
    None passes to the type, which says whether the field may be null."""
    return BeforeValidator(lambda v, info: v if v is None else check(v, _field(info)))


def _or_empty(check: Callable[[Any, str], Any], empty: Callable[[], Any]) -> BeforeValidator:
    """A validator like :func:`_check`, which reads null as empty (``empty()``): a client that
    sends ``"metadata": null`` means none, as olav has always read it."""
    return BeforeValidator(lambda v, info: empty() if v is None else check(v, _field(info)))


def _field(info: Info) -> str:
    return str(info.field_name or "value")


def _window(low: int, top: int) -> Callable[[Any, str], Any]:
    def check(value: Any, field: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
            raise HTTPError(422, f"{field} must be an integer from {low} to {top}")
        return value

    return check


def labels(value: Any, field: str) -> Any:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise HTTPError(422, f"{field} must be a list of non-empty strings")
    if len(value) > MAX_LABELS:
        raise HTTPError(422, f"{field} has {len(value)} labels; the most is {MAX_LABELS}")
    if any(len(v) > MAX_ID for v in value):
        raise HTTPError(422, f"a label of {field} is longer than {MAX_ID} characters")
    return value


BOUNDED = f"at most {MAX_KEYS} keys in all, {MAX_DEPTH} levels deep, {MAX_METADATA} bytes as JSON"
Ident = Annotated[str, Field(min_length=1, max_length=MAX_ID), _check(ident)]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT), _check(_window(1, MAX_LIMIT))]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET), _check(_window(0, MAX_OFFSET))]
StoreOffset = Annotated[int, Field(ge=0, le=MAX_STORE_OFFSET), _check(_window(0, MAX_STORE_OFFSET))]
Metadata = Annotated[
    dict[str, JsonValue],
    Field(max_length=MAX_KEYS, description="labels: " + BOUNDED),
    _or_empty(bounded_object, dict),
]
Labels = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_ID)]],
    Field(max_length=MAX_LABELS),
    _or_empty(labels, list),
]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
ThreadField = Literal[
    "thread_id", "created_at", "updated_at", "metadata", "status", "values", "interrupts"
]
THREAD_FIELDS: tuple[str, ...] = ThreadField.__args__  # type: ignore[attr-defined]
SortKey = Literal["thread_id", "status", "created_at", "updated_at"]
StreamMode = Literal[STREAM_MODES]  # type: ignore[valid-type]
Strategy = Literal["reject", "enqueue"]


class Body(BaseModel):
    """A request body: fields olav does not read are left alone (the SDKs send many)."""

    model_config = ConfigDict(strict=True, extra="ignore")


# -- assistants and threads ---------------------------------------------------------------------


class AssistantSearch(Body):
    graph_id: Ident | None = None
    metadata: Metadata = {}
    limit: Limit = 10
    offset: Offset = 0


class ThreadCreate(Body):
    thread_id: Ident | None = None
    metadata: Metadata = {}
    if_exists: Literal["raise", "do_nothing"] | None = None


class ThreadCount(Body):
    metadata: Metadata = {}
    status: ThreadStatus | None = None
    values: dict[str, JsonValue] | None = Field(
        default=None, description="not supported: filter by metadata"
    )


class ThreadSearch(ThreadCount):
    ids: Annotated[list[str], Field(max_length=1000)] | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: SortKey | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: Annotated[list[ThreadField], Field(min_length=1)] | None = None
    extract: dict[str, JsonValue] | None = Field(default=None, description="not supported")


class Renaming(BaseModel):
    """A patch's metadata: labels to merge, and a name that renames the thread."""

    model_config = ConfigDict(strict=True, extra="allow")
    name: Annotated[str, Field(max_length=MAX_NAME)] | None = None


class ThreadPatch(Body):
    metadata: Annotated[
        Renaming,
        Field(description=f"labels to merge: {BOUNDED}; a name renames the thread"),
        _check(lambda v, field: bounded_object(v, field) and v),
    ]


# -- state and history --------------------------------------------------------------------------


class CheckpointRef(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    checkpoint_id: Ident | None = None


class Messages(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    messages: list[JsonValue] | dict[str, JsonValue]


class StateUpdate(Body):
    values: Annotated[
        Messages | list[Messages], Field(description="messages to add through the graph's reducer")
    ]
    as_node: str | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: Ident | None = None


class StateAt(Body):
    checkpoint: CheckpointRef | None = None
    subgraphs: bool | None = None


class History(Body):
    limit: Limit = 10
    before: Ident | CheckpointRef | None = None
    metadata: Metadata = {}


# -- runs ---------------------------------------------------------------------------------------


def _named(value: Any, field: str) -> Any:
    if not isinstance(value, str) or not value:
        raise HTTPError(422, f"{field} is required: the name of one of the agents")
    return ident(value, field)


class Command(BaseModel):
    """The answer to an approval (``resume``), or the end of the wait (``goto``)."""

    model_config = ConfigDict(extra="allow")
    resume: JsonValue = None


def _command(value: Any, field: str) -> Any:
    from olav.serve.approvals import command_of

    given = value.model_dump(exclude_unset=True) if isinstance(value, Command) else value
    command_of(given)  # its 422 names the shapes olav reads
    return value


def _modes(value: Any, field: str) -> Any:
    stream_modes(value, ())
    return value


class RunCreate(Body):
    """Start a run (``POST /threads/{thread_id}/runs`` and its kin): the wire body, which the
    console and the OpenAI endpoint build too (:meth:`~olav.serve.server.Server.new_run`)."""

    model_config = ConfigDict(strict=True, extra="ignore")
    assistant_id: Annotated[str, Field(min_length=1, max_length=MAX_ID), _check(_named)]
    input: dict[str, JsonValue] | str | None = Field(
        default=None, description='the request: {"messages": [{"role": "user", "content": …}]}'
    )
    command: Annotated[Command | None, _check(_command)] = Field(
        default=None,
        description="resume: the answer to the approval the thread waits on, e.g. "
        '{"decisions": [{"type": "approve"}]}',
    )
    checkpoint: CheckpointRef | None = Field(
        default=None,
        description="start from this checkpoint of the thread (a new branch): without input "
        "again (regenerate), with input forked there (edit)",
    )
    checkpoint_id: Ident | None = None
    on_disconnect: Literal["continue", "cancel"] | None = None
    stream_mode: Annotated[StreamMode | list[StreamMode] | None, _check(_modes)] = None
    metadata: Metadata = {}
    multitask_strategy: Strategy | None = None
    if_not_exists: Literal["create", "reject"] | None = None


class RunRequest(RunCreate):
    """A run as olav's own front ends start it (the console, ``/v1``): the wire body, and
    what only they say, never read from a client's body."""

    history: list[BaseMessage] = []  # turns put into the new thread first (/v1 sends them all)
    asked: dict[str, JsonValue] = {}  # the client's model settings (max_tokens, temperature…)
    interruptible: bool = True  # False: a tool that asks for approval is refused instead


# -- what a query string says ------------------------------------------------------------------


class Paging(Body):
    limit: Limit = 10


class RunsQuery(Body):
    limit: Limit = 10
    offset: Offset = 0
    status: Literal[STATUSES] | None = None  # type: ignore[valid-type]


class JoinQuery(Body):
    stream_mode: Annotated[list[StreamMode], _check(_modes)] = []
    cancel_on_disconnect: Literal["0", "1", "true", "false"] | None = None


def _action(value: Any, field: str) -> Any:
    if value != "interrupt":
        raise HTTPError(
            422,
            f"action {shown(str(value), 40)!r} is not supported: olav cancels with 'interrupt' "
            "(the thread keeps its last completed step); to go back, run from an earlier "
            "checkpoint",
        )
    return value


class CancelQuery(Body):
    wait: Literal["true", "1", "false", "0"] | None = None
    action: Annotated[Literal["interrupt"], _check(_action)] | None = None


class ItemQuery(Body):
    namespace: Annotated[
        str, Field(max_length=MAX_ID, description="the labels, joined by dots")
    ] = ""
    key: Ident


# -- the store ----------------------------------------------------------------------------------


def _value(value: Any, field: str) -> Any:
    if not isinstance(value, dict):
        raise HTTPError(422, f'{field} must be an object, e.g. {{"text": "what to remember"}}')
    if not value:
        raise HTTPError(422, f"{field} is empty: give it a 'text' to remember")
    return bounded_object(value, field)


class StoreValue(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    text: str | None = None
    tags: (
        Annotated[list[Annotated[str, Field(max_length=MAX_ID)]], Field(max_length=MAX_TAGS)] | None
    ) = None


class StorePut(Body):
    namespace: Annotated[Labels, Field(min_length=1)]
    key: Ident
    value: Annotated[
        StoreValue,
        Field(
            description=f"text (else the value as JSON) and tags; {MAX_METADATA} bytes at most",
            json_schema_extra={"minProperties": 1, "maxProperties": MAX_KEYS},
        ),
        _check(_value),
    ]
    index: JsonValue = Field(default=None, description="ignored: olav indexes the text")
    ttl: JsonValue = Field(default=None, description="ignored: the category's expiry applies")


class StoreDelete(Body):
    namespace: Labels = []
    key: Ident


def _filter(value: Any, field: str) -> Any:
    if not isinstance(value, dict):
        raise HTTPError(422, f"{field} must be an object")
    for name in value:
        if name not in StoreFilter.model_fields:
            raise HTTPError(
                422,
                f"filter on {shown(str(name), 40)!r} is not supported; use: "
                + ", ".join(StoreFilter.model_fields),
            )
    return value


class StoreFilter(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    category: Annotated[str, Field(max_length=MAX_ID)] | None = None
    scope: Annotated[str, Field(max_length=MAX_ID)] | None = None
    origin: Annotated[str, Field(max_length=MAX_ID)] | None = None


class StoreSearch(Body):
    namespace_prefix: Labels = []
    filter: Annotated[StoreFilter | None, _check(_filter)] = None
    query: Annotated[str, Field(max_length=MAX_QUERY)] | None = None
    limit: Limit = 10
    offset: StoreOffset = 0


class StoreNamespaces(Body):
    prefix: Labels = []
    suffix: Labels = []
    max_depth: Annotated[int, Field(ge=1, le=MAX_LABELS)] | None = None
    limit: Limit = 100
    offset: StoreOffset = 0
