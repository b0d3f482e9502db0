"""Which rows a read may return, and in what order: :class:`SearchFilter` (the pre-filters of
``MemoryStore.search``, ``rows``, ``count`` and ``values``) and :class:`Order`. A light module
(no numpy, no LanceDB), so that a caller can build one without importing the search.

Every field is a value, never SQL: the store writes the predicate (olav.memory.store.sql), so no
SQL string crosses ``olav.memory``'s border. ``reader`` says whose rows may be read
(olav.memory.store.scopes.Reader); every read (``search``, ``rows``, ``count``, ``values``)
refuses a filter without one, so no read can forget another operator's private rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow as pa

    from olav.memory.store.scopes import Reader
    from olav.memory.store.timeq import Period


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """The rows a read sees.

    - ``reader``: the operator whose rows may be read (``Reader.of(config)``; the library's own
      passes over the whole table say ``EVERYONE``). Required by every read.
    - ``scopes``, ``categories``, ``origins``, ``ids``: restrict to those values (None: any).
    - ``scope_prefix``: only scopes that start with it (``team:``: every team scope the reader
      may read).
    - ``include_invalid``: keep invalidated and expired rows too (a search and a count read live
      rows only by default).
    - ``quarantined``: only rows held back as possible prompt injection.
    - ``pending``: only rows written without a person and not confirmed yet.
    - ``created``: only rows whose ``created_at`` falls in the period (either end may be open).
    - ``mentions``: only rows whose metadata (JSON) contains this text.
    - ``period`` and ``time_aware`` concern a search only: ``period`` adds rankings restricted to
      memories whose ``event_at`` falls in it; without one, a hybrid search reads a period from
      the query unless ``time_aware`` is False.

    ``origins``, ``ids``, ``scope_prefix``, ``quarantined``, ``pending``, ``created`` and
    ``mentions`` send a
    search to LanceDB, past the in-process snapshot (which evaluates the others)."""

    scopes: Sequence[str] | None = None
    categories: Sequence[str] | None = None
    include_invalid: bool = False
    reader: Reader | None = None
    period: Period | None = None
    time_aware: bool = True
    origins: Sequence[str] | None = None
    ids: Sequence[str] | None = None
    scope_prefix: str | None = None
    quarantined: bool = False
    pending: bool = False
    created: Period | None = None
    mentions: str | None = None

    @property
    def table_only(self) -> bool:
        """Whether a field the in-process snapshot does not evaluate is set."""
        return (
            self.origins is not None
            or self.ids is not None
            or self.scope_prefix is not None
            or self.quarantined
            or self.pending
            or self.created is not None
            or self.mentions is not None
        )


def visible_scopes(filter: SearchFilter) -> tuple[Sequence[str] | None, Reader | None]:
    """The scopes a read names and the reader's rule left to apply to the rows: on named
    scopes the rule drops the names its reader may not read (the same rows, and a shorter
    predicate and mask than the rule on every row); ``EVERYONE`` leaves no rule."""
    reader, scopes = filter.reader, filter.scopes
    if reader is None or reader.everyone:
        return scopes, None
    if scopes is None:
        return None, reader
    return [s for s in scopes if reader.allows(s)], None


def require_reader(filter: SearchFilter, method: str) -> None:
    """Refuse a read whose filter does not say whose rows it may return."""
    if filter.reader is None:
        from olav.core.errors import MemoryStoreError

        raise MemoryStoreError(
            f"store.{method} needs a reader: whose rows may be read",
            hint="Pass SearchFilter(reader=Reader.of(config)), or EVERYONE for a pass over the "
            "whole table (olav.memory.store.scopes)",
        )


OrderKey = Literal["changed", "created", "id"]
Direction = Literal["asc", "desc"]
ORDER_KEYS: tuple[str, ...] = ("changed", "created", "id")


@dataclass(frozen=True, slots=True)
class Order:
    """How ``rows`` sorts: keys in turn, each ascending or descending. ``changed`` is
    ``updated_at``, else ``created_at``; rows without a time come last."""

    keys: tuple[tuple[OrderKey, Direction], ...]

    def __post_init__(self) -> None:
        from olav.core.errors import MemoryStoreError

        for key, direction in self.keys:
            if key not in ORDER_KEYS or direction not in ("asc", "desc"):
                raise MemoryStoreError(
                    f"cannot order rows by {key!r} {direction!r}",
                    hint="Order by " + ", ".join(ORDER_KEYS) + ", each 'asc' or 'desc'",
                )


NEWEST = Order((("changed", "desc"), ("id", "desc")))
"""The latest change first (``olav memory list``, the store API)."""
NEWEST_CREATED = Order((("created", "desc"), ("id", "desc")))
"""The latest written first (episodes)."""
BY_ID = Order((("id", "asc"),))
"""By id (the MCP resources, exports)."""


_ORDER_COLUMNS = {"changed": ("updated_at", "created_at"), "created": ("created_at",), "id": ()}


def order_columns(order: Order) -> list[str]:
    """The columns a read in ``order`` needs: the id and the order's time columns."""
    cols = ["id"]
    for key, _direction in order.keys:
        cols += [c for c in _ORDER_COLUMNS[key] if c not in cols]
    return cols


def sorted_ids(times: pa.Table, order: Order) -> list[str]:
    """The ids of ``times`` (id and the order's time columns) in ``order``; a row without
    the time comes last."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys: dict[str, Any] = {"id": times["id"]}
    sort: list[tuple[str, str]] = []
    for i, (key, direction) in enumerate(order.keys):
        name = f"k{i}"
        if key == "changed":
            keys[name] = pc.coalesce(times["updated_at"], times["created_at"])
        elif key == "created":
            keys[name] = times["created_at"]
        else:
            keys[name] = times["id"]
        sort.append((name, "descending" if direction == "desc" else "ascending"))
    table = pa.table(keys)
    idx = pc.sort_indices(table, sort_keys=sort)  # a null (no time) sorts last
    return [str(i) for i in table["id"].take(idx).to_pylist()]
