"""What keeps one client of ``olav serve`` from slowing the others: the limits read from the
workspace's ``serve.*`` keys (:class:`Limits`), the per-operator run slots with their bounded
queue (:class:`OperatorSlots`), a per-key rate (:class:`Rate`, the console's logins per client
address) and a log line at a bounded rate (:class:`Sparse`, for what a stranger can make the
server say as often as they like).

A refusal is :class:`TooMany`: the HTTP layers answer it 429 with ``Retry-After`` and its one
line, which names the limit and the key that raises it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from olav.core.errors import ConfigError, OlavError

WORKERS = 32  # runs at once on one server, every operator's together
RUN_RETRY_S = 5  # what a refused run's Retry-After says: about a short run's length
MAX_KEYS = 10_000  # the client addresses a rate remembers; the least recent go first


class TooMany(OlavError):
    """A request over one of the limits: 429, with when to try again."""

    def __init__(self, message: str, *, hint: str, retry_after: int) -> None:
        super().__init__(message, hint=hint)
        self.retry_after = max(1, int(retry_after))


@dataclass(frozen=True)
class Limits:
    runs_per_operator: int = 4
    run_queue: int = 8
    sessions_per_operator: int = 20
    logins_per_minute: int = 30
    max_connections: int = 1000
    head_timeout_s: float = 10.0
    allowed_hosts: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: Any) -> Limits:
        """The limits a workspace's configuration sets (each key already typed and bounded
        below by the settings registry)."""
        return cls(
            runs_per_operator=min(WORKERS, int(config["serve.runs_per_operator"])),
            run_queue=int(config["serve.run_queue"]),
            sessions_per_operator=int(config["serve.sessions_per_operator"]),
            logins_per_minute=int(config["serve.logins_per_minute"]),
            max_connections=int(config["serve.max_connections"]),
            head_timeout_s=float(config["serve.head_timeout_s"]),
            allowed_hosts=allowed_hosts(str(config["serve.allowed_hosts"])),
        )


def allowed_hosts(text: str) -> tuple[str, ...]:
    """``serve.allowed_hosts``: names or name:port, comma-separated, lower-cased; a name that
    no Host header can hold is refused with the key to fix."""
    out = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        if any(c in name for c in "/@ \t?#") or name.startswith(":"):
            raise ConfigError(
                f"serve.allowed_hosts: {raw.strip()!r} is not a host name or host:port",
                hint="List names such as olav.example.org or 10.0.0.5:2280, comma-separated",
            )
        out.append(name)
    return tuple(out)


class OperatorSlots:
    """Run slots per operator: at most ``per_operator`` of one operator's runs hold a slot
    (and the server's ``WORKERS`` in all); at most ``queue`` more wait. :meth:`admit` counts a
    run in (or refuses it); :meth:`slot` is the slot a run holds while it runs, and the run
    is counted out when that ends."""

    def __init__(self, per_operator: int, queue: int, workers: int = WORKERS) -> None:
        self.per_operator = per_operator
        self.queue = queue
        self._all = threading.BoundedSemaphore(workers)
        self._lock = threading.Lock()
        self._counted: dict[str, int] = {}
        self._slots: dict[str, threading.BoundedSemaphore] = {}

    def admit(self, operator: str) -> None:
        """Count one more run of ``operator``'s in, or :class:`TooMany` when they have as many
        running and waiting as the limits allow."""
        most = self.per_operator + self.queue
        with self._lock:
            have = self._counted.get(operator, 0)
            if have >= most:
                raise TooMany(
                    f"{operator} has {have} runs running or waiting; the most is "
                    f"{self.per_operator} running and {self.queue} waiting",
                    hint="Wait for one to end, or raise serve.runs_per_operator or "
                    "serve.run_queue in olav.yaml",
                    retry_after=RUN_RETRY_S,
                )
            self._counted[operator] = have + 1
            self._slots.setdefault(operator, threading.BoundedSemaphore(self.per_operator))

    def release(self, operator: str) -> None:
        """Count a run out that :meth:`admit` counted in (it ended, or never started)."""
        with self._lock:
            left = self._counted.get(operator, 0) - 1
            if left > 0:
                self._counted[operator] = left
            else:
                self._counted.pop(operator, None)

    def counted(self, operator: str) -> int:
        with self._lock:
            return self._counted.get(operator, 0)

    def slot(self, operator: str) -> _Slot:
        with self._lock:
            mine = self._slots.setdefault(operator, threading.BoundedSemaphore(self.per_operator))
        return _Slot(mine, self._all)


class _Slot:
    """The operator's slot, then one of the server's: a run waits for its own first, so that
    one operator's queue never holds a slot another operator's run could use."""

    def __init__(self, mine: threading.BoundedSemaphore, shared: threading.BoundedSemaphore):
        self.mine, self.shared = mine, shared

    def __enter__(self) -> None:
        self.mine.acquire()
        self.shared.acquire()

    def __exit__(self, *exc: object) -> None:
        self.shared.release()
        self.mine.release()


class Rate:
    """At most ``per_minute`` events per key, a burst of that many at once (a token bucket
    that refills evenly); :meth:`take` raises :class:`TooMany` past it."""

    def __init__(self, per_minute: int, *, what: str, key_name: str) -> None:
        self.per_minute = per_minute
        self.what, self.key_name = what, key_name
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> None:
        now = time.monotonic()
        refill = self.per_minute / 60.0
        with self._lock:
            level, then = self._buckets.pop(key, (float(self.per_minute), now))
            level = min(float(self.per_minute), level + (now - then) * refill)
            if level < 1.0:
                self._buckets[key] = (level, now)
                raise TooMany(
                    f"too many {self.what} from this {self.key_name}: the most is "
                    f"{self.per_minute} a minute",
                    hint="Wait, or raise serve.logins_per_minute in olav.yaml",
                    retry_after=math.ceil((1.0 - level) / refill),
                )
            self._buckets[key] = (level - 1.0, now)
            while len(self._buckets) > MAX_KEYS:
                self._buckets.popitem(last=False)


class Sparse:
    """A log line said at most once every ``every_s`` seconds per kind, with how many times it
    happened since: what a stranger can trigger at will costs the log a line, not a megabyte."""

    def __init__(self, log: Any, every_s: float = 10.0) -> None:
        self.log = log
        self.every_s = every_s
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}

    def note(self, kind: str, message: str) -> bool:
        """Count one ``kind``; log ``message`` (and the count since the last line) when the
        last line of this kind is ``every_s`` old. Returns whether it logged."""
        now = time.monotonic()
        with self._lock:
            last, count = self._seen.get(kind, (-math.inf, 0))
            count += 1
            if now - last < self.every_s:
                self._seen[kind] = (last, count)
                return False
            self._seen[kind] = (now, 0)
        self.log.warning(
            "%s (%d time%s in the last %.0f s)",
            message,
            count,
            "" if count == 1 else "s",
            self.every_s,
        )
        return True
