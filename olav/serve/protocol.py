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
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from olav.core.errors import OlavError
from olav.serve.http import (
    MAX_LIMIT,
    MAX_NAME,
    HTTPError,
    bounded_object,
    event_filter,
    ident,
    last_event_id,
    sse_response,
    stream_modes,
    text_field,
    window,
)
from olav.serve.records import UNFINISHED
from olav.serve.run import STATUSES
from olav.serve.server import Server
from olav.serve.state_api import STATE_ROUTES, integer_of


def _limit(body: dict[str, Any], default: int = 10) -> tuple[int, int]:
    return window(body, default)


# -- server and assistants ----------------------------------------------------------------------


def info(server: Server, request: Request, operator: str) -> dict[str, Any]:
    from importlib.metadata import version

    from olav import __version__

    return {
        "version": __version__,
        "langgraph_py_version": version("langgraph"),
        "olav": True,
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "metadata": {},
        "operator": operator,
    }


async def assistants_search(server: Server, request: Request, operator: str) -> Any:
    body = await server.body(request)
    limit, offset = _limit(body)
    graph = body.get("graph_id")
    names = [n for n in sorted(server.agents) if graph in (None, n)]
    return [server.assistant(n) for n in names[offset : offset + limit]]


def assistant_get(server: Server, request: Request, operator: str) -> Any:
    return server.assistant(server.agent(request.path_params["assistant_id"]))


def assistant_graph(server: Server, request: Request, operator: str) -> Any:
    name = server.agent(request.path_params["assistant_id"])
    return {
        "nodes": [{"id": "__start__"}, {"id": "model"}, {"id": "tools"}, {"id": "__end__"}],
        "edges": [
            {"source": "__start__", "target": "model"},
            {"source": "model", "target": "tools", "conditional": True},
            {"source": "tools", "target": "model"},
            {"source": "model", "target": "__end__", "conditional": True},
        ],
        "name": name,
    }


def assistant_schemas(server: Server, request: Request, operator: str) -> Any:
    name = server.agent(request.path_params["assistant_id"])
    messages = {"type": "array", "items": {"type": "object"}}
    state = {"type": "object", "properties": {"messages": messages}}
    return {
        "graph_id": name,
        "input_schema": state,
        "output_schema": state,
        "state_schema": state,
        "config_schema": {"type": "object", "properties": {}},
        "context_schema": {"type": "object", "properties": {}},
    }


# -- threads ------------------------------------------------------------------------------------


async def threads_create(server: Server, request: Request, operator: str) -> Any:
    body = await server.body(request)
    metadata = bounded_object(body.get("metadata"))
    thread_id = ident(body.get("thread_id"), "thread_id", required=False)
    agent = metadata.get("graph_id") or metadata.get("assistant_id") or ""
    if agent:
        server.agent(agent)
    name = text_field(metadata.get("name"), "metadata.name", MAX_NAME) or ""
    # thread ids are per operator: another operator's thread with this id changes nothing
    # (ThreadStore.insert); of two of this operator's requests that make it at once, one
    # makes it and the other finds it made
    info, made = server.threads.insert(agent, thread_id, name, operator, metadata=metadata)
    if not made:  # the operator's own thread, left as it was
        if body.get("if_exists") != "do_nothing":
            raise HTTPError(409, f"thread {thread_id!r} exists")
        return await anyio.to_thread.run_sync(lambda: server.thread_json(info, operator=operator))
    return server.thread_json(info, with_values=False)


THREAD_FIELDS = (
    "thread_id",
    "created_at",
    "updated_at",
    "metadata",
    "status",
    "values",
    "interrupts",
)
SORT_KEYS = ("thread_id", "status", "created_at", "updated_at")


def _matching(server: Server, body: dict[str, Any], operator: str) -> list[tuple[Any, dict]]:
    """The operator's threads that a search or a count body's filters keep (``metadata``,
    ``status``, ``ids``), each with its JSON (no values)."""
    metadata = bounded_object(body.get("metadata"))
    status = body.get("status")
    agent = metadata.get("graph_id") or metadata.get("assistant_id")
    if agent is not None and not isinstance(agent, str):
        raise HTTPError(422, "metadata.graph_id must be a string")
    ids = body.get("ids")
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(ids) > 1000
    ):
        raise HTTPError(422, "ids must be a list of at most 1000 thread ids")
    for unread in ("values", "extract"):
        if body.get(unread) not in (None, {}):
            raise HTTPError(
                422, f"{unread} is not supported in a thread search: filter by metadata or status"
            )
    found = server.threads.recent(agent=agent, owner=operator, limit=MAX_LIMIT * 10)
    wanted = {k: v for k, v in metadata.items() if k not in ("graph_id", "assistant_id")}
    out = []
    for info in found:
        if ids is not None and info.known_as not in ids:
            continue
        data = server.thread_json(info, with_values=False)
        if any(data["metadata"].get(k) != v for k, v in wanted.items()):
            continue
        if status and data["status"] != status:
            continue
        out.append((info, data))
    return out


async def threads_search(server: Server, request: Request, operator: str) -> Any:
    body = await server.body(request)
    limit, offset = _limit(body)
    select = _select(body.get("select"))
    sort_by = body.get("sort_by") or "updated_at"
    if sort_by not in SORT_KEYS:
        raise HTTPError(
            422,
            f"sort_by {str(sort_by)[:40]!r} is not a thread field; use: " + ", ".join(SORT_KEYS),
        )
    order = body.get("sort_order") or "desc"
    if order not in ("asc", "desc"):
        raise HTTPError(422, f"sort_order {str(order)[:40]!r}: use 'asc' or 'desc'")
    out = _matching(server, body, operator)
    out.sort(key=lambda pair: pair[1][sort_by] or "", reverse=order == "desc")
    page = out[offset : offset + limit]
    if "values" in select or "interrupts" in select:  # the state, of this page's threads only
        page = await anyio.to_thread.run_sync(
            lambda: [(info, server.thread_json(info, operator=operator)) for info, _ in page]
        )
    return [{k: data[k] for k in select if k in data} for _, data in page]


async def threads_count(server: Server, request: Request, operator: str) -> Any:
    """How many of the operator's threads the filters keep (``POST /threads/count``)."""
    body = await server.body(request)
    return len(_matching(server, body, operator))


def _select(value: Any) -> tuple[str, ...]:
    """The fields a thread search returns (``select``): every one by default."""
    if value is None:
        return THREAD_FIELDS
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        raise HTTPError(422, "select must be a non-empty list of thread fields")
    unknown = [v for v in value if v not in THREAD_FIELDS]
    if unknown:
        raise HTTPError(
            422,
            f"select names {unknown[0][:40]!r}, which is not a thread field; the fields are: "
            + ", ".join(THREAD_FIELDS),
        )
    return tuple(value)


def thread_get(server: Server, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    return server.thread_json(info, operator=operator)


async def thread_patch(server: Server, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    body = await server.body(request)
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        raise HTTPError(422, "metadata must be an object")
    bounded_object(metadata)
    bounded_object({**info.metadata, **metadata}, "metadata, merged with the thread's,")
    text_field(metadata.get("name"), "metadata.name", MAX_NAME)
    if isinstance(metadata.get("name"), str):
        server.threads.rename(info.id, metadata["name"])
    return server.thread_json(server.threads.set_metadata(info.id, metadata), with_values=False)


def thread_delete(server: Server, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    if server.runs.active(info.id) is not None:
        raise HTTPError(409, f"thread {info.known_as} has a run in progress; cancel it first")
    server.runs.delete_thread(info.id)  # its runs with it: nothing left for the id's next owner
    return Response(status_code=204)


# -- runs ---------------------------------------------------------------------------------------


async def run_create(server: Server, request: Request, operator: str) -> Any:
    body = await server.body(request)
    run = server.start(server.new_run(operator, body, request.path_params["thread_id"]))
    return run.to_json()


async def run_stream(server: Server, request: Request, operator: str) -> Any:
    body = await server.body(request)
    thread_id = request.path_params.get("thread_id")
    run = server.start(server.new_run(operator, body, thread_id))
    location = f"/threads/{run.known_as}/runs/{run.run_id}/stream"
    return sse_response(
        run,
        location="" if run.stateless else location,
        cancel_on_disconnect=run.on_disconnect == "cancel",
    )


async def run_wait(server: Server, request: Request, operator: str) -> Any:
    body = await server.body(request)
    run = server.start(server.new_run(operator, body, request.path_params.get("thread_id")))
    await run.ended()
    if run.status == "error":
        return JSONResponse({"__error__": {"error": "RunError", "message": run.error}})
    return run.values


def _run_of(server: Server, request: Request, operator: str) -> tuple[Any, Any]:
    """The operator's thread and its run: this server's, or one the thread store keeps (run by
    an earlier server, or by another one on the same database)."""
    info = server.thread(operator, request.path_params["thread_id"])
    run_id = request.path_params["run_id"]
    run = server.runs.find(info.id, run_id, operator, known_as=info.known_as)
    if run is None:
        raise HTTPError(404, f"no run {run_id!r} on thread {info.known_as}")
    return info, run


def run_get(server: Server, request: Request, operator: str) -> Any:
    return _run_of(server, request, operator)[1].to_json()


def runs_list(server: Server, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    query = request.query_params
    limit, offset = _limit({k: integer_of(k, query[k]) for k in ("limit", "offset") if k in query})
    status = query.get("status") or None
    if status is not None and status not in STATUSES:
        raise HTTPError(
            422, f"status {status!r} is not a run status; use one of: " + ", ".join(STATUSES)
        )
    runs = server.runs.thread_runs(
        info.id, operator, known_as=info.known_as, limit=limit, offset=offset, status=status
    )
    return [r.to_json() for r in runs]


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


async def run_join(server: Server, request: Request, operator: str) -> Any:
    info, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:
        await _follow(server, operator, info, run)
    else:
        await run.ended()
    return run.values


async def run_join_stream(server: Server, request: Request, operator: str) -> Any:
    """The run's events again (after ``Last-Event-ID``); ``stream_mode`` (repeatable) keeps
    those modes' events only, ``cancel_on_disconnect=1`` cancels the run when the client goes
    away."""
    query = request.query_params
    # the SDK sends an empty stream_mode= for its default: every mode
    modes = stream_modes([m for m in query.getlist("stream_mode") if m] or None, ())
    cancel = query.get("cancel_on_disconnect") in ("1", "true")
    after = last_event_id(request)
    info, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:  # the stream starts now and waits, with heartbeats, for the run's end
        task = asyncio.create_task(_follow_stream(server, operator, info, run))
        _FOLLOWING.add(task)
        task.add_done_callback(_FOLLOWING.discard)
    return sse_response(
        run, after, only=event_filter(modes), cancel_on_disconnect=cancel and not run.stored
    )


async def run_cancel(server: Server, request: Request, operator: str) -> Any:
    """Cancel the run: ``204`` once it has ended (``wait=1`` waits for that), ``202`` while it
    is ending; no body either way, which every SDK reads as nothing (the JavaScript one parses
    any other answer as JSON). ``action=interrupt`` only: olav keeps what the run did."""
    action = request.query_params.get("action") or "interrupt"
    if action != "interrupt":
        raise HTTPError(
            422,
            f"action {action[:40]!r} is not supported: olav cancels with 'interrupt' (the "
            "thread keeps its last completed step); to go back, run from an earlier checkpoint",
        )
    _, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:
        if run.status in UNFINISHED:
            raise HTTPError(
                409, f"run {run.run_id} runs on another server; cancel it on that server"
            )
        return Response(status_code=204)  # it has ended: nothing to cancel
    server.runs.cancel(run)
    if request.query_params.get("wait") in ("1", "true"):
        await run.ended()
    return Response(status_code=204 if run.done.is_set() else 202)


ROUTES: list[tuple[str, str, Any]] = [
    ("/info", "GET", info),
    ("/assistants/search", "POST", assistants_search),
    ("/assistants/{assistant_id}", "GET", assistant_get),
    ("/assistants/{assistant_id}/graph", "GET", assistant_graph),
    ("/assistants/{assistant_id}/schemas", "GET", assistant_schemas),
    ("/threads", "POST", threads_create),
    ("/threads/search", "POST", threads_search),
    ("/threads/count", "POST", threads_count),
    ("/threads/{thread_id}", "GET", thread_get),
    ("/threads/{thread_id}", "PATCH", thread_patch),
    ("/threads/{thread_id}", "DELETE", thread_delete),
    *STATE_ROUTES,
    ("/threads/{thread_id}/runs", "POST", run_create),
    ("/threads/{thread_id}/runs", "GET", runs_list),
    ("/threads/{thread_id}/runs/stream", "POST", run_stream),
    ("/threads/{thread_id}/runs/wait", "POST", run_wait),
    ("/threads/{thread_id}/runs/{run_id}", "GET", run_get),
    ("/threads/{thread_id}/runs/{run_id}/join", "GET", run_join),
    ("/threads/{thread_id}/runs/{run_id}/stream", "GET", run_join_stream),
    ("/threads/{thread_id}/runs/{run_id}/cancel", "POST", run_cancel),
    ("/runs/stream", "POST", run_stream),
    ("/runs/wait", "POST", run_wait),
]
