"""Read-only SQL over the workspace's domain and audit databases: ``db_query`` and
``describe_table``."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from olav.core.errors import OlavError
from olav.memory.store.scopes import user_name
from olav.runtime.tools.base import ToolArgs, ToolContext, tool_error

_READ_ONLY_SQL = re.compile(
    r"^\s*(select|with|describe|show|explain|summarize|pragma\s+table_info)\b", re.I
)


# The audit as one operator sees it: each table's rows of that operator's runs. A run's
# children go with it by run_id; memory_events (row histories, any operator's edits) and any
# table not named here are not shown at all.
_MINE = "run_id IN (SELECT id FROM {src}.runs WHERE operator = $operator)"
AUDIT_ROWS: dict[str, str] = {
    "runs": "operator = $operator",
    "tool_calls": _MINE,
    "messages": _MINE,
    "steps": _MINE,
    "events": _MINE,
    "recalls": _MINE,
    "memory_decisions": _MINE,
    "memory_events": "false",
}
_SOURCE = "olav_audit_source"


def domain_connection(ctx: ToolContext, sql: str | None = None) -> Any:
    """A read-only connection to the domain database and to this run's operator's part of the
    audit. The audit file is attached only long enough to copy the operator's rows (of the
    tables ``sql`` names; the others are there with their columns and no rows) into an
    in-memory ``audit`` catalog, then detached: with external access off, no statement can
    reach another operator's runs, messages or recalls, whatever it names."""
    import duckdb

    con = duckdb.connect(":memory:")
    schemas = []
    if ctx.domain_db.exists():
        _attach(con, "domain", ctx.domain_db)
        schemas.append("domain.main")
    if ctx.audit_db.exists():
        _attach(con, _SOURCE, ctx.audit_db)
        try:
            _operators_audit(con, user_name(ctx.config or {}), sql or "")
        finally:
            con.execute(f"DETACH {_SOURCE}")
        schemas.append("audit.main")
    if schemas:
        con.execute(f"SET search_path = '{','.join(schemas)}'")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def _operators_audit(con: Any, operator: str, sql: str) -> None:
    import duckdb

    con.execute("ATTACH ':memory:' AS audit")
    present = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = ?", [_SOURCE]
        ).fetchall()
    }
    named = {w.lower() for w in re.findall(r"[A-Za-z_]+", sql)}
    for table, rows in AUDIT_ROWS.items():
        if table not in present:
            continue
        where = rows.format(src=_SOURCE) if table in named else "false"
        copy = f"CREATE TABLE audit.main.{table} AS SELECT * FROM {_SOURCE}.main.{table}"
        try:
            con.execute(f"{copy} WHERE {where}", {"operator": operator} if "$" in where else {})
        except duckdb.Error:  # a file from before runs named their operator: no rows
            con.execute(f"{copy} WHERE false")


ATTACH_TRIES = 20
QUERY_SECONDS = 30.0  # a statement running longer is interrupted
COUNTED_ROWS = 100_000  # past this, a result's size is reported as "more than"
MEMORY_LIMIT = "1GB"


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
    count = f"more than {COUNTED_ROWS:,}" if total > COUNTED_ROWS else str(total)
    more = (
        f"\n({count} rows, first {len(rows)} shown)" if total > len(rows) else f"\n({count} rows)"
    )
    return "\n".join(lines) + more


def _fetch(cur: Any) -> tuple[list[tuple[Any, ...]], int]:
    """The first SHOWN_ROWS rows and the row count, reading the rest in chunks; past
    COUNTED_ROWS the count stops there (``rows_text`` says "more than")."""
    rows = cur.fetchmany(SHOWN_ROWS)
    total = len(rows)
    while total <= COUNTED_ROWS and (chunk := cur.fetchmany(10_000)):
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
        con = domain_connection(ctx, statement)
    except OlavError as exc:
        return tool_error(str(exc))
    timer = threading.Timer(QUERY_SECONDS, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        cur = con.execute(statement)
        cols = [d[0] for d in cur.description or []]
        rows, total = _fetch(cur)
    except duckdb.InterruptException:
        return tool_error(
            f"the query ran longer than {QUERY_SECONDS:g} s and was stopped. Narrow it with a "
            "WHERE clause or a LIMIT"
        )
    except duckdb.Error as exc:
        msg = str(exc).splitlines()[0]
        hint = (
            " Call describe_table to see the real columns."
            if ("column" in msg.lower() or "table" in msg.lower())
            else ""
        )
        return tool_error(msg + hint)
    finally:
        timer.cancel()
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
