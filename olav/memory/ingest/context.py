"""Context windows for memories that come in sequence (conversation turns, document chunks).

A turn such as "Yes, the blue one." means little alone; with the two turns before and after
it, both its embedding and its words say what it is about. Writers of sequential memories set
``MemoryRecord.context`` with :func:`neighbour_windows`; the store embeds it into
``context_vector`` and indexes it for full-text search, and hybrid search ranks memories by
their context as well as by their own text.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from olav.memory.store.schema import MemoryRecord


def neighbour_windows(
    texts: Sequence[str],
    *,
    groups: Sequence[Hashable] | None = None,
    before: int = 2,
    after: int = 2,
    headers: Sequence[str | None] | None = None,
    max_chars: int = 2000,
) -> list[str]:
    """Each text with up to ``before``/``after`` neighbours from the same group, in order.

    ``groups`` keeps windows inside one session or document (consecutive equal values);
    ``headers`` (e.g. the session date) opens each window on its own line. A window longer than
    ``max_chars`` loses neighbours from its far ends first, never the text itself.
    """
    n = len(texts)
    if groups is not None and len(groups) != n:
        raise ValueError("groups must have one entry per text")
    if headers is not None and len(headers) != n:
        raise ValueError("headers must have one entry per text")
    out: list[str] = []
    for i in range(n):
        lo = hi = i
        while lo > 0 and i - lo < before and (groups is None or groups[lo - 1] == groups[i]):
            lo -= 1
        while hi + 1 < n and hi - i < after and (groups is None or groups[hi + 1] == groups[i]):
            hi += 1
        while (lo < i or hi > i) and sum(len(t) + 1 for t in texts[lo : hi + 1]) > max_chars:
            if i - lo >= hi - i and lo < i:
                lo += 1
            else:
                hi -= 1
        body = "\n".join(texts[lo : hi + 1])
        header = headers[i] if headers is not None else None
        out.append(f"{header}\n{body}" if header else body)
    return out


@dataclass(frozen=True)
class Utterance:
    """One turn of a conversation to remember: who said what, in which session, and when."""

    id: str
    speaker: str
    text: str
    session: Hashable = 0
    when: datetime | None = None


def date_label(when: datetime) -> str:
    """``8 May 2023``: the form dates take inside memory texts."""
    return f"{when.day} {when:%B %Y}"


def conversation_records(
    turns: Sequence[Utterance],
    *,
    category: str = "fact",
    scope: str = "global",
    origin: str = "user",
    window: tuple[int, int] = (2, 2),
    metadata: dict[str, Any] | None = None,
) -> list[MemoryRecord]:
    """Memories for a conversation, one per turn, as olav stores sequential memories.

    Text: ``[8 May 2023] Speaker: text`` (the date makes "when did ..." findable by words);
    context: the turn with ``window`` = (before, after) neighbours of its session under the
    date;
    ``event_at``: the session's time.
    """
    lines = [f"{t.speaker}: {t.text}" for t in turns]
    labels = [f"[{date_label(t.when)}]" if t.when else None for t in turns]
    before, after = window
    windows = neighbour_windows(
        lines, groups=[t.session for t in turns], before=before, after=after, headers=labels
    )
    return [
        MemoryRecord(
            id=t.id,
            text=f"{label} {line}" if label else line,
            category=category,
            scope=scope,
            origin=origin,
            context=window,
            event_at=t.when,
            metadata={**(metadata or {}), "speaker": t.speaker, "session": str(t.session)},
        )
        for t, line, label, window in zip(turns, lines, labels, windows, strict=True)
    ]
