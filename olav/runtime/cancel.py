"""Stopping a run when the person asks (Ctrl-C in the terminal, a client's cancel).

A run's graph streams in a worker thread of its own, and the caller's thread only reads what it
yields, so a ``KeyboardInterrupt`` reaches the caller at once instead of waiting for the model
call to return. The interrupt sets the run's :class:`Cancel`, and a callback handler in every
model and tool call of the run (sub-agents' included) raises at the next thing the call does:
the next token (which closes the model's HTTP stream, so the server stops generating), the end
of a model call (so an answer nobody saw is never checkpointed), the start of a tool (so no
tool runs after the person said stop). The caller waits ``GRACE_S`` for the worker to stop
and then gives the person the prompt back whether or not it has: a model that has not sent its
first token yet is cut off when it does.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

GRACE_S = 0.15  # how long a cancelled run's worker is waited for before the prompt returns


class CancelledByPerson(Exception):
    """Raised inside a run's model and tool calls once it is cancelled (never shown)."""


class Cancel(BaseCallbackHandler):
    """A run's stop switch, and the callback handler that makes its calls honour it."""

    raise_error = True  # a callback's exception ends the call (langchain swallows it otherwise)
    run_inline = True

    def __init__(self) -> None:
        self.event = threading.Event()

    def set(self) -> None:
        self.event.set()

    @property
    def is_set(self) -> bool:
        return self.event.is_set()

    def _check(self) -> None:
        if self.event.is_set():
            raise CancelledByPerson("cancelled")

    def on_llm_new_token(self, *args: Any, **kwargs: Any) -> None:
        self._check()

    def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        self._check()

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self._check()

    def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        self._check()


class _QuietCancel(logging.Filter):
    """langchain logs every exception a callback raises as a warning, even one it is told to
    raise: a cancel is not an error, and the terminal shows "cancelled" instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not any("CancelledByPerson" in str(a) for a in record.args or ())


logging.getLogger("langchain_core.callbacks.manager").addFilter(_QuietCancel())
_END = object()


class _Call:
    """A call the worker asks the caller's thread to make (a question put to the person at
    the terminal, whose input belongs to the main thread), and its answer."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args
        self.answer: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(maxsize=1)

    def run(self) -> None:
        try:
            self.answer.put((self.fn(*self.args), None))
        except BaseException as exc:  # the worker raises it where it asked
            self.answer.put((None, exc))


class Relay:
    """How a run's worker calls back into the thread that streams it."""

    def __init__(self, items: queue.Queue[tuple[Any, Any]], cancel: Cancel) -> None:
        self._items, self._cancel = items, cancel

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the caller's thread, waited for (a cancelled run raises)."""
        call = _Call(fn, args)
        self._put(call)
        while True:
            try:
                value, error = call.answer.get(timeout=0.1)
            except queue.Empty:
                self._cancel._check()
                continue
            if error is not None:
                raise error
            return value

    def _put(self, item: Any) -> None:
        while True:
            self._cancel._check()
            try:
                self._items.put((item, None), timeout=0.1)
                return
            except queue.Full:  # the reader is slow: wait, unless it gave up
                continue


def stream_in_worker(produce: Callable[[Relay], Iterator[Any]], cancel: Cancel) -> Iterator[Any]:
    """The items of ``produce(relay)``, which runs in a worker thread (with the caller's
    context variables); ``relay.call`` runs a function on the caller's thread. A
    ``KeyboardInterrupt`` in the caller while it waits cancels the run, waits up to
    ``GRACE_S`` for the worker, and is raised again. The worker's own exception is raised in
    the caller."""
    items: queue.Queue[tuple[Any, Any]] = queue.Queue(maxsize=256)
    done = threading.Event()
    relay = Relay(items, cancel)

    def work() -> None:
        try:
            for item in produce(relay):
                relay._put(item)
            items.put((_END, None))
        except BaseException as exc:  # handed to the reader, which raises it
            if not cancel.is_set:  # else nobody reads any more
                items.put((_END, exc))
        finally:
            done.set()

    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(work,), name="olav-run", daemon=True
    )
    worker.start()
    try:
        while True:
            item, error = items.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            if isinstance(item, _Call):
                item.run()
                continue
            yield item
    except BaseException:  # Ctrl-C, or the consumer raised (a client gone): stop the run
        cancel.set()
        _drain(items, done)
        raise


def _drain(items: queue.Queue[tuple[Any, Any]], done: threading.Event) -> None:
    """Let a cancelled worker end, for at most ``GRACE_S`` (its puts give up once cancelled,
    so it never blocks on a queue nobody reads)."""
    done.wait(GRACE_S)
