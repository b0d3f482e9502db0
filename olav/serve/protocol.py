"""The Agent Protocol subset that langgraph-sdk, agent-chat-ui and LangGraph Studio use.

Every olav agent is an assistant whose ``assistant_id`` and ``graph_id`` are the agent's name.
Threads are olav's threads (the same store as the terminal: a thread started in ``olav chat``
continues here, and back), seen only by their operator. Runs stream server-sent events in the
modes ``values``, ``updates`` and ``messages-tuple``, numbered so that a client reconnecting
with ``Last-Event-ID`` gets what it missed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from olav.core.errors import OlavError
from olav.runtime.threads import UNFINISHED
from olav.serve.http import (
    MAX_LIMIT,
    MAX_NAME,
    HTTPError,
    bounded_object,
    ident,
    last_event_id,
    sse_response,
    text_field,
    window,
)
from olav.serve.runs import STATUSES


def _limit(body: dict[str, Any], default: int = 10) -> tuple[int, int]:
    return window(body, default)


# -- server and assistants ----------------------------------------------------------------------


def info(server: Any, request: Request, operator: str) -> dict[str, Any]:
    from olav import __version__

    return {
        "version": __version__,
        "olav": True,
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "operator": operator,
    }


async def assistants_search(server: Any, request: Request, operator: str) -> Any:
    body = await server.body(request)
    limit, offset = _limit(body)
    graph = body.get("graph_id")
    names = [n for n in sorted(server.agents) if graph in (None, n)]
    return [server.assistant(n) for n in names[offset : offset + limit]]


def assistant_get(server: Any, request: Request, operator: str) -> Any:
    return server.assistant(server.agent(request.path_params["assistant_id"]))


def assistant_graph(server: Any, request: Request, operator: str) -> Any:
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


def assistant_schemas(server: Any, request: Request, operator: str) -> Any:
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


async def threads_create(server: Any, request: Request, operator: str) -> Any:
    body = await server.body(request)
    metadata = bounded_object(body.get("metadata"))
    thread_id = ident(body.get("thread_id"), "thread_id", required=False)
    agent = metadata.get("graph_id") or metadata.get("assistant_id") or ""
    if agent:
        server.agent(agent)
    name = text_field(metadata.get("name"), "metadata.name", MAX_NAME) or ""
    # made and its owner read in one transaction: of two requests (two servers) that make one
    # id at once, one makes it and the other gets 409 (ThreadExistsError: another operator's)
    info, made = server.threads.insert(agent, thread_id, name, operator, metadata=metadata)
    if not made:  # the operator's own thread, left as it was
        if body.get("if_exists") != "do_nothing":
            raise HTTPError(409, f"thread {thread_id!r} exists")
        return await anyio.to_thread.run_sync(lambda: server.thread_json(info, operator=operator))
    return server.thread_json(info, with_values=False)


async def threads_search(server: Any, request: Request, operator: str) -> Any:
    body = await server.body(request)
    limit, offset = _limit(body)
    metadata = bounded_object(body.get("metadata"))
    status = body.get("status")
    agent = metadata.get("graph_id") or metadata.get("assistant_id")
    if agent is not None and not isinstance(agent, str):
        raise HTTPError(422, "metadata.graph_id must be a string")
    found = server.threads.recent(agent=agent, owner=operator, limit=MAX_LIMIT * 10)
    out = []
    for info in found:
        data = server.thread_json(info, with_values=False)
        wanted = {k: v for k, v in metadata.items() if k not in ("graph_id", "assistant_id")}
        if any(data["metadata"].get(k) != v for k, v in wanted.items()):
            continue
        if status and data["status"] != status:
            continue
        out.append(data)
    return out[offset : offset + limit]


def thread_get(server: Any, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    return server.thread_json(info, operator=operator)


async def thread_patch(server: Any, request: Request, operator: str) -> Any:
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


def thread_delete(server: Any, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    if server.runs.active(info.id) is not None:
        raise HTTPError(409, f"thread {info.id} has a run in progress; cancel it first")
    server.runs.delete_thread(info.id)  # its runs with it: nothing left for the id's next owner
    return Response(status_code=204)


def thread_state(server: Any, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    found = server.snapshots(operator, info)
    return server.state_json(info.id, found[0] if found else None)


async def thread_history(server: Any, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    body = await server.body(request) if request.method == "POST" else {}
    limit, _ = _limit(body)
    snaps = await anyio.to_thread.run_sync(server.snapshots, operator, info, limit)
    return [server.state_json(info.id, snap) for snap in snaps]


# -- runs ---------------------------------------------------------------------------------------


async def run_create(server: Any, request: Request, operator: str) -> Any:
    body = await server.body(request)
    run = server.start(server.new_run(operator, body, request.path_params["thread_id"]))
    return run.to_json()


async def run_stream(server: Any, request: Request, operator: str) -> Any:
    body = await server.body(request)
    thread_id = request.path_params.get("thread_id")
    run = server.start(server.new_run(operator, body, thread_id))
    location = f"/threads/{run.thread_id}/runs/{run.run_id}/stream"
    return sse_response(run, location="" if run.stateless else location)


async def run_wait(server: Any, request: Request, operator: str) -> Any:
    body = await server.body(request)
    run = server.start(server.new_run(operator, body, request.path_params.get("thread_id")))
    await run.ended()
    if run.status == "error":
        return JSONResponse({"__error__": {"error": "RunError", "message": run.error}})
    return run.values


def _run_of(server: Any, request: Request, operator: str) -> tuple[Any, Any]:
    """The operator's thread and its run: this server's, or one the thread store keeps (run by
    an earlier server, or by another one on the same database)."""
    info = server.thread(operator, request.path_params["thread_id"])
    run_id = request.path_params["run_id"]
    run = server.runs.find(info.id, run_id, operator)
    if run is None:
        raise HTTPError(404, f"no run {run_id!r} on thread {info.id}")
    return info, run


def run_get(server: Any, request: Request, operator: str) -> Any:
    return _run_of(server, request, operator)[1].to_json()


def runs_list(server: Any, request: Request, operator: str) -> Any:
    info = server.thread(operator, request.path_params["thread_id"])
    query = request.query_params
    limit, offset = _limit({k: _integer(k, query[k]) for k in ("limit", "offset") if k in query})
    status = query.get("status") or None
    if status is not None and status not in STATUSES:
        raise HTTPError(
            422, f"status {status!r} is not a run status; use one of: " + ", ".join(STATUSES)
        )
    runs = server.runs.thread_runs(info.id, operator, limit=limit, offset=offset, status=status)
    return [r.to_json() for r in runs]


def _integer(name: str, text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        raise HTTPError(422, f"{name} must be an integer, not {text!r}") from None


async def _follow(server: Any, operator: str, info: Any, run: Any) -> None:
    """A kept run brought to its end here: once it has finished (another server runs it, so
    its status is read from the store again), its events are the thread's values, its error
    and the end; the events of its own server are not kept."""
    ended = await server.runs.finished(run)
    values = await anyio.to_thread.run_sync(server.state_values, operator, info)
    run.status, run.error, run.updated_at = ended.status, ended.error, ended.updated_at
    run.replay(values)


async def _follow_stream(server: Any, operator: str, info: Any, run: Any) -> None:
    try:
        await _follow(server, operator, info, run)
    except Exception as exc:  # its thread deleted meanwhile, the store gone: the stream ends
        detail = exc.one_line() if isinstance(exc, OlavError) else f"{type(exc).__name__}: {exc}"
        run.emit("error", {"error": type(exc).__name__, "message": detail})
        run.close()


_FOLLOWING: set[asyncio.Task[None]] = set()  # the streams' followers, kept from the collector


async def run_join(server: Any, request: Request, operator: str) -> Any:
    info, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:
        await _follow(server, operator, info, run)
    else:
        await run.ended()
    return run.values


async def run_join_stream(server: Any, request: Request, operator: str) -> Any:
    info, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:  # the stream starts now and waits, with heartbeats, for the run's end
        task = asyncio.create_task(_follow_stream(server, operator, info, run))
        _FOLLOWING.add(task)
        task.add_done_callback(_FOLLOWING.discard)
    return sse_response(run, last_event_id(request))


async def run_cancel(server: Any, request: Request, operator: str) -> Any:
    _, run = await anyio.to_thread.run_sync(_run_of, server, request, operator)
    if run.stored:
        if run.status in UNFINISHED:
            raise HTTPError(
                409, f"run {run.run_id} runs on another server; cancel it on that server"
            )
        return Response(status_code=200)  # it has ended: nothing to cancel
    server.runs.cancel(run)
    if request.query_params.get("wait") in ("1", "true"):
        await run.ended()
    return Response(status_code=202 if not run.done.is_set() else 200)


ROUTES: list[tuple[str, str, Any]] = [
    ("/info", "GET", info),
    ("/assistants/search", "POST", assistants_search),
    ("/assistants/{assistant_id}", "GET", assistant_get),
    ("/assistants/{assistant_id}/graph", "GET", assistant_graph),
    ("/assistants/{assistant_id}/schemas", "GET", assistant_schemas),
    ("/threads", "POST", threads_create),
    ("/threads/search", "POST", threads_search),
    ("/threads/{thread_id}", "GET", thread_get),
    ("/threads/{thread_id}", "PATCH", thread_patch),
    ("/threads/{thread_id}", "DELETE", thread_delete),
    ("/threads/{thread_id}/state", "GET", thread_state),
    ("/threads/{thread_id}/history", "POST", thread_history),
    ("/threads/{thread_id}/history", "GET", thread_history),
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
