"""The Agent Protocol subset that langgraph-sdk, agent-chat-ui and LangGraph Studio use.

Every olav agent is an assistant whose ``assistant_id`` and ``graph_id`` are the agent's name.
Threads are olav's threads (the same store as the terminal: a thread started in ``olav chat``
continues here, and back), seen only by their operator. Runs stream server-sent events in
LangGraph's modes (``values``, ``updates``, ``messages``, ``messages-tuple``, ``custom``,
``events``, ``debug``, ``checkpoints``, ``tasks``), numbered so that a client reconnecting with
``Last-Event-ID`` gets what it missed. A run may start from one of the thread's checkpoints:
again (regenerate) or with a new request (edit), a new branch that the history shows.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import anyio
from pydantic import Field, JsonValue
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from olav.core.errors import OlavError
from olav.runtime.threads.model import ThreadInfo
from olav.serve import answers as A
from olav.serve.http import (
    MAX_LIMIT,
    MAX_NAME,
    HTTPError,
    bounded_object,
    event_filter,
    last_event_id,
    sse_response,
    stream_modes,
    text_field,
)
from olav.serve.records import UNFINISHED
from olav.serve.routing import Param, Reply, Routes
from olav.serve.schema import (
    THREAD_FIELDS,
    AssistantSearch,
    CancelQuery,
    JoinQuery,
    RunCreate,
    RunsQuery,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadSearch,
)
from olav.serve.server import Server
from olav.serve.state_api import STATE

API = Routes()
BODY = (413, 422)  # what a route that reads a body may answer besides its own
RUNS = (404, 409, 413, 422)


# -- server and assistants ----------------------------------------------------------------------


@API.get("/info", "the version and the request's operator", Reply("the server", A.Info))
def info(server: Server, request: Request, operator: str) -> A.Info:
    from importlib.metadata import version

    from olav import __version__

    return A.Info(
        version=__version__,
        langgraph_py_version=version("langgraph"),
        olav=True,
        flags={"assistants": True, "crons": False, "langsmith": False},
        metadata={},
        operator=operator,
    )


@API.post(
    "/assistants/search",
    "the agents",
    Reply("the agents", list[A.Assistant]),
    errors=BODY,
    body=AssistantSearch,
)
def assistants_search(
    server: Server, request: Request, operator: str, body: AssistantSearch
) -> list[A.Assistant]:
    names = [n for n in sorted(server.agents) if body.graph_id in (None, n)]
    return [server.assistant(n) for n in names[body.offset : body.offset + body.limit]]


@API.get(
    "/assistants/{assistant_id}", "one agent", Reply("the agent", A.Assistant), errors=(404, 422)
)
def assistant_get(server: Server, request: Request, operator: str) -> A.Assistant:
    return server.assistant(server.agent(request.path_params["assistant_id"]))


@API.get(
    "/assistants/{assistant_id}/graph",
    "the agent's graph",
    Reply("nodes and edges", A.Graph),
    errors=(404, 422),
)
def assistant_graph(server: Server, request: Request, operator: str) -> A.Graph:
    name = server.agent(request.path_params["assistant_id"])
    return A.Graph(
        nodes=[{"id": "__start__"}, {"id": "model"}, {"id": "tools"}, {"id": "__end__"}],
        edges=[
            {"source": "__start__", "target": "model"},
            {"source": "model", "target": "tools", "conditional": True},
            {"source": "tools", "target": "model"},
            {"source": "model", "target": "__end__", "conditional": True},
        ],
        name=name,
    )


@API.get(
    "/assistants/{assistant_id}/schemas",
    "the agent's state schemas",
    Reply("schemas", A.AssistantSchemas),
    errors=(404, 422),
)
def assistant_schemas(server: Server, request: Request, operator: str) -> A.AssistantSchemas:
    name = server.agent(request.path_params["assistant_id"])
    messages: dict[str, JsonValue] = {"type": "array", "items": {"type": "object"}}
    state: dict[str, JsonValue] = {"type": "object", "properties": {"messages": messages}}
    return A.AssistantSchemas(
        graph_id=name,
        input_schema=state,
        output_schema=state,
        state_schema=state,
        config_schema={"type": "object", "properties": {}},
        context_schema={"type": "object", "properties": {}},
    )


# -- threads ------------------------------------------------------------------------------------


@API.post(
    "/threads",
    "create a thread",
    Reply("the thread", A.Thread),
    errors=(404, 409, 413, 422),
    body=ThreadCreate,
)
async def threads_create(
    server: Server, request: Request, operator: str, body: ThreadCreate
) -> A.Thread:
    metadata, thread_id = body.metadata, body.thread_id
    named = metadata.get("graph_id") or metadata.get("assistant_id")
    agent = server.agent(named) if named else ""
    name = text_field(metadata.get("name"), "metadata.name", MAX_NAME) or ""
    # thread ids are per operator: another operator's thread with this id changes nothing
    # (ThreadStore.insert); of two of this operator's requests that make it at once, one
    # makes it and the other finds it made
    info, made = server.threads.insert(agent, thread_id, name, operator, metadata=metadata)
    if not made:  # the operator's own thread, left as it was
        if body.if_exists != "do_nothing":
            raise HTTPError(409, f"thread {thread_id!r} exists")
        return await anyio.to_thread.run_sync(lambda: server.thread_answer(info, operator=operator))
    return server.thread_answer(info, with_values=False)


def _matching(
    server: Server, body: ThreadCount, operator: str
) -> list[tuple[ThreadInfo, A.Thread]]:
    """The operator's threads that a search or a count body's filters keep (``metadata``,
    ``status``, ``ids``), each with its JSON (no values)."""
    metadata, status, ids = body.metadata, body.status, getattr(body, "ids", None)
    agent = metadata.get("graph_id") or metadata.get("assistant_id")
    if agent is not None and not isinstance(agent, str):
        raise HTTPError(422, "metadata.graph_id must be a string")
    for unread in ("values", "extract"):
        if getattr(body, unread, None) not in (None, {}):
            raise HTTPError(
                422, f"{unread} is not supported in a thread search: filter by metadata or status"
            )
    found = server.threads.recent(agent=agent, owner=operator, limit=MAX_LIMIT * 10)
    wanted = {k: v for k, v in metadata.items() if k not in ("graph_id", "assistant_id")}
    out = []
    for info in found:
        if ids is not None and info.known_as not in ids:
            continue
        thread = server.thread_answer(info, with_values=False)
        if any(thread.metadata.get(k) != v for k, v in wanted.items()):
            continue
        if status and thread.status != status:
            continue
        out.append((info, thread))
    return out


@API.post(
    "/threads/search",
    "the operator's threads",
    Reply("the threads", list[A.Thread]),
    errors=BODY,
    body=ThreadSearch,
)
async def threads_search(
    server: Server, request: Request, operator: str, body: ThreadSearch
) -> list[A.Thread]:
    select = tuple(body.select or THREAD_FIELDS)
    sort_by, order = body.sort_by or "updated_at", body.sort_order or "desc"
    out = _matching(server, body, operator)
    out.sort(key=lambda pair: getattr(pair[1], sort_by) or "", reverse=order == "desc")
    page = out[body.offset : body.offset + body.limit]
    if "values" in select or "interrupts" in select:  # the state, of this page's threads only
        page = await anyio.to_thread.run_sync(
            lambda: [(info, server.thread_answer(info, operator=operator)) for info, _ in page]
        )
    return [_only(thread, select) for _, thread in page]


def _only(thread: A.Thread, select: tuple[str, ...]) -> A.Thread:
    """The thread with the fields a search selects (those it has)."""
    kept = {k: getattr(thread, k) for k in select if k in thread.model_fields_set}
    return A.Thread.model_construct(_fields_set=set(kept), **kept)


@API.post(
    "/threads/count",
    "how many of the operator's threads the filters keep",
    Reply("the count", int),
    errors=BODY,
    body=ThreadCount,
)
def threads_count(server: Server, request: Request, operator: str, body: ThreadCount) -> int:
    """How many of the operator's threads the filters keep (``POST /threads/count``)."""
    return len(_matching(server, body, operator))


@API.get(
    "/threads/{thread_id}",
    "the thread with its values",
    Reply("the thread", A.Thread),
    errors=(404, 422),
)
def thread_get(server: Server, request: Request, operator: str) -> A.Thread:
    info = server.thread(operator, request.path_params["thread_id"])
    return server.thread_answer(info, operator=operator)


@API.add(
    "PATCH",
    "/threads/{thread_id}",
    "merge metadata (a name renames the thread)",
    Reply("the thread", A.Thread),
    errors=(404, 413, 422),
    body=ThreadPatch,
    body_required=True,
)
def thread_patch(server: Server, request: Request, operator: str, body: ThreadPatch) -> A.Thread:
    info = server.thread(operator, request.path_params["thread_id"])
    metadata = body.metadata.model_dump(exclude_unset=True)
    bounded_object({**info.metadata, **metadata}, "metadata, merged with the thread's,")
    if isinstance(metadata.get("name"), str):
        server.threads.rename(info.id, metadata["name"])
    return server.thread_answer(server.threads.set_metadata(info.id, metadata), with_values=False)


@API.add(
    "DELETE",
    "/threads/{thread_id}",
    "delete the thread and its checkpoints",
    {204: Reply("deleted")},
    errors=(404, 409, 422),
)
def thread_delete(server: Server, request: Request, operator: str) -> Response:
    info = server.thread(operator, request.path_params["thread_id"])
    if server.runs.active(info.id) is not None:
        raise HTTPError(409, f"thread {info.known_as} has a run in progress; cancel it first")
    server.runs.delete_thread(info.id)  # its runs with it: nothing left for the id's next owner
    return Response(status_code=204)


# -- runs ---------------------------------------------------------------------------------------


STARTS = dict(errors=RUNS, body=RunCreate, body_required=True)
EVENTS = Reply("the run's events", events=A.Event)
VALUES = Reply("the values", A.Values)


@API.post(
    "/threads/{thread_id}/runs", "start a run in the background", Reply("the run", A.Run), **STARTS
)
async def run_create(server: Server, request: Request, operator: str, body: RunCreate) -> A.Run:
    run = server.start(server.new_run(operator, body, request.path_params["thread_id"]))
    return A.Run(**run.to_json())


@API.post("/threads/{thread_id}/runs/stream", "start a run and stream its events", EVENTS, **STARTS)
@API.post("/runs/stream", "start a run and stream its events", EVENTS, **STARTS)
async def run_stream(server: Server, request: Request, operator: str, body: RunCreate) -> Response:
    thread_id = request.path_params.get("thread_id")
    run = server.start(server.new_run(operator, body, thread_id))
    location = f"/threads/{run.known_as}/runs/{run.run_id}/stream"
    return sse_response(
        run,
        location="" if run.stateless else location,
        cancel_on_disconnect=run.on_disconnect == "cancel",
    )


@API.post(
    "/threads/{thread_id}/runs/wait",
    "start a run and return the thread's values when it ends",
    VALUES,
    **STARTS,
)
@API.post("/runs/wait", "start a run and return the thread's values when it ends", VALUES, **STARTS)
async def run_wait(
    server: Server, request: Request, operator: str, body: RunCreate
) -> A.Values | Response:
    run = server.start(server.new_run(operator, body, request.path_params.get("thread_id")))
    await run.ended()
    if run.status == "error":
        return JSONResponse({"__error__": {"error": "RunError", "message": run.error}})
    return A.Values.model_validate(run.values)


def _run_of(server: Server, request: Request, operator: str) -> tuple[Any, Any]:
    """The operator's thread and its run: this server's, or one the thread store keeps (run by
    an earlier server, or by another one on the same database)."""
    info = server.thread(operator, request.path_params["thread_id"])
    run_id = request.path_params["run_id"]
    run = server.runs.find(info.id, run_id, operator, known_as=info.known_as)
    if run is None:
        raise HTTPError(404, f"no run {run_id!r} on thread {info.known_as}")
    return info, run


@API.get(
    "/threads/{thread_id}/runs/{run_id}", "one run", Reply("the run", A.Run), errors=(404, 422)
)
def run_get(server: Server, request: Request, operator: str) -> A.Run:
    return A.Run(**_run_of(server, request, operator)[1].to_json())


@API.get(
    "/threads/{thread_id}/runs",
    "the thread's runs, newest first",
    Reply("the runs", list[A.Run]),
    errors=(404, 422),
    query=RunsQuery,
)
def runs_list(server: Server, request: Request, operator: str, query: RunsQuery) -> list[A.Run]:
    info = server.thread(operator, request.path_params["thread_id"])
    runs = server.runs.thread_runs(
        info.id,
        operator,
        known_as=info.known_as,
        limit=query.limit,
        offset=query.offset,
        status=query.status,
    )
    return [A.Run(**r.to_json()) for r in runs]


async def _follow(server: Server, operator: str, info: Any, run: Any) -> None:
    """A kept run brought to its end here: once it has finished (another server runs it, so
    its status is read from the store again), its events are the thread's values, its error
    and the end; the events of its own server are not kept."""
    ended = await server.runs.finished(run)
    values = await anyio.to_thread.run_sync(server.state_values, operator, info)
    run.status, run.error, run.updated_at = ended.status, ended.error, ended.updated_at
    run.replay(values)


async def _follow_stream(server: Server, operator: str, info: Any, run: Any) -> None:
    try:
        await _follow(server, operator, info, run)
    except Exception as exc:  # its thread deleted meanwhile, the store gone: the stream ends
        detail = exc.one_line() if isinstance(exc, OlavError) else f"{type(exc).__name__}: {exc}"
        run.emit("error", {"error": type(exc).__name__, "message": detail})
        run.close()


_FOLLOWING: set[asyncio.Task[None]] = set()  # the streams' followers, kept from the collector


@API.get(
    "/threads/{thread_id}/runs/{run_id}/join",
    "wait for the run; the thread's values",
    VALUES,
    errors=(404, 422),
)
async def run_join(server: Server, request: Request, operator: str) -> A.Values:
    info, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:
        await _follow(server, operator, info, run)
    else:
        await run.ended()
    return A.Values.model_validate(run.values)


@API.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    "the run's events again, after Last-Event-ID",
    EVENTS,
    errors=(404, 422),
    params=(Param("Last-Event-ID", "header", Annotated[str, Field(pattern="^[0-9]{1,15}$")]),),
    query=JoinQuery,
)
async def run_join_stream(
    server: Server, request: Request, operator: str, query: JoinQuery
) -> Response:
    """The run's events again (after ``Last-Event-ID``); ``stream_mode`` (repeatable) keeps
    those modes' events only, ``cancel_on_disconnect=1`` cancels the run when the client goes
    away."""
    modes = stream_modes(query.stream_mode or None, ())  # none: every mode
    cancel = query.cancel_on_disconnect in ("1", "true")
    after = last_event_id(request)
    info, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:  # the stream starts now and waits, with heartbeats, for the run's end
        task = asyncio.create_task(_follow_stream(server, operator, info, run))
        _FOLLOWING.add(task)
        task.add_done_callback(_FOLLOWING.discard)
    return sse_response(
        run, after, only=event_filter(modes), cancel_on_disconnect=cancel and not run.stored
    )


@API.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    "cancel the run",
    {204: Reply("it has ended"), 202: Reply("it will end at its next step")},
    errors=(404, 409, 422),
    query=CancelQuery,
)
async def run_cancel(
    server: Server, request: Request, operator: str, query: CancelQuery
) -> Response:
    """Cancel the run: ``204`` once it has ended (``wait=1`` waits for that), ``202`` while it
    is ending; no body either way, which every SDK reads as nothing (the JavaScript one parses
    any other answer as JSON). ``action=interrupt`` only: olav keeps what the run did."""
    _, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:
        if run.status in UNFINISHED:
            raise HTTPError(
                409, f"run {run.run_id} runs on another server; cancel it on that server"
            )
        return Response(status_code=204)  # it has ended: nothing to cancel
    server.runs.cancel(run)
    if query.wait in ("1", "true"):
        await run.ended()
    return Response(status_code=204 if run.done.is_set() else 202)


ROUTES = [*API.ops, *STATE.ops]  # the Agent Protocol's routes
