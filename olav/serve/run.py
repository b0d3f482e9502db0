"""One run of ``olav serve`` and its events: what it does becomes events (``metadata``,
``values``, ``updates``, ``messages``, ``custom``, ``events``, ``debug``, ``checkpoints``,
``tasks``, ``error``, ``end``), numbered and kept until the run is forgotten, so a client that
reconnects with ``Last-Event-ID`` gets what it missed, and ``join`` waits for the end. Each
stream mode emits what LangGraph emits for it; the graph's values and messages become JSON as
the Agent Protocol sends them."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from olav.core.log import get_logger
from olav.serve.records import RunRecord

log = get_logger("serve.runs")
STATUSES = ("pending", "running", "success", "error", "interrupted", "timeout")
RESERVE = 64  # stream event numbers reserved in the store at a time


class ClientCancelled(KeyboardInterrupt):
    """Raised inside a run whose client cancelled it: the runner records it ``cancelled``,
    exactly as a Ctrl-C in the terminal."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def epoch(text: str) -> float:
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


@dataclass
class Run:
    run_id: str
    thread_id: str  # its thread's key: what the run stores under (checkpoints, turns, runs)
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
    known_as: str = ""  # its thread's id as the client knows it (all it sees): "", the key
    interrupts: list[dict[str, Any]] = field(default_factory=list)  # where it paused
    status: str = "pending"
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    error: str = ""
    answer: str = ""
    unshown: str = ""  # the end of the answer the token stream held back
    usage: dict[str, Any] = field(default_factory=dict)  # the run's model calls and tokens
    asked: dict[str, Any] = field(default_factory=dict)  # of the model, by the client (/v1)
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

    def __post_init__(self) -> None:
        self.known_as = self.known_as or self.thread_id

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.known_as,
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
            created_at=epoch(self.created_at),
            updated_at=epoch(self.updated_at),
            metadata=self.metadata,
            kwargs=self.kwargs(),
            multitask_strategy=self.multitask_strategy,
            error=self.error,
            events=self.reserved,
        )

    @classmethod
    def from_record(cls, rec: RunRecord, known_as: str) -> Run:
        """A run another process kept (its thread known as ``known_as``): to show, no more."""
        modes = rec.kwargs.get("stream_mode")
        return cls(
            run_id=rec.run_id,
            thread_id=rec.thread_id,
            known_as=known_as,
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
            "thread_id": self.known_as,
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
            self.emit("checkpoints", checkpoint_json(self.known_as, payload, self._dumps))
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
                data["payload"] = checkpoint_json(self.known_as, data.get("payload"), self._dumps)
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
                or {"run_id": self.run_id, "thread_id": self.known_as, "langgraph_node": name},
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


def _jsonable_update(value: Any) -> bool:
    return value is None or isinstance(value, dict)
