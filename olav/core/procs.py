"""Which process wrote a row, and whether it still lives.

A row that says a run is in progress (the audit's ``runs``, the thread store's claims and
runs) names the process that ran it: its pid, its host and, for the audit, a mark of the
process itself (:func:`this_process`). A ``kill -9`` leaves such a row behind; the next process
that reads it tells from these whether its writer is gone, so the row can say why it stopped
instead of "running" for good.
"""

from __future__ import annotations

import os
import socket
import uuid

_MARKS: dict[int, str] = {}  # this process's mark, by pid (a fork gets its own)


def pid_alive(pid: int) -> bool:
    """Whether a process of this machine with this id lives."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _started(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot (Linux's /proc), or "" where
    that cannot be read. With the pid it names one process: a pid used again is another."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return ""
    # the command name (field 2) is in parentheses and may hold spaces: count from after it
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


def this_process() -> str:
    """A mark of this process: ``PID-START`` (its start time, where the system tells it),
    else ``PID-u`` and a random part, so no two processes ever share one."""
    pid = os.getpid()
    if pid not in _MARKS:
        _MARKS[pid] = f"{pid}-{_started(pid) or 'u' + uuid.uuid4().hex[:12]}"
    return _MARKS[pid]


def process_gone(pid: int | None, host: str | None, mark: str | None) -> bool:
    """Whether the process a row names (``pid`` on ``host``, ``mark`` from
    :func:`this_process`) has ended. False whenever that cannot be told: no pid, or another
    machine's process."""
    if pid is None or not host or host != socket.gethostname():
        return False
    if mark and mark == this_process():
        return False
    if pid == os.getpid():
        return True  # an earlier process that had this process's pid (a container's pid 1)
    if not pid_alive(pid):
        return True
    then = (mark or "").partition("-")[2]
    now = _started(pid)
    return bool(then and now and not then.startswith("u") and then != now)  # pid used again
