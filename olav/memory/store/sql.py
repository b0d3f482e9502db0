"""SQL fragments for LanceDB predicates: literals and the pre-filter of recallable rows.

Scope, category, expiry and invalidation are always LanceDB pre-filters, never post-filters;
``live_filter`` is the one place that writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from olav.memory.store.schema import now


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
