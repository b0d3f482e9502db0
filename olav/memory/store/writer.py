"""The background writer: memory bookkeeping that nobody should wait for.

After a chat run, olav stores what the run taught (L1 captures, query patterns), counts the
recall hits and logs the recall. Each costs an embedding (45-50 ms with e5 on two cores) or
a table write, and none of it changes the answer the user is reading. So the answering
thread only builds the records (redaction and hashing, well under a millisecond) and hands
the embedding and the write to one writer thread, which keeps the writes in order.

What a crash can lose: ``kill -9`` (or a power cut) loses the jobs still queued and the one
in progress: the captures, query patterns, access-count bumps and recall-log rows of the
last run or runs, never anything older. It cannot corrupt the memory table: a LanceDB write
becomes visible only when its manifest is committed (a half-written commit is ignored on the
next open), and the writers' file lock dies with the process. A clean exit loses nothing:
``Session.close()`` (and ``olav ask``) flushes the writer, and the interpreter waits for the
queue at exit as well. ``tests/runtime/test_writer.py`` kills a writer with SIGKILL mid-way
and checks both halves of that promise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from olav.core.log import get_logger

log = get_logger("memory.writer")


class BackgroundWriter:
    """One thread that runs submitted jobs in order. A failing job is logged, never raised
    into the chat; :meth:`flush` waits for everything submitted so far."""

    def __init__(self, name: str = "olav-writer") -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: list[Future[Any]] = []
        self._lock = threading.Lock()

    def submit(self, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        """Queue ``fn(*args, **kwargs)``; ``label`` names it in the log if it fails."""

        def job() -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # bookkeeping must never break the chat
                log.warning("%s failed: %s: %s", label, type(exc).__name__, exc)
                raise

        future = self._pool.submit(job)
        with self._lock:
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(future)
        return future

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._lock:
            return sum(not f.done() for f in self._pending)

    def flush(self, timeout: float | None = None) -> list[BaseException]:
        """Wait for every job submitted so far; the errors of those that failed."""
        with self._lock:
            pending, self._pending = self._pending, []
        errors = []
        for future in pending:
            exc = future.exception(timeout)
            if exc is not None:
                errors.append(exc)
        return errors


_SHARED: BackgroundWriter | None = None
_SHARED_LOCK = threading.Lock()


def shared_writer() -> BackgroundWriter:
    """The process's writer: captures, bumps and the recall log share it, so a run's writes
    land in the order they were made."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = BackgroundWriter()
        return _SHARED
