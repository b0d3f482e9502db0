"""The Agent Protocol's thread state routes: the state at the head or at a checkpoint, a state
written by a client (``update_state``), and the history, as langgraph-sdk and langgraph's
``RemoteGraph`` call them. Every checkpoint is read and written through the agent's own graph,
on the operator's own thread."""

from __future__ import annotations

import re
import uuid
from typing import Any

import anyio
from starlette.requests import Request

from olav.runtime.threads.model import ThreadInfo
from olav.serve import answers as A
from olav.serve.http import HTTPError, ident
from olav.serve.routing import Reply, Routes
from olav.serve.schema import CheckpointRef, History, Paging, StateAt, StateUpdate
from olav.serve.server import Server

STATE = Routes()
STATE_OF = Reply("the state", A.ThreadState)
STATES = Reply("the states", list[A.ThreadState])
HISTORY = "the thread's checkpoints, newest first (limit)"


@STATE.get("/threads/{thread_id}/state", "the thread's state", STATE_OF, errors=(404, 422))
def thread_state(server: Server, request: Request, operator: str) -> A.ThreadState:
    info = server.thread(operator, request.path_params["thread_id"])
    found = server.snapshots(operator, info)
    return server.state_answer(info.known_as, found[0] if found else None)


@STATE.get("/threads/{thread_id}/history", HISTORY, STATES, errors=(404, 422), query=Paging)
async def thread_history_get(
    server: Server, request: Request, operator: str, query: Paging
) -> list[A.ThreadState]:
    """The history, as ``GET`` asks for it: ``?limit=`` only."""
    return await thread_history(server, request, operator, History(limit=query.limit))


@STATE.post("/threads/{thread_id}/history", HISTORY, STATES, errors=(404, 413, 422), body=History)
async def thread_history(
    server: Server, request: Request, operator: str, body: History
) -> list[A.ThreadState]:
    """Every checkpoint of the thread, newest first, on every branch (a run from an earlier
    checkpoint starts one): each names its parent, which is how a client draws the branches.
    ``before`` (a checkpoint, or its id) starts below it; ``metadata`` keeps the checkpoints
    whose metadata has those values."""
    info = server.thread(operator, request.path_params["thread_id"])
    limit, metadata = body.limit, body.metadata
    before = _checkpoint_id(body.before)
    for key, value in metadata.items():
        if not _FILTER_KEY.fullmatch(key) or not (
            value is None or isinstance(value, str | int | float | bool)
        ):
            raise HTTPError(
                422,
                f"metadata filter {key[:40]!r}: a key of letters, digits, '_', '.' or '-' "
                "with a text, number, boolean or null value",
            )
    snaps = await anyio.to_thread.run_sync(
        lambda: server.snapshots(operator, info, limit, before=before, metadata=metadata)
    )
    return [server.state_answer(info.known_as, snap) for snap in snaps]


_FILTER_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def _checkpoint_id(value: str | CheckpointRef | None) -> str | None:
    """A checkpoint's id, sent as the id or as a checkpoint (``{"checkpoint_id": …}``)."""
    return value.checkpoint_id if isinstance(value, CheckpointRef) else value


def _at(server: Server, operator: str, info: Any, checkpoint: str) -> A.ThreadState:
    found = server.snapshots(operator, info, checkpoint=checkpoint)
    if not found:
        raise HTTPError(404, f"thread {info.known_as} has no checkpoint {checkpoint!r}")
    return server.state_answer(info.known_as, found[0])


@STATE.get(
    "/threads/{thread_id}/state/{checkpoint_id}",
    "the thread's state at a checkpoint",
    STATE_OF,
    errors=(404, 422),
)
async def thread_state_at(server: Server, request: Request, operator: str) -> A.ThreadState:
    """The thread's state at one of its checkpoints (``GET …/state/{checkpoint_id}``)."""
    info = server.thread(operator, request.path_params["thread_id"])
    checkpoint = str(ident(request.path_params["checkpoint_id"], "checkpoint_id"))
    return await anyio.to_thread.run_sync(_at, server, operator, info, checkpoint)


@STATE.post(
    "/threads/{thread_id}/state/checkpoint",
    "the thread's state at a checkpoint (none: the head)",
    STATE_OF,
    errors=(404, 413, 422),
    body=StateAt,
)
async def thread_state_checkpoint(
    server: Server, request: Request, operator: str, body: StateAt
) -> A.ThreadState:
    """The same, the checkpoint in the body (``{"checkpoint": {"checkpoint_id": …}}``), as
    RemoteGraph's ``get_state`` sends it; a checkpoint without an id is the head."""
    info = server.thread(operator, request.path_params["thread_id"])
    checkpoint = _checkpoint_id(body.checkpoint)
    if checkpoint is None:
        found = await anyio.to_thread.run_sync(lambda: server.snapshots(operator, info))
        return server.state_answer(info.known_as, found[0] if found else None)
    return await anyio.to_thread.run_sync(_at, server, operator, info, checkpoint)


@STATE.post(
    "/threads/{thread_id}/state",
    "add messages to the thread as a new checkpoint",
    Reply("the new checkpoint", A.NewCheckpoint),
    errors=(404, 409, 413, 422),
    body=StateUpdate,
    body_required=True,
)
async def thread_update_state(
    server: Server, request: Request, operator: str, body: StateUpdate
) -> A.NewCheckpoint:
    """Write ``values`` into the thread as a new checkpoint (``POST …/state``): the messages a
    client adds go through the graph's own reducer, so the next run continues from them.
    ``checkpoint`` (or ``checkpoint_id``) writes on top of an earlier checkpoint: a branch."""
    info = server.thread(operator, request.path_params["thread_id"])
    given = body.values
    if isinstance(given, list):  # the SDK's list of one update
        if len(given) != 1:
            raise HTTPError(422, "values must be one update: olav's state is the conversation")
        given = given[0]
    values = {"messages": _messages(given.messages)}
    as_node = body.as_node
    on = _checkpoint_id(body.checkpoint) or body.checkpoint_id
    return await anyio.to_thread.run_sync(
        lambda: update_state(server, operator, info, values, as_node=as_node, checkpoint=on)
    )


def update_state(
    server: Server,
    operator: str,
    info: ThreadInfo,
    values: dict[str, Any],
    *,
    as_node: str | None = None,
    checkpoint: str | None = None,
) -> A.NewCheckpoint:
    """Write ``values`` into the thread through its agent's graph, as a new checkpoint (on
    top of ``checkpoint`` when given), holding the thread as a run does so that no run
    writes beside it; the thread's turns are indexed again. Returns the new checkpoint."""
    from olav.runtime.threads import ThreadBusyError

    if not info.agent or info.agent not in server.agents:
        raise HTTPError(409, f"thread {info.known_as} has no agent yet: run it first")
    if server.runs.active(info.id) is not None:
        raise HTTPError(409, f"thread {info.known_as} has a run in progress")
    holder = f"state-{uuid.uuid4().hex[:12]}"
    try:
        server.threads.claim(info.id, holder, info.agent, operator)
    except ThreadBusyError as exc:
        raise HTTPError(409, exc.one_line()) from None
    try:
        with server.pool.session(operator, info.agent) as pooled:
            graph = pooled.session.built.graph
            config: dict[str, Any] = {"configurable": {"thread_id": info.id}}
            if checkpoint:
                config["configurable"]["checkpoint_id"] = checkpoint
                if not graph.get_state(config).created_at:
                    raise HTTPError(404, f"thread {info.known_as} has no checkpoint {checkpoint!r}")
            try:
                made = graph.update_state(config, values, as_node=as_node or "model")
            except (
                ValueError,
                TypeError,
                KeyError,
                NotImplementedError,
            ) as exc:  # a message it cannot read
                raise HTTPError(422, f"values: {str(exc).splitlines()[0][:200]}") from None
            state = graph.get_state({"configurable": {"thread_id": info.id}})
            messages = list((state.values or {}).get("messages") or [])
            server.threads.sync(info.id, messages, since=0 if checkpoint else None)
    finally:
        server.threads.release(info.id, holder)
    return A.NewCheckpoint(checkpoint=A.Checkpoint.of(info.known_as, made.get("configurable", {})))


MAX_MESSAGES = 100


def _messages(raw: Any) -> list[Any]:
    """The messages a client adds, read as LangChain reads them (``{"type"|"role": …,
    "content": …}``), or a 422 naming the first one that is not a message."""
    from langchain_core.messages import convert_to_messages

    items = raw if isinstance(raw, list) else [raw]
    if not isinstance(raw, list | dict) or not items or len(items) > MAX_MESSAGES:
        raise HTTPError(
            422, f"values.messages must be a message or a list of 1 to {MAX_MESSAGES} messages"
        )
    out = []
    for i, item in enumerate(items):
        try:
            out += convert_to_messages([item])
        except Exception as exc:  # LangChain raises several kinds for bad input
            why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise HTTPError(
                422,
                f"values.messages[{i}] is not a message ({why}): send "
                '{"type": "human" or "ai", "content": "…"}',
            ) from None
    return out
