"""Read-only SQL over the workspace's domain and audit databases: ``db_query`` and
``describe_table``."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from olav.core.errors import OlavError
from olav.runtime.tools.base import ToolArgs, ToolContext, tool_error

_READ_ONLY_SQL = re.compile(
    r"^\s*(select|with|describe|show|explain|summarize|pragma\s+table_info)\b", re.I
)


def domain_connection(ctx: ToolContext) -> Any:
    import duckdb

    con = duckdb.connect(":memory:")
    schemas = []
    for alias, path in (("domain", ctx.domain_db), ("audit", ctx.audit_db)):
        if not path.exists():
            continue
        _attach(con, alias, path)
        schemas.append(f"{alias}.main")
    if schemas:
        con.execute(f"SET search_path = '{','.join(schemas)}'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


ATTACH_TRIES = 20


def _attach(con: Any, alias: str, path: Path) -> None:
    """Attach a database read-only. Another process's write lock makes DuckDB refuse for a
    moment, so it is retried briefly; if it never works the query fails with the reason,
    instead of running without that schema."""
    import duckdb

    for attempt in range(ATTACH_TRIES):
        try:
            con.execute(f"ATTACH '{path}' AS {alias} (READ_ONLY)")
            return
        except duckdb.Error as exc:
            if attempt == ATTACH_TRIES - 1:
                con.close()
                reason = str(exc).splitlines()[0]
                raise OlavError(
                    f"the {alias} database {path.name} cannot be opened: {reason}. "
                    "Another process may be writing it; retry in a moment"
                ) from None
            time.sleep(0.05)  # the writer usually finishes within a second


class QueryArgs(ToolArgs):
    sql: str = Field(description="One read-only SQL statement (SELECT/WITH/DESCRIBE/SHOW).")


SHOWN_ROWS = 50


def rows_text(cols: list[str], rows: list[tuple[Any, ...]], total: int) -> str:
    """The first rows of a result as text, and how many rows it has in all."""
    if not rows:
        return "(0 rows) columns: " + ", ".join(cols)
    lines = [" | ".join(cols)]
    lines += [" | ".join("" if v is None else str(v) for v in r) for r in rows]
    more = (
        f"\n({total} rows, first {len(rows)} shown)" if total > len(rows) else f"\n({total} rows)"
    )
    return "\n".join(lines) + more


def _fetch(cur: Any) -> tuple[list[tuple[Any, ...]], int]:
    """The first SHOWN_ROWS rows and the exact row count, reading the rest in chunks."""
    rows = cur.fetchmany(SHOWN_ROWS)
    total = len(rows)
    while chunk := cur.fetchmany(10_000):
        total += len(chunk)
    return rows, total


def db_query(ctx: ToolContext, sql: str) -> str:
    statement = sql.strip().rstrip(";").strip()
    if ";" in statement:
        return tool_error("send one statement at a time")
    if not _READ_ONLY_SQL.match(statement):
        return tool_error("db_query is read-only: use SELECT, WITH, DESCRIBE or SHOW")
    import duckdb

    try:
        con = domain_connection(ctx)
    except OlavError as exc:
        return tool_error(str(exc))
    try:
        cur = con.execute(statement)
        cols = [d[0] for d in cur.description or []]
        rows, total = _fetch(cur)
    except duckdb.Error as exc:
        msg = str(exc).splitlines()[0]
        hint = (
            " Call describe_table to see the real columns."
            if ("column" in msg.lower() or "table" in msg.lower())
            else ""
        )
        return tool_error(msg + hint)
    finally:
        con.close()
    return rows_text(cols, rows, total)


class DescribeArgs(ToolArgs):
    name: str = Field(description="Table or view name, e.g. devices or runs.")


def describe_table(ctx: ToolContext, name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        return tool_error(f"{name!r} is not a table name")
    con = domain_connection(ctx)
    try:
        tables = con.execute(
            "SELECT table_schema || '.' || table_name, table_catalog FROM "
            "information_schema.tables WHERE table_catalog IN ('domain', 'audit')"
        ).fetchall()
        names = sorted({t[0].split(".")[-1] for t in tables})
        short = name.split(".")[-1]
        if short not in names:
            return tool_error(f"no table {name!r}. Tables: {', '.join(names)}")
        cols = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position",
            [short],
        ).fetchall()
    finally:
        con.close()
    return f"{short}: " + ", ".join(f"{c} {t}" for c, t in cols)
