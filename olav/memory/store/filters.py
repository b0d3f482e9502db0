"""Which rows a search may return: :class:`SearchFilter`, the pre-filters of
``MemoryStore.search``. A light module (no numpy, no LanceDB), so that a caller can build
one without importing the search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from olav.memory.store.scopes import Reader
    from olav.memory.store.timeq import Period


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """The rows a search ranks. ``scopes`` and ``categories`` restrict to those values (None:
    any); ``include_invalid`` keeps invalidated and expired rows; ``where`` is an extra SQL
    predicate (it sends the search to LanceDB, past the in-process snapshot); ``reader``
    hides the rows that operator may not read, and keeps the snapshot. ``period`` adds
    rankings restricted to memories whose ``event_at`` falls in it; without one, a hybrid
    search reads a period from the query unless ``time_aware`` is False."""

    scopes: Sequence[str] | None = None
    categories: Sequence[str] | None = None
    include_invalid: bool = False
    where: str | None = None
    reader: Reader | None = None
    period: Period | None = None
    time_aware: bool = True


ANY = SearchFilter()
"""Every live row: the default filter."""
