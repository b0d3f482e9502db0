"""Write guards of the memory table: who may write, and retrying a commit that conflicted.

Locally one file lock serialises every writer. On object storage a short write lease in the
bucket does (see :mod:`olav.memory.store.remote`), and maintenance runs under its own lease, so a
compaction may still commit between a writer's read and its commit. LanceDB then reports a
commit conflict; :func:`retry_conflicts` tries again after a jittered pause. Every write is
idempotent (rows are keyed by content ids and the write re-reads the ids it replaces), so a
retry never duplicates a row.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from olav.core.errors import MemoryStoreError
from olav.memory.store.remote import (
    MAINTENANCE_LEASE,
    MAINTENANCE_TTL,
    WRITE_LEASE,
    WRITE_TTL,
    Lease,
    MemoryLocation,
    remote_errors,
)

T = TypeVar("T")
_CONFLICT = re.compile(r"(?i)commit conflict|retryable|incompatible ?transaction|conflicting")
ATTEMPTS = 6
# commits retried by the writes of this process (a benchmark reads it)
stats = {"retries": 0}


def is_conflict(exc: BaseException) -> bool:
    return bool(_CONFLICT.search(f"{type(exc).__name__}: {exc}"))


def retry_conflicts(write: Callable[[], T], *, attempts: int = ATTEMPTS) -> T:
    """Run ``write``; on a commit conflict wait a jittered, growing pause and run it again."""
    delay = 0.05
    for attempt in range(attempts):
        try:
            return write()
        except Exception as exc:
            if not is_conflict(exc) or attempt == attempts - 1:
                raise
            stats["retries"] += 1
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay *= 2
    raise AssertionError("unreachable")


def file_guard(lock: Any) -> Any:
    """The local writer lock, with a one-line error when it is held for too long."""
    from filelock import Timeout

    @contextmanager
    def guard() -> Iterator[None]:
        try:
            lock.acquire()
        except Timeout:
            raise MemoryStoreError(
                f"another olav process has held the memory write lock ({lock.lock_file}) "
                "for too long",
                hint="Wait for it to finish, or stop the stuck process",
            ) from None
        try:
            yield
        finally:
            lock.release()

    return guard()


class RemoteGuards:
    """The write and maintenance leases of one remote table, re-entrant within a thread
    (maintain() inside gc, a write inside re-embed, a restore's upsert) and taken by one
    thread of the process at a time: another thread waits for it as another machine does."""

    def __init__(self, loc: MemoryLocation, timeout: float) -> None:
        self.loc, self.timeout = loc, timeout
        self._depth = {WRITE_LEASE: 0, MAINTENANCE_LEASE: 0}
        self._threads = {WRITE_LEASE: threading.RLock(), MAINTENANCE_LEASE: threading.RLock()}
        # run once a lease is taken: the store moves to the latest table version, since
        # reads may reuse an older one for loc.refresh_seconds
        self.on_taken: Callable[[], Any] | None = None

    @contextmanager
    def _held(self, name: str, ttl: float, timeout: float) -> Iterator[None]:
        mine = self._threads[name]
        got = mine.acquire(timeout=timeout) if timeout > 0 else mine.acquire(blocking=False)
        if not got:  # another thread of this process holds the lease
            with remote_errors(self.loc):
                raise Lease(self.loc, name, ttl).held_error()
        try:
            with self._lease(name, ttl, timeout):
                yield
        finally:
            mine.release()

    @contextmanager
    def _lease(self, name: str, ttl: float, timeout: float) -> Iterator[None]:
        if self._depth[name]:
            self._depth[name] += 1
            try:
                yield
            finally:
                self._depth[name] -= 1
            return
        with Lease(self.loc, name, ttl).held(timeout), remote_errors(self.loc):
            self._depth[name] = 1
            try:
                if self.on_taken is not None:
                    self.on_taken()
                yield
            finally:
                self._depth[name] = 0

    def write(self, ttl: float = WRITE_TTL) -> Any:
        return self._held(WRITE_LEASE, ttl, self.timeout)

    def maintenance(self) -> Any:
        """Taken at once or not at all: another machine is maintaining the table."""
        return self._held(MAINTENANCE_LEASE, MAINTENANCE_TTL, 0.0)

    def maintaining(self) -> bool:
        return self._depth[MAINTENANCE_LEASE] > 0
