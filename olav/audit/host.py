"""One in-memory DuckDB per process, which attaches a database file while it is used.

Opening a file with ``duckdb.connect`` builds a whole DuckDB instance: its catalogue of some
3,300 built-in functions and four built-in extensions, 13 ms on two cores before a single row
is read, and ``olav serve`` opens the audit for every request it records. Attaching the same
file to an instance that already exists takes 1.7 ms.

The file's lock is the same either way: it is taken when the first user in this process
attaches the file and released when the last one detaches it (DuckDB checkpoints it then), so
other processes wait for short blocks exactly as they did. A process that forks closes its
instance first when no file is attached, and the child builds its own: DuckDB's threads do not
survive a fork. (olav itself never forks; a program that imports it may.)
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import dataclass
from typing import Any


class InUseReadOnly(Exception):
    """This process has the file attached read-only and a writer asked for it: the writer
    waits until the readers are done, as it waits for another process."""


@dataclass
class _Attached:
    alias: str
    read_only: bool
    users: int = 0


_LOCK = threading.Lock()  # the instance's own connection is used by one thread at a time
_HOST: tuple[int, Any] | None = None  # (pid, connection)
_FILES: dict[str, _Attached] = {}
_NAMES = itertools.count(1)


def _host() -> Any:
    global _HOST
    if _HOST is None or _HOST[0] != os.getpid():
        import duckdb

        _HOST = (os.getpid(), duckdb.connect(":memory:"))
        _FILES.clear()  # what a parent process attached is not attached here
    return _HOST[1]


def _before_fork() -> None:
    """A process about to fork closes its instance when no file is attached: a child that
    inherits DuckDB's worker threads mid-way hangs in its first ``duckdb.connect``. The
    parent builds a new instance on its next use (once, 13 ms)."""
    global _HOST
    _LOCK.acquire()
    if _HOST is not None and not _FILES and _HOST[0] == os.getpid():
        _HOST[1].close()
        _HOST = None


def _after_fork_in_child() -> None:
    global _HOST
    _HOST = None  # the parent's, if a file was attached when it forked: left alone
    _FILES.clear()
    _LOCK.release()


os.register_at_fork(
    before=_before_fork, after_in_parent=_LOCK.release, after_in_child=_after_fork_in_child
)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def attach(path: str, *, read_only: bool) -> Any:
    """A connection whose tables are those of the database file at ``path`` (created when it
    does not exist, unless ``read_only``). Give it back with :func:`detach`. A file already
    attached for writing serves a reader as well."""
    with _LOCK:
        host = _host()
        held = _FILES.get(path)
        if held is not None and held.read_only and not read_only:
            raise InUseReadOnly(path)
        if held is None:
            alias = f"file{next(_NAMES)}"
            options = " (READ_ONLY)" if read_only else ""
            host.execute(f"ATTACH {_quoted(path)} AS {alias}{options}")
            held = _FILES[path] = _Attached(alias, read_only)
        con = host.cursor()
        try:
            con.execute(f"USE {held.alias}")
        except BaseException:
            con.close()
            _release(path, held)
            raise
        held.users += 1
        return con


def detach(path: str, con: Any) -> None:
    """Close ``con``; the last user of ``path`` in this process detaches the file."""
    with _LOCK:
        con.close()
        held = _FILES.get(path)
        if held is not None:
            held.users -= 1
            _release(path, held)


def _release(path: str, held: _Attached) -> None:
    if held.users <= 0:
        del _FILES[path]
        assert _HOST is not None
        _HOST[1].execute(f"DETACH {held.alias}")
