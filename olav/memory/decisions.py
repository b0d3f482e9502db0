"""The control plane's own log: every write, conflict and lifecycle decision with its reason.

Recall logs its candidates and decisions in the audit ``recalls`` table. The other three
kinds of decision are :class:`Decision` rows, handed to a :class:`DecisionLog` (the audit
recorder, ``memory_decisions`` table) by the code that makes them:

- ``write``: ``captured``, ``skipped`` (and why), ``deduplicated`` (against which row),
  ``quarantined``, ``confirmed`` (a pending capture, by a later run's evidence);
- ``conflict``: ``superseded``, ``kept_both``, ``review``, ``merged``;
- ``lifecycle``: ``expired``, ``decayed``, ``collected``, ``invalidated``, ``archived``,
  ``restored``, ``weakened`` and ``suppressed`` (a memory injected into runs that went wrong,
  olav.memory.lifecycle.outcomes).

Memory knows nothing of the audit package: the log is anything with a ``decisions`` method,
and none (``None``) logs nothing. Logging never fails a write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from olav.core.log import get_logger

KINDS = ("write", "conflict", "lifecycle")
ACTIONS: Mapping[str, tuple[str, ...]] = {
    "write": ("captured", "skipped", "deduplicated", "quarantined", "confirmed"),
    "conflict": ("superseded", "kept_both", "review", "merged"),
    "lifecycle": (
        "expired",
        "decayed",
        "collected",
        "invalidated",
        "archived",
        "restored",
        "weakened",
        "suppressed",
    ),
}
log = get_logger("memory.decisions")


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision: what was decided about which row, and why. ``other_id`` is the row it
    was decided against (the duplicate it matched, the row it superseded)."""

    kind: str
    action: str
    memory_id: str | None
    reason: str
    category: str | None = None
    other_id: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS.get(self.kind, ()):
            raise ValueError(f"unknown {self.kind} decision {self.action!r}")


class DecisionLog(Protocol):
    def decisions(self, run_id: str | None, items: Sequence[Decision]) -> None: ...


def record(sink: DecisionLog | None, run_id: str | None, items: Sequence[Decision]) -> None:
    """Hand ``items`` to ``sink``; a failure is logged, never raised (the write happened)."""
    if sink is None or not items:
        return
    try:
        sink.decisions(run_id, items)
    except Exception as exc:  # the decision log must never undo a memory write
        log.warning("memory decisions not logged: %s: %s", type(exc).__name__, exc)


class DecisionBuffer:
    """Decisions made on the background writer, kept until the session writes them on its
    own thread (``drain``): the audit database takes one writer at a time, and a run's
    readers should not meet a write still in flight. What a kill loses is what the writer
    had queued anyway (docs/architecture.md, "the background writer")."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._items: list[tuple[str | None, Sequence[Decision]]] = []

    def decisions(self, run_id: str | None, items: Sequence[Decision]) -> None:
        with self._lock:
            self._items.append((run_id, list(items)))

    def drain(self, sink: DecisionLog | None) -> int:
        """Hand what was gathered to ``sink``; returns how many decisions."""
        with self._lock:
            items, self._items = self._items, []
        for run_id, batch in items:
            record(sink, run_id, batch)
        return sum(len(b) for _, b in items)
