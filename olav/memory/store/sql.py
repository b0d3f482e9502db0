"""SQL fragments for LanceDB predicates: literals and the pre-filter of recallable rows.

Scope, category, expiry and invalidation are always LanceDB pre-filters, never post-filters;
``live_filter`` is the one place that writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from olav.memory.store.filters import require_reader, visible_scopes
from olav.memory.store.schema import PENDING, QUARANTINE, now

if TYPE_CHECKING:
    from olav.memory.store.filters import SearchFilter


def sql_str(value: str) -> str:
    """A SQL string literal with quotes escaped."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    vals = list(values)
    if not vals:
        return "false"
    return f"{column} IN ({', '.join(sql_str(v) for v in vals)})"


def sql_ts(when: datetime) -> str:
    return f"CAST('{when.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}' AS TIMESTAMP)"


def live_filter(
    *,
    scopes: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    at: datetime | None = None,
    include_invalid: bool = False,
    extra: str | None = None,
) -> str | None:
    """The pre-filter predicate for rows that may be recalled."""
    parts = []
    if scopes is not None:
        parts.append(sql_in("scope", scopes))
    if categories is not None:
        parts.append(sql_in("category", categories))
    if not include_invalid:
        parts.append("invalidated_at IS NULL")
        parts.append(f"(expires_at IS NULL OR expires_at > {sql_ts(at or now())})")
    if extra:
        parts.append(f"({extra})")
    return " AND ".join(parts) if parts else None


def filter_where(filter: SearchFilter, *, at: datetime | None = None) -> str | None:
    """The pre-filter predicate of a typed filter (olav.memory.store.filters): the only place
    that turns one into SQL. The reader's rule, the scopes, categories and liveness as
    :func:`live_filter` writes them, then each further field."""
    extra: list[str] = []
    scopes, reader = visible_scopes(filter)
    if reader is not None:
        extra.append(reader.where())
    if filter.origins is not None:
        extra.append(sql_in("origin", filter.origins))
    if filter.ids is not None:
        extra.append(sql_in("id", filter.ids))
    if filter.scope_prefix is not None:
        extra.append(f"scope LIKE {sql_str(_like_prefix(filter.scope_prefix))}")
    if filter.quarantined:
        extra.append(f"superseded_by LIKE {sql_str(_like_prefix(QUARANTINE))}")
    if filter.pending:
        extra.append(f"superseded_by LIKE {sql_str(_like_prefix(PENDING))}")
    if filter.created is not None:
        extra.append(filter.created.sql("created_at"))
    if filter.mentions is not None:
        # LIKE's % is dropped from the needle (its _ still matches any one character: a
        # superset, which a caller that needs the exact field checks in the row)
        extra.append(f"metadata LIKE {sql_str('%' + filter.mentions.replace('%', '') + '%')}")
    return live_filter(
        scopes=scopes,
        categories=filter.categories,
        at=at,
        include_invalid=filter.include_invalid,
        extra=" AND ".join(f"({p})" for p in extra) if extra else None,
    )


def _like_prefix(prefix: str) -> str:
    """A LIKE pattern for the values that start with ``prefix`` (its % dropped; an _ in it
    matches any one character, so a prefix that holds one selects a superset: the reader's
    rule still applies)."""
    return prefix.replace("%", "") + "%"


def required_where(filter: SearchFilter, method: str) -> str | None:
    """The predicate of a client's read, which must name its reader."""
    require_reader(filter, method)
    return filter_where(filter)
