"""Runs on the server: a pool of agent sessions, one run per thread, and each run's events.

A :class:`~olav.runtime.runner.Session` runs one run at a time (its RunContext is the run's), so
the server keeps a pool per operator and agent: a run takes an idle session or builds one, and
gives it back when it ends. All sessions share one memory table. A session is built on its
operator's configuration (``memory.user`` is the token's operator), so recall, capture and the
audit see that operator and only that operator's private memories.

A run executes on a worker thread. What it does becomes events (``metadata``, ``values``,
``updates``, ``messages``, ``error``, ``end``), numbered and kept until the run is forgotten, so
a client that reconnects with ``Last-Event-ID`` gets what it missed, and ``join`` waits for the
end. One run per thread: a second one is refused (409) or, when the client asks for
``multitask_strategy: enqueue``, waits for the first; across processes the thread store's claim
enforces the same rule.

Every run is also kept in the thread store (``olav_runs``) when it is accepted and at each change
of its status, so a GET of it, a list of its thread's runs and a join still find it after a
restart, or on another server that shares the threads database. A kept run that says it is
pending or running, though the server that ran it is gone, is reported, and recorded, ``error``.
The store also keeps how far the run's event numbers may have gone (reserved a block ahead,
so that a stream costs a write every ``RESERVE`` events, not every token): a stream of the run
replayed after its server numbers its events after every one a client can have seen, and a
``Last-Event-ID`` resumes it exactly.

A run is its operator's: every lookup (a run, a thread's runs) names the operator, and another
operator's run is not found. Deleting a thread forgets its runs here and in the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from olav.core.config import Workspace
from olav.core.errors import OlavError
from olav.core.log import get_logger
from olav.core.procs import pid_alive
from olav.runtime.threads import UNFINISHED, RunRecord, ThreadNotFoundError

if TYPE_CHECKING:
    from olav.runtime.middleware import Decision

log = get_logger("serve.runs")
WORKERS = 32
KEEP_FINISHED = 512  # finished runs kept for join, reconnect and GET
STATUSES = ("pending", "running", "success", "error", "interrupted", "timeout")
POLL_S = 0.5  # how often a join of a run that another server runs reads its status again
RESERVE = 64  # stream event numbers reserved in the store at a time
# why the server refused a tool nobody could be asked about (the OpenAI endpoint), by whether
# it is a memory commit: what the model is told, so that it does not say the user refused
_POLICY = {
    False: "olav serve runs this tool only when a person approves it (an Agent Protocol "
    "client) or when the server was started with --auto-approve; this endpoint cannot ask one",
    True: "olav serve never commits to memory without a person's confirmation, which this "
    "endpoint cannot ask for; the draft stays, for `olav kb drafts confirm`",
}
STOPPED = {  # why a kept run whose server is gone ended, by the status it was left in
    "pending": "the server stopped before it started",
    "running": "the server stopped while it ran",
}


class ClientCancelled(KeyboardInterrupt):
    """Raised inside a run whose client cancelled it: the runner records it ``cancelled``,
    exactly as a Ctrl-C in the terminal."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def dump_message(message: Any) -> dict[str, Any]:
    """A LangChain message as the Agent Protocol sends it (the model's fields, flat)."""
    if hasattr(message, "model_dump"):
        data = dict(message.model_dump())
    elif isinstance(message, dict):
        data = dict(message)
    else:
        data = {"type": "unknown", "content": str(message)}
    extra = data.get("additional_kwargs")
    if isinstance(extra, dict) and "reasoning_content" in extra:  # never to a client
        data["additional_kwargs"] = {k: v for k, v in extra.items() if k != "reasoning_content"}
    return data


def dump_values(values: Any, cache: dict[int, tuple[Any, Any]] | None = None) -> dict[str, Any]:
    """A graph state's values (messages and the rest) as JSON-safe data. ``cache``: the
    messages dumped already (by object), which a run's steps share: each step's values, its
    checkpoint and its debug event hold the same messages, and a long thread many."""
    if not isinstance(values, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == "messages" and isinstance(value, list):
            out[key] = [_dumped(m, cache) for m in value]
        elif key in ("files", "todos", "messages"):
            out[key] = value if _jsonable(value) else str(value)
    return out


def _dumped(message: Any, cache: dict[int, tuple[Any, Any]] | None) -> Any:
    """``message`` dumped, once per run while it stays as it was: the cache keeps the object
    (so that its id names it alone) and what it looked like (a middleware may change a message
    in place: its text, its tool calls, its extra fields)."""
    if cache is None:
        return dump_message(message)
    look = (
        getattr(message, "id", None),
        len(str(getattr(message, "content", ""))),
        len(getattr(message, "tool_calls", None) or ()),
        len(getattr(message, "additional_kwargs", None) or ()),
    )
    kept = cache.get(id(message))
    if kept is None or kept[0][0] is not message or kept[0][1] != look:
        kept = cache[id(message)] = ((message, look), dump_message(message))
    return kept[1]


def _jsonable(value: Any) -> bool:
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def operator_workspace(ws: Workspace, operator: str) -> Workspace:
    """``ws`` as ``operator`` sees it: their ``memory.user``, everything else the same."""
    values = {**ws.config.values, "memory.user": operator}
    # the rest of the configuration as it is: the memory policy and where each value came from
    return Workspace(root=ws.root, config=dataclasses.replace(ws.config, values=values))


@dataclass
class Run:
    run_id: str
    thread_id: str
    assistant_id: str
    operator: str
    text: str
    history: list[Any]  # earlier messages to seed a new thread with (the OpenAI API)
    stream_modes: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    multitask_strategy: str = "reject"
    stateless: bool = False
    # an approval may pause the run with an interrupt (the Agent Protocol); False for the
    # OpenAI endpoint, which has no way to answer one: dangerous tools are refused there
    interruptible: bool = True
    resume: Any = None  # the person's answer to the interrupt this run continues (None: none)
    # the run ends the thread's wait instead (command goto "__end__": agent-chat-ui's "Mark as
    # resolved"): the tool waiting for approval does not run, and the thread is idle
    resolve: bool = False
    # the checkpoint of the thread the run starts from (a new branch): with ``text`` it forks
    # there with a new request (edit), without it runs again from there (regenerate)
    checkpoint: str | None = None
    on_disconnect: str = "continue"  # "cancel": a stream's client that goes away cancels it
    interrupts: list[dict[str, Any]] = field(default_factory=list)  # where it paused
    status: str = "pending"
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    error: str = ""
    answer: str = ""
    unshown: str = ""  # the end of the answer the token stream held back
    usage: dict[str, Any] = field(default_factory=dict)  # the run's model calls and tokens
    outcome: str = ""
    audit_run_id: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    # kept in the thread store by another process (an earlier server, or another one on the
    # same database): its status is the store's, its events were that process's
    stored: bool = False
    events: list[tuple[int, str, Any]] = field(default_factory=list)
    # the number of the event before the first in ``events`` (a replay's: its server's last)
    first_after: int = 0
    # event numbers up to this one are reserved in the store; ``reserve`` reserves more
    reserved: int = 0
    reserve: Callable[[int], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    # orders the writers of events, so a number is reserved before anyone can see it; the
    # readers (streams on the event loop) never wait on it, nor on the store
    _emitting: threading.Lock = field(default_factory=threading.Lock)
    # the event loops' waiters (streams, joins): woken by every event, no thread held
    _waiters: list[tuple[Any, Any]] = field(default_factory=list)
    _message_id: str = field(default_factory=lambda: f"run-{uuid.uuid4()}")
    _partial: dict[str, str] = field(default_factory=dict)  # "messages": the text so far, by id
    _dumps: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # dump_values' cache

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "status": self.status,
            "metadata": self.metadata,
            "kwargs": self.kwargs(),
            "multitask_strategy": self.multitask_strategy,
            "error": self.error,  # why it failed or was interrupted ("" when it did not)
        }

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stream_mode": list(self.stream_modes)}
        if self.checkpoint:
            out["checkpoint_id"] = self.checkpoint
        return out

    def record(self) -> RunRecord:
        """The run as the thread store keeps it (this process runs it)."""
        return RunRecord(
            run_id=self.run_id,
            thread_id=self.thread_id,
            assistant_id=self.assistant_id,
            owner=self.operator,
            status=self.status,
            created_at=_epoch(self.created_at),
            updated_at=_epoch(self.updated_at),
            metadata=self.metadata,
            kwargs=self.kwargs(),
            multitask_strategy=self.multitask_strategy,
            error=self.error,
            events=self.reserved,
        )

    @classmethod
    def from_record(cls, rec: RunRecord) -> Run:
        """A run another process kept: its status, to show; it runs nothing here."""
        modes = rec.kwargs.get("stream_mode")
        return cls(
            run_id=rec.run_id,
            thread_id=rec.thread_id,
            assistant_id=rec.assistant_id,
            operator=rec.owner,
            text="",
            history=[],
            stream_modes=tuple(str(m) for m in modes) if isinstance(modes, list) else ("values",),
            metadata=rec.metadata,
            multitask_strategy=rec.multitask_strategy,
            status=rec.status,
            created_at=_iso(rec.created_at),
            updated_at=_iso(rec.updated_at),
            error=rec.error,
            stored=True,
            first_after=rec.events,
        )

    def replay(self, values: dict[str, Any]) -> None:
        """A finished kept run's events, for a stream that joins it after its server: the
        thread's values (when the run streamed them), its error, and the end, numbered after
        every event its server can have sent."""
        self.values = values
        if "values" in self.stream_modes:
            self.emit("values", values)
        if self.status == "error" and self.error:
            self.emit("error", {"error": "RunError", "message": self.error})
        self.close()

    # -- events -------------------------------------------------------------------------------

    @property
    def last_event(self) -> int:
        """The number of the run's last event so far."""
        return self.first_after + len(self.events)

    def emit(self, event: str, data: Any) -> None:
        with self._emitting:
            if self.done.is_set():  # after the end (a run the server gave up at shutdown)
                return
            self._reserve_next()
            with self._cond:
                self.events.append((self.last_event + 1, event, data))
                self._wake()

    def _reserve_next(self) -> None:
        """Make sure the store knows the next event's number may be sent (a block more when
        it does not), before anyone can see it."""
        number = self.last_event + 1
        if self.reserve is None or number <= self.reserved:
            return
        self.reserved = number + RESERVE - 1
        try:
            self.reserve(self.reserved)
        except Exception as exc:  # the store gone: the run goes on, a replay may renumber
            log.warning("run %s: its event numbers not kept (%s)", self.run_id, exc)

    def finish(self, status: str) -> None:
        with self._cond:
            if self.done.is_set():
                return
            self.status = status
            self.updated_at = now_iso()

    def close(self) -> None:
        """The last event, ``end``, and ``done`` at once: a stream that sees the run done has
        seen every event, and whoever waits for ``done`` finds the run's aftermath (a stateless
        run's thread deleted) already behind it. Once only."""
        with self._emitting:
            if self.done.is_set():
                return
            self._reserve_next()
            with self._cond:
                end = {"run_id": self.run_id, "status": self.status}
                self.events.append((self.last_event + 1, "end", end))
                self.done.set()
                self._wake()

    def _wake(self) -> None:
        self._cond.notify_all()
        for loop, event in self._waiters:
            if event.is_set():  # woken already, not yet gone: a burst of events wakes it once
                continue
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                loop.call_soon_threadsafe(event.set)

    async def next_events(
        self, after: int, timeout: float
    ) -> tuple[list[tuple[int, str, Any]], bool]:
        """The events numbered above ``after`` (waiting up to ``timeout`` for one), and whether
        the run has ended. It waits on the event loop without holding a thread, so any number
        of streams can be open, and a request that goes away stops waiting at once."""
        import asyncio

        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        with self._cond:
            if self.last_event > max(after, self.first_after) or self.done.is_set():
                return self._after(after), self.done.is_set()
            self._waiters.append(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # no task per wait, unlike wait_for
                    await event.wait()
        finally:
            with self._cond:
                self._waiters.remove(waiter)
        with self._cond:
            return self._after(after), self.done.is_set()

    def _after(self, after: int) -> list[tuple[int, str, Any]]:
        return self.events[max(0, after - self.first_after) :]

    async def ended(self) -> None:
        """Wait (on the event loop) until the run has ended."""
        seen = 0
        while True:
            events, done = await self.next_events(seen, 60.0)
            if done:
                return
            if events:
                seen = events[-1][0]

    # -- what the session reports -------------------------------------------------------------

    def graph_modes(self) -> tuple[str, ...]:
        """The stream modes of LangGraph the run needs beyond the session's own (values,
        updates and messages): none for a run that streams only those, so that such a run
        costs what it did before."""
        wanted = set(self.stream_modes)
        modes = [m for m in ("custom", "checkpoints", "tasks", "debug") if m in wanted]
        if "events" in wanted and "tasks" not in modes:
            modes.append("tasks")  # the nodes' chain events come from the task events
        return tuple(modes)

    def on_start(self) -> None:
        if "events" in self.stream_modes:
            self._chain("on_chain_start", self.assistant_id, {"input": {"request": self.text}})

    def on_token(self, piece: str, message_id: str = "") -> None:
        if self.cancel.is_set():
            raise ClientCancelled()
        if not piece:
            return
        modes = self.stream_modes
        mid = message_id or self._message_id
        meta = {
            "langgraph_node": "model",
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "assistant_id": self.assistant_id,
        }
        chunk = {
            "type": "AIMessageChunk",
            "content": piece,
            "id": mid,
            "additional_kwargs": {},
            "response_metadata": {},
            "tool_calls": [],
            "tool_call_chunks": [],
        }
        if "messages-tuple" in modes:
            self.emit("messages", [chunk, meta])
        if "messages" in modes:  # LangGraph's "messages": metadata, then the text so far
            if mid not in self._partial:
                self._partial[mid] = ""
                self.emit("messages/metadata", {mid: {"metadata": meta}})
            self._partial[mid] += piece
            self.emit("messages/partial", [{**chunk, "type": "ai", "content": self._partial[mid]}])
        if "events" in modes:
            self._chain("on_chat_model_stream", "model", {"chunk": chunk}, meta)

    def on_step(self, mode: str, payload: Any) -> None:
        if self.cancel.is_set():
            raise ClientCancelled()
        modes = self.stream_modes
        if mode == "values":
            self.values = dump_values(payload, self._dumps if self.graph_modes() else None)
            if "values" in modes:
                self.emit("values", self.values)
            if self._partial:
                self._complete(self.values.get("messages") or [])
        elif mode == "updates" and "updates" in modes and isinstance(payload, dict):
            update = {
                node: dump_values(value) if isinstance(value, dict) else value
                for node, value in payload.items()
                if _jsonable_update(value)
            }
            if update:
                self.emit("updates", update)
        elif mode == "custom" and "custom" in modes:
            self.emit("custom", jsonable(payload))
        elif mode == "checkpoints" and "checkpoints" in modes:
            self.emit("checkpoints", checkpoint_json(self.thread_id, payload, self._dumps))
        elif mode == "tasks":
            if "tasks" in modes:
                self.emit("tasks", jsonable(payload, self._dumps))
            if "events" in modes and isinstance(payload, dict):
                name = str(payload.get("name") or "")
                if "triggers" in payload:
                    data = {"input": jsonable(payload.get("input"), self._dumps)}
                    self._chain("on_chain_start", name, data)
                else:
                    data = {"output": jsonable(payload.get("result"), self._dumps)}
                    self._chain("on_chain_end", name, data)
        elif mode == "debug" and "debug" in modes and isinstance(payload, dict):
            data = dict(payload)
            if data.get("type") == "checkpoint":
                data["payload"] = checkpoint_json(self.thread_id, data.get("payload"), self._dumps)
            else:
                data["payload"] = jsonable(data.get("payload"), self._dumps)
            self.emit("debug", data)  # type, step and timestamp are text and numbers

    def on_end(self) -> None:
        """The run's last events before ``end``: the messages not completed yet, and the
        graph's chain end."""
        if self._partial:
            self._complete((self.values or {}).get("messages") or [], every=True)
        if "events" in self.stream_modes:
            self._chain("on_chain_end", self.assistant_id, {"output": self.values})

    def _complete(self, messages: list[Any], *, every: bool = False) -> None:
        """``messages/complete`` for each streamed message the state now holds (``every``: the
        run has ended, so every one still open, as its text stands)."""
        stored = {m.get("id"): m for m in messages if isinstance(m, dict)}
        for mid in [m for m in self._partial if m in stored or every]:
            text = self._partial.pop(mid)
            whole = stored.get(mid) or {"type": "ai", "id": mid, "content": text}
            self.emit("messages/complete", [whole])

    def _chain(
        self, event: str, name: str, data: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> None:
        """One of LangChain's stream events (``events`` mode)."""
        self.emit(
            "events",
            {
                "event": event,
                "name": name,
                "run_id": self.run_id,
                "tags": [],
                "metadata": meta
                or {"run_id": self.run_id, "thread_id": self.thread_id, "langgraph_node": name},
                "data": data,
                "parent_ids": [],
            },
        )


def jsonable(value: Any, cache: dict[int, tuple[Any, Any]] | None = None) -> Any:
    """Whatever a graph streams (messages, interrupts, sends, pydantic models, dataclasses)
    as JSON-safe data: messages as the Agent Protocol sends them (``cache``: as
    :func:`dump_values`), anything else unknown as its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v, cache) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, cache) for v in value]
    if hasattr(value, "type") and hasattr(value, "content") and hasattr(value, "model_dump"):
        return _dumped(value, cache)  # a LangChain message: its dump is JSON-safe (SSE: str)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), cache)
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(), cache)
    if hasattr(value, "_asdict"):
        return jsonable(value._asdict(), cache)
    return str(value)


def checkpoint_json(
    thread_id: str, payload: Any, cache: dict[int, tuple[Any, Any]] | None = None
) -> Any:
    """A checkpoint as LangGraph's ``checkpoints`` mode streams it: its config, its parent's,
    its values (as a ``values`` event has them), metadata, next nodes and tasks."""
    if not isinstance(payload, dict):
        return jsonable(payload)

    def config(cfg: Any) -> dict[str, Any] | None:
        where = (cfg or {}).get("configurable") if isinstance(cfg, dict) else None
        if not where:
            return None
        keys = ("checkpoint_ns", "checkpoint_id")
        return {"configurable": {"thread_id": thread_id, **{k: where.get(k) for k in keys}}}

    return {
        "config": config(payload.get("config")),
        "parent_config": config(payload.get("parent_config")),
        "values": dump_values(payload.get("values"), cache),
        "metadata": jsonable(payload.get("metadata")),
        "next": jsonable(payload.get("next") or []),
        "tasks": jsonable(payload.get("tasks") or [], cache),
    }


RESOLVED_TEXT = "(the approval marked as resolved: nothing ran)"  # the audit's request


def resolved_note(name: str) -> str:
    """What the thread keeps, and the model reads, for a tool call whose approval a person
    marked as resolved."""
    return (
        f"Error: {name} did not run: the user marked its approval as resolved without approving it."
    )


def end_wait(session: Any, run: Run) -> Any:
    """End the wait of a thread paused at an approval, without running the tool (a run with
    ``command: {"goto": "__end__"}``, agent-chat-ui's *Mark as resolved*).

    The pending tasks are ended as LangGraph's ``update_state(None, as_node=END)`` ends them
    (agent-inbox's resolve; a run with ``Command(goto=END)`` alone would run the waiting node
    again, and it would ask again): the thread is idle. Each tool call left without a result
    gets one that says the person marked it resolved (the model reads it on the next turn,
    instead of deepagents' "did not complete"). Audited as a run of the thread with a
    ``denial`` per waiting action, ``decision: "resolve"``: the token's operator decided, and
    the tool did not run."""
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.constants import END

    from olav.memory.store.scopes import user_name
    from olav.runtime.runner import TurnResult

    graph = session.built.graph
    config: dict[str, Any] = {"configurable": {"thread_id": run.thread_id}}
    waiting = list(graph.get_state(config).interrupts or ())
    claim = uuid.uuid4().hex
    session.threads.claim(run.thread_id, claim, session.agent_name, user_name(session.ws.config))
    audit = session.audit
    audit_id = audit.start_run(
        session.agent_name,
        session.session_id,
        RESOLVED_TEXT,
        session.built.model_name,
        thread_id=run.thread_id,
    )
    try:
        audit.message(audit_id, "user", RESOLVED_TEXT)
        for asked in waiting:
            value = asked.value if isinstance(asked.value, dict) else {}
            for action in value.get("action_requests") or []:
                detail = {"tool": action.get("name"), "args": action.get("args") or {}}
                audit.event(
                    audit_id, "denial", {**detail, "decision": "resolve", "agent": run.assistant_id}
                )
        graph.update_state(config, None, as_node=END)  # the pending tasks end here
        messages = list((graph.get_state(config).values or {}).get("messages") or [])
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        notes = [
            ToolMessage(
                content=resolved_note(call["name"]),
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
            for call in (last.tool_calls if last is not None else [])
            if call.get("id") and call["id"] not in answered
        ]
        if notes:  # written as the tools node's results, then that step ended as well
            graph.update_state(config, {"messages": notes}, as_node="tools")
            graph.update_state(config, None, as_node=END)
        state = graph.get_state(config)
        session.threads.sync(run.thread_id, list((state.values or {}).get("messages") or []))
        audit.end_run(audit_id, "completed")
    except Exception as exc:
        audit.end_run(audit_id, "error", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        session.threads.release(run.thread_id, claim)
    run.on_step("values", state.values)
    return TurnResult(run_id=audit_id, answer="", status="completed")


def approval_request(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What an interrupt asks, in LangChain v1's human-in-the-loop shape (a HITLRequest, which
    agent-chat-ui and deep-agents-ui render): the action, its arguments and description, and
    the decisions it takes: approve and reject, and edit for a tool whose arguments a person
    may change (never a memory commit, whose preview is what they agree to). The keys of
    agent-inbox's older shape (a HumanInterrupt) are there too, for clients that read it."""
    from olav.runtime.tools import NEEDS_CONSENT

    consent = name in NEEDS_CONSENT
    if consent:
        subject = str(args.get("subject", ""))
        text = f"{name} would store {subject} in memory:\n{args.get('preview', '')}"
    else:
        text = f"{name} needs your approval before it runs."
    allowed = ["approve", "reject"] if consent else ["approve", "edit", "reject"]
    return {
        "action_requests": [{"name": name, "args": args, "description": text}],
        "review_configs": [{"action_name": name, "allowed_decisions": allowed}],
        "action_request": {"action": name, "args": args},
        "config": {
            "allow_accept": True,
            "allow_ignore": True,
            "allow_respond": True,
            "allow_edit": not consent,
        },
        "description": text,
    }


_YES = {"y", "yes", "accept", "approve", "approved", "allow", "true", "ok"}
_NO = {"n", "no", "ignore", "reject", "rejected", "deny", "denied", "false", "cancel"}
ANSWER_SHAPES = (
    '{"decisions": [{"type": "approve"}]}, {"decisions": [{"type": "edit", "edited_action": '
    '{"name": TOOL, "args": {...}}}]}, {"decisions": [{"type": "reject", "message": "why"}]}, '
    'agent-inbox\'s [{"type": "accept" | "ignore" | "response" | "edit", "args": ...}], '
    'or "yes" / "no"'
)


class AnswerError(ValueError):
    """A client's answer to an approval that olav cannot read (the request's 422)."""


@dataclass(frozen=True)
class Answer:
    """A person's answer to an approval, read: ``kind`` approve, edit or reject; ``name`` and
    ``args`` of an edit; ``message`` of a rejection (their words for the model)."""

    kind: str
    name: str = ""
    args: dict[str, Any] | None = None
    message: str = ""

    def decision(self) -> Decision:
        from olav.runtime.middleware import Decision

        return Decision(
            approved=self.kind != "reject",
            args=self.args if self.kind == "edit" else None,
            message=self.message,
        )


def read_answer(value: Any) -> Answer:
    """A client's answer to an approval, in any shape olav reads: LangChain v1's
    ``{"decisions": [DECISION]}`` (or one DECISION), agent-inbox's ``[{"type": "accept"}]``
    and its other responses, ``{"approve": bool}``, ``true`` / ``false``, ``"yes"`` /
    ``"no"``. :class:`AnswerError`, naming the shapes, for anything else: an answer is never
    taken as a no because it could not be read."""
    if isinstance(value, dict) and "decisions" in value:
        decisions = value["decisions"]
        if not isinstance(decisions, list) or len(decisions) != 1:
            count = len(decisions) if isinstance(decisions, list) else "not a list"
            raise AnswerError(
                f"resume.decisions must be a list of one decision (one action waits for it), "
                f"not {count}; send " + ANSWER_SHAPES
            )
        return _decision_of(decisions[0], "resume.decisions[0]")
    if isinstance(value, list):
        if len(value) != 1:
            raise AnswerError(
                f"resume is a list of {len(value)} answers; one action waits for one: send "
                + ANSWER_SHAPES
            )
        return _decision_of(value[0], "resume[0]")
    return _decision_of(value, "resume")


def _decision_of(value: Any, where: str) -> Answer:
    if isinstance(value, bool):
        return Answer("approve" if value else "reject")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _YES:
            return Answer("approve")
        if word in _NO:
            return Answer("reject")
        raise AnswerError(
            f"{where} {value[:40]!r} is neither a yes nor a no; send " + ANSWER_SHAPES
        )
    if not isinstance(value, dict):
        raise AnswerError(f"{where} must be a decision object; send " + ANSWER_SHAPES)
    if "approve" in value and "type" not in value:
        if not isinstance(value["approve"], bool):
            raise AnswerError(f"{where}.approve must be true or false")
        return Answer("approve" if value["approve"] else "reject")
    kind = value.get("type")
    if kind in ("approve", "accept"):
        return Answer("approve")
    if kind in ("reject", "ignore", "response"):
        # agent-inbox's "response" is the person's reply instead of the action: a no, with
        # their words for the model
        said = value.get("message") if kind != "response" else value.get("args")
        if said is not None and not isinstance(said, str):
            field_name = "args" if kind == "response" else "message"
            raise AnswerError(f"{where}.{field_name} must be text (the person's words)")
        return Answer("reject", message=(said or "").strip())
    if kind == "edit":
        action = value.get("edited_action")
        if action is None and isinstance(value.get("args"), dict):  # agent-inbox's edit
            inbox = value["args"]
            action = {"name": inbox.get("action"), "args": inbox.get("args")}
        if not isinstance(action, dict):
            raise AnswerError(
                f'{where} is an edit without edited_action: send {{"type": "edit", '
                '"edited_action": {"name": TOOL, "args": {...}}}'
            )
        name, args = action.get("name"), action.get("args")
        if not isinstance(name, str) or not isinstance(args, dict):
            raise AnswerError(
                f"{where}.edited_action must have a name (the tool) and args (an object)"
            )
        return Answer("edit", name=name, args=args)
    if kind == "respond":
        raise AnswerError(
            f"{where}: 'respond' is not a decision olav offers (a tool's result is the tool's); "
            "send approve, edit or reject"
        )
    shown = str(kind)[:40] if kind is not None else "no type"
    raise AnswerError(f"{where} has {shown!r}, which is not a decision; send " + ANSWER_SHAPES)


def check_answer(answer: Answer, asked: Any) -> None:
    """An answer against the interrupt it answers (its value, as approval_request made it):
    an edit must be offered for that action and keep its name."""
    if answer.kind != "edit" or not isinstance(asked, dict):
        return
    requests = asked.get("action_requests") or []
    configs = asked.get("review_configs") or []
    name = str(requests[0].get("name")) if requests and isinstance(requests[0], dict) else ""
    allowed = configs[0].get("allowed_decisions", []) if configs else []
    if "edit" not in allowed:
        raise AnswerError(
            f"{name or 'this action'} takes no edit: its decisions are " + ", ".join(allowed)
        )
    if name and answer.name != name:
        raise AnswerError(
            f"edited_action.name is {answer.name[:60]!r}, but the action waiting is {name!r}: "
            "an edit changes the arguments, not the tool"
        )


def approved(answer: Any) -> bool:
    """Whether a client's answer to an approval is a yes (an approve or an edit)."""
    try:
        return read_answer(answer).kind != "reject"
    except AnswerError:
        return False


def _jsonable_update(value: Any) -> bool:
    return value is None or isinstance(value, dict)


class _Sink:
    """The callbacks a pooled session was built with, forwarded to the run it serves now."""

    def __init__(self) -> None:
        self.run: Run | None = None
        self.session: Any = None  # the session: the id of the message a token belongs to

    def token(self, piece: str) -> None:
        if self.run is not None:
            self.run.on_token(piece, getattr(self.session, "token_id", "") or "")

    def step(self, mode: str, payload: Any) -> None:
        if self.run is not None:
            self.run.on_step(mode, payload)


@dataclass
class _Pooled:
    session: Any
    sink: _Sink


class SessionPool:
    """Idle sessions per (operator, agent); all share the workspace's memory table."""

    def __init__(self, ws: Workspace, *, auto_approve: bool, model: Any = None) -> None:
        self.ws = ws
        self.auto_approve = auto_approve
        self.model = model
        self._idle: dict[tuple[str, str], list[_Pooled]] = {}
        self._lock = threading.Lock()
        self._store: Any = None
        self._memory_lock = threading.Lock()

    def memory(self, opener: Callable[[], Any] | None = None) -> Any:
        """The memory table every session shares, opened once per server on first use: by the
        first session (``opener``) or by another reader such as the store API. An opener that
        fails leaves it unopened for the next caller."""
        with self._memory_lock:
            if self._store is None:
                if opener is None:
                    from olav.memory.store.table import MemoryStore

                    self._store = MemoryStore.for_workspace(self.ws)
                else:
                    self._store = opener()
            return self._store

    def _approve(self, sink: _Sink, name: str, args: dict[str, Any]) -> bool | Decision:
        """A dangerous tool runs with --auto-approve; otherwise, and always for a memory
        commit, an Agent Protocol run pauses with an interrupt that says what would happen, and
        the client's answer (a person's, with their token) decides. The OpenAI endpoint cannot
        answer one: there a dangerous tool is refused, as in ``olav ask``, and a memory commit
        waits for `olav kb drafts confirm`."""
        from olav.runtime.tools import NEEDS_CONSENT

        if self.auto_approve and name not in NEEDS_CONSENT:
            return True
        run = sink.run
        if run is None or not run.interruptible:
            from olav.runtime.middleware import Decision

            return Decision(False, message=_POLICY[name in NEEDS_CONSENT], by="policy")
        from langgraph.types import interrupt

        try:
            return read_answer(interrupt(approval_request(name, args))).decision()
        except AnswerError as exc:  # the request checked it: only a bug of olav's gets here
            raise OlavError(f"the answer to the approval of {name} was unreadable: {exc}") from None

    def _build(self, operator: str, agent: str) -> _Pooled:
        from olav.compose import agent_session
        from olav.runtime.builder import open_memory
        from olav.runtime.hooks import Callbacks

        sink = _Sink()
        ows = operator_workspace(self.ws, operator)
        session = agent_session(
            ows,
            agent=agent,
            model=self.model,
            callbacks=Callbacks(
                approver=lambda name, args: self._approve(sink, name, args),
                on_token=sink.token,
                on_step=sink.step,
            ),
            store_opener=lambda run: self.memory(lambda: open_memory(ows, run)),
            interrupts=True,
        )
        sink.session = session
        session.build()  # now: a failure is this run's, not the next one's
        return _Pooled(session, sink)

    @contextlib.contextmanager
    def session(self, operator: str, agent: str) -> Iterator[_Pooled]:
        key = (operator, agent)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            pooled = idle.pop() if idle else None
        if pooled is None:
            pooled = self._build(operator, agent)
        try:
            yield pooled
        finally:
            pooled.sink.run = None
            with self._lock:
                self._idle.setdefault(key, []).append(pooled)

    def close(self) -> None:
        with self._lock:
            pools = [p for idle in self._idle.values() for p in idle]
            self._idle.clear()
        for pooled in pools:
            with contextlib.suppress(Exception):
                pooled.session.close()


class BusyError(OlavError):
    pass


class RunManager:
    def __init__(self, pool: SessionPool, threads: Any) -> None:
        self.pool = pool
        self.threads = threads  # the ThreadStore
        self._runs: dict[str, Run] = {}
        self._active: dict[str, str] = {}  # thread id -> its running run
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        # at most WORKERS runs at once (the others wait, pending). Each run has a daemon thread:
        # a model call that hangs never keeps a stopped server's process alive
        self._slots = threading.BoundedSemaphore(WORKERS)

    def runs_of(self, thread_id: str, owner: str) -> list[Run]:
        """This server's runs of the thread that are ``owner``'s."""
        with self._lock:
            return [
                r for r in self._runs.values() if r.thread_id == thread_id and r.operator == owner
            ]

    def delete_thread(self, thread_id: str) -> Any:
        """Delete the thread (its checkpoints, turns and kept runs: ThreadStore.delete) and
        forget its runs here, so whoever makes a thread with its id later finds none of
        them. Returns the thread as it was."""
        info = self.threads.delete(thread_id)
        with self._lock:
            for run_id in [r.run_id for r in self._runs.values() if r.thread_id == thread_id]:
                del self._runs[run_id]
            self._locks.pop(thread_id, None)
        return info

    # -- the runs kept in the thread store ------------------------------------------------------

    def find(self, thread_id: str, run_id: str, owner: str) -> Run | None:
        """The thread's run, ``owner``'s only: this server's, else one the store keeps."""
        run = self._runs.get(run_id)
        if run is not None:
            return run if run.thread_id == thread_id and run.operator == owner else None
        rec = self.threads.get_run(run_id, thread_id=thread_id, owner=owner)
        return Run.from_record(self._settle(rec)) if rec is not None else None

    def thread_runs(
        self,
        thread_id: str,
        owner: str,
        *,
        limit: int = 10,
        offset: int = 0,
        status: str | None = None,
    ) -> list[Run]:
        """The thread's runs, newest first: this server's, and the ones the store keeps."""
        for rec in self.threads.runs(thread_id, owner=owner, status=UNFINISHED, limit=1000):
            self._settle(rec)
        mine = self.runs_of(thread_id, owner)
        kept = self.threads.runs(
            thread_id,
            owner=owner,
            status=(status,) if status else (),
            limit=offset + limit + len(mine),
        )
        found = {rec.run_id: Run.from_record(rec) for rec in kept}
        found.update({run.run_id: run for run in mine})
        runs = sorted(found.values(), key=lambda r: _epoch(r.created_at), reverse=True)
        return [r for r in runs if status in (None, r.status)][offset : offset + limit]

    async def finished(self, run: Run) -> Run:
        """A kept run once it has finished: another server runs it, so its status is read
        from the store again every ``POLL_S`` (a run of this server is returned as it is)."""
        import anyio

        while run.stored and run.status in UNFINISHED:
            await anyio.sleep(POLL_S)
            again = await anyio.to_thread.run_sync(
                self.find, run.thread_id, run.run_id, run.operator
            )
            if again is None:
                raise ThreadNotFoundError(f"run {run.run_id} is gone: its thread was deleted")
            run = again
        return run

    def _settle(self, rec: RunRecord) -> RunRecord:
        """A kept run that says it is pending or running, though its server is gone, is
        ``error``, with the reason: in the store too, so that every server says the same."""
        if rec.status not in UNFINISHED or not self._orphaned(rec):
            return rec
        why = (
            f"{STOPPED[rec.status]} (pid {rec.pid} on {rec.host or 'an unknown host'}); "
            "the thread keeps its last completed step"
        )
        self.threads.update_run(rec.run_id, "error", why, only_from=UNFINISHED)
        return self.threads.get_run(rec.run_id) or rec

    def _orphaned(self, rec: RunRecord) -> bool:
        """Whether the server process that kept ``rec`` is gone. This process's runs in
        progress are all in memory, so one it does not hold is an earlier process's (with the
        same pid); another process of this machine is gone when its pid is; one of another
        machine cannot be seen, so it is gone when no live run holds its thread (the claim)."""
        if rec.run_id in self._runs:
            return False
        if rec.host == socket.gethostname():
            return rec.pid is None or rec.pid == os.getpid() or not pid_alive(int(rec.pid))
        return not self.threads.held(rec.thread_id)

    def _keep(self, run: Run) -> None:
        """The run, accepted, in the store (a stateless run's thread is deleted with it: it
        is not kept). A store that fails costs the run nothing but its durability."""
        if run.stateless:
            return
        run.reserved = RESERVE  # the first block of event numbers, with the run itself
        run.reserve = lambda upto: self.threads.reserve_events(run.run_id, upto)
        try:
            self.threads.record_run(run.record())
        except Exception as exc:
            log.warning("run %s: not kept in the thread store (%s)", run.run_id, exc)

    def _note(self, run: Run) -> None:
        """The run's new status in the store."""
        if run.stateless:
            return
        try:
            self.threads.update_run(run.run_id, run.status, run.error)
        except Exception as exc:
            log.warning("run %s: its status %s not kept (%s)", run.run_id, run.status, exc)

    def active(self, thread_id: str) -> Run | None:
        """The thread's run in progress, else one accepted that waits for its turn."""
        with self._lock:
            rid = self._active.get(thread_id)
            if rid and rid in self._runs:
                return self._runs[rid]
            return next(
                (
                    r
                    for r in self._runs.values()
                    if r.thread_id == thread_id and not r.done.is_set()
                ),
                None,
            )

    def start(self, run: Run, on_done: Callable[[Run], None] | None = None) -> Run:
        """Queue ``run``; :class:`BusyError` when its thread runs another and the client did
        not ask to enqueue."""
        with self._lock:
            # busy from the moment a run is accepted, not from when its worker starts: two
            # requests at once never both get in
            other = next(
                (
                    r
                    for r in self._runs.values()
                    if r.thread_id == run.thread_id and not r.done.is_set()
                ),
                None,
            )
            if other is not None and run.multitask_strategy != "enqueue":
                raise BusyError(
                    f"thread {run.thread_id} already has a run in progress ({other.run_id})",
                    hint="One run per thread: wait for it (join), cancel it, or send "
                    "multitask_strategy 'enqueue'",
                )
            self._runs[run.run_id] = run
            self._forget_old()
            lock = self._locks.setdefault(run.thread_id, threading.Lock())
        self._keep(run)
        run.emit("metadata", {"run_id": run.run_id, "attempt": 1})
        worker = threading.Thread(
            target=self._execute,
            args=(run, lock, on_done),
            name=f"olav-run-{run.run_id[:8]}",
            daemon=True,
        )
        worker.start()
        return run

    def _forget_old(self) -> None:
        finished = [r for r in self._runs.values() if r.done.is_set()]
        for run in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            self._runs.pop(run.run_id, None)

    def _execute(
        self, run: Run, lock: threading.Lock, on_done: Callable[[Run], None] | None
    ) -> None:
        with lock, self._slots:  # enqueued runs wait here for the one before them
            with self._lock:
                self._active[run.thread_id] = run.run_id
            try:
                self._run(run)
                if not run.done.is_set():  # else stop() ended it, and kept that
                    self._note(run)
            finally:
                with self._lock:
                    if self._active.get(run.thread_id) == run.run_id:
                        del self._active[run.thread_id]
                if on_done is not None:
                    try:
                        on_done(run)
                    except Exception:
                        log.exception("after run %s", run.run_id)
                run.close()

    def _run(self, run: Run) -> None:
        from olav.runtime.runner import RunCancelled

        if run.cancel.is_set():
            run.finish("interrupted")
            return
        run.status = "running"
        run.updated_at = now_iso()
        self._note(run)
        started = time.perf_counter()
        try:
            with self.pool.session(run.operator, run.assistant_id) as pooled:
                pooled.sink.run = run
                session = pooled.session
                session.thread_id = run.thread_id
                session.step_modes = run.graph_modes()
                run.on_start()
                if run.history:
                    session.seed(run.history)
                if run.resume is not None:
                    result = session.answer(run.resume)
                elif run.resolve:
                    result = end_wait(session, run)
                elif run.checkpoint and not run.text:
                    result = session.regenerate(run.checkpoint)
                else:
                    result = session.ask(run.text, checkpoint=run.checkpoint)
                run.interrupts = list(result.interrupts)
                if run.interrupts:
                    run.values = {**run.values, "__interrupt__": run.interrupts}
                    if "updates" in run.stream_modes:
                        run.emit("updates", {"__interrupt__": run.interrupts})
                    if "values" in run.stream_modes:
                        run.emit("values", run.values)
                run.answer, run.outcome = result.answer, result.outcome
                run.unshown, run.usage = result.unshown, dict(result.rescue)
                run.audit_run_id = result.run_id
                if not run.values:
                    run.values = dump_values({"messages": session.thread_messages()})
                run.on_end()
            run.finish("success")
        except (RunCancelled, ClientCancelled):
            run.error = "cancelled by the client"
            run.finish("interrupted")
        except OlavError as exc:
            run.error = exc.one_line()
            run.emit("error", {"error": type(exc).__name__, "message": run.error})
            run.finish("error")
        except Exception as exc:  # a run's failure is the client's to see, not the server's
            log.exception("run %s failed", run.run_id)
            run.error = f"{type(exc).__name__}: {exc}"
            run.emit("error", {"error": type(exc).__name__, "message": run.error})
            run.finish("error")
        finally:
            log.info(
                "run %s %s in %.0f ms",
                run.run_id,
                run.status,
                (time.perf_counter() - started) * 1000,
            )

    def cancel(self, run: Run) -> None:
        run.cancel.set()

    def stop(self) -> None:
        """The server is stopping: every run not ended is cancelled and ended now
        (``interrupted``, after an ``error`` event that says why), so its streams and joins
        end instead of holding the shutdown up for as long as a model call lasts. The thread
        keeps its last completed step, as after a ``kill -9``."""
        with self._lock:
            running = [r for r in self._runs.values() if not r.done.is_set()]
        for run in running:
            run.cancel.set()
            run.error = "the server stopped; the thread keeps its last completed step"
            run.emit("error", {"error": "ServerStopped", "message": run.error})
            run.finish("interrupted")
            self._note(run)
            run.close()

    def shutdown(self) -> None:
        self.stop()
        self.pool.close()
