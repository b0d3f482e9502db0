"""olav's built-in tools. Argument schemas are strict pydantic models (no ``Any``), string
arguments lose leaked literal quotes, and failures go back to the model as values
("Error: ... " strings), never as exceptions that end the run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field, field_validator

from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text

# Tools that change the outside world and need a human's approval in the chat.
DANGEROUS = frozenset({"execute_skill_script", "take_snapshot"})
# Tools that store something for good: they run only after a person's yes to what they will
# store (never auto-approved; refused where nobody can be asked). See ConsentTool.
NEEDS_CONSENT = frozenset({"commit_to_memory"})
_QUOTES = "\"'`“”‘’"
_READ_ONLY_SQL = re.compile(
    r"^\s*(select|with|describe|show|explain|summarize|pragma\s+table_info)\b", re.I
)


def strip_quote_leak(value: str) -> str:
    """Small models sometimes wrap string arguments in literal quotes: '"reports"' -> reports."""
    out = value.strip()
    while len(out) >= 2 and out[0] in _QUOTES and out[-1] in _QUOTES:
        out = out[1:-1].strip()
    return out


class _Args(BaseModel):
    """Base for tool arguments: every str field is stripped of leaked quotes."""

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, v: object) -> object:
        # only short single-line values (names, formats, ids); content is left as written
        if isinstance(v, str) and "\n" not in v and len(v) <= 200:
            return strip_quote_leak(v)
        return v


@dataclass
class ToolContext:
    root: Path
    exports: Path
    domain_db: Path
    audit_db: Path
    agent: str
    store_factory: Callable[[], Any]
    agent_dir: Path | None = None
    logs: Path | None = None
    tier: str = "small"
    config: Any = None
    run: Any = None  # the session's RunContext: its run_id changes every turn
    _store: Any = field(default=None, repr=False)

    @property
    def run_id(self) -> str | None:
        return getattr(self.run, "run_id", None)

    @property
    def store(self) -> Any:
        if self._store is None:
            self._store = self.store_factory()
        return self._store


class ToolFailure(str):
    """A tool's error, returned to the model as a value. The tool wrapper turns it into a
    ToolMessage with status "error", so a result that merely begins with "Error" (an "Error
    rates per port" table) is not a failure."""


def _error(msg: str) -> str:
    return ToolFailure(f"Error: {msg}")


@dataclass(frozen=True)
class ConsentRequest:
    """What a consent tool call would do, for the person's y/N prompt."""

    subject: str  # what is approved, e.g. the draft's intent
    preview: str  # what would be stored, shown to the person
    refusal: str  # the error the model gets when the person says no (or cannot be asked)


@dataclass(frozen=True)
class Consent:
    """A person's yes to one tool call on ``subject``; ``by`` says where they gave it."""

    by: str
    subject: str


_CONSENT: ContextVar[Consent | None] = ContextVar("olav_consent", default=None)


@contextmanager
def consent_given(consent: Consent | None) -> Iterator[None]:
    """Run a tool call with the person's yes, which only the approval middleware can grant:
    the model cannot forge it through the call's arguments."""
    token = _CONSENT.set(consent)
    try:
        yield
    finally:
        _CONSENT.reset(token)


def current_consent() -> Consent | None:
    return _CONSENT.get()


class ConsentTool(StructuredTool):
    """A tool in NEEDS_CONSENT: ``describe(args)`` says what a person is asked to approve."""

    describe: Callable[[dict[str, Any]], ConsentRequest]


def _safe_export_path(ctx: ToolContext, filename: str, fmt: str) -> Path:
    name = filename.replace("\\", "/").lstrip("/")
    if name.startswith("exports/"):
        name = name[len("exports/") :]
    target = (ctx.exports / name).resolve()
    if not target.is_relative_to(ctx.exports.resolve()) or not name:
        raise OlavError(f"{filename!r} is outside exports/; pass a plain file name")
    if not target.suffix:
        target = target.with_suffix(f".{fmt}")
    return target


class ExportArgs(_Args):
    data: str = Field(description="The full content to write, as one plain string.")
    format: Literal["md", "json", "csv", "html", "txt"] = Field(
        description="File format: md, json, csv, html or txt."
    )
    filename: str = Field(description="File name inside exports/, e.g. bgp_audit.md")


def format_and_export(ctx: ToolContext, data: str, format: str, filename: str) -> str:
    try:
        target = _safe_export_path(ctx, filename, format)
    except OlavError as exc:
        return _error(str(exc))
    if format == "json":
        try:
            data = json.dumps(json.loads(data), ensure_ascii=False, indent=2)
        except json.JSONDecodeError as exc:
            return _error(f"data is not valid JSON ({exc.msg} at char {exc.pos}); fix and retry")
    atomic_write_text(target, data)
    rel = target.relative_to(ctx.root)
    return f"Saved {rel} ({len(data.encode())} bytes)"


def _domain_connection(ctx: ToolContext) -> Any:
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


class QueryArgs(_Args):
    sql: str = Field(description="One read-only SQL statement (SELECT/WITH/DESCRIBE/SHOW).")


SHOWN_ROWS = 50


def _rows_text(cols: list[str], rows: list[tuple[Any, ...]], total: int) -> str:
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
        return _error("send one statement at a time")
    if not _READ_ONLY_SQL.match(statement):
        return _error("db_query is read-only: use SELECT, WITH, DESCRIBE or SHOW")
    import duckdb

    try:
        con = _domain_connection(ctx)
    except OlavError as exc:
        return _error(str(exc))
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
        return _error(msg + hint)
    finally:
        con.close()
    return _rows_text(cols, rows, total)


class DescribeArgs(_Args):
    name: str = Field(description="Table or view name, e.g. devices or runs.")


def describe_table(ctx: ToolContext, name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        return _error(f"{name!r} is not a table name")
    con = _domain_connection(ctx)
    try:
        tables = con.execute(
            "SELECT table_schema || '.' || table_name, table_catalog FROM "
            "information_schema.tables WHERE table_catalog IN ('domain', 'audit')"
        ).fetchall()
        names = sorted({t[0].split(".")[-1] for t in tables})
        short = name.split(".")[-1]
        if short not in names:
            return _error(f"no table {name!r}. Tables: {', '.join(names)}")
        cols = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position",
            [short],
        ).fetchall()
    finally:
        con.close()
    return f"{short}: " + ", ".join(f"{c} {t}" for c, t in cols)


class RecallArgs(_Args):
    query: str = Field(description="What to look for in memory.")
    category: str | None = Field(default=None, description="Optional category filter.")
    scope: str | None = Field(default=None, description="Optional scope (an agent or global).")


def recall_memory(
    ctx: ToolContext, query: str, category: str | None = None, scope: str | None = None
) -> str:
    from olav.memory.scopes import allowed_scope, personal_scopes

    if scope and ctx.config and not allowed_scope(ctx.config, scope):
        return _error(f"scope {scope} is another operator's private memory")
    mine = personal_scopes(ctx.config) if ctx.config else ()
    scopes = [scope] if scope else [ctx.agent, "global", *mine]
    try:
        hits = ctx.store.search(
            query, scopes=scopes, categories=[category] if category else None, k=5
        )
    except OlavError as exc:
        return _error(str(exc))
    if not hits:
        return "No memories match."
    out = []
    for h in hits:
        body = " ".join(str(h.record.metadata.get("body") or h.record.text).split())[:400]
        out.append(f"- [{h.record.category} {h.record.id}] {body}")
    return "\n".join(out)


class ScriptArgs(_Args):
    script: str = Field(description="Script name in the agent's scripts/ folder, e.g. check.py")
    input_json: str = Field(default="{}", description="JSON object passed on stdin.")


def execute_skill_script(
    ctx: ToolContext, script: str, input_json: str = "{}", timeout: float = 60.0
) -> str:
    if ctx.agent_dir is None:
        return _error("this agent has no scripts/ folder")
    folder = (ctx.agent_dir / "scripts").resolve()
    target = (folder / script).resolve()
    if not target.is_relative_to(folder) or target.suffix != ".py" or not target.is_file():
        available = sorted(p.name for p in folder.glob("*.py")) if folder.is_dir() else []
        return _error(f"no script {script!r}; available: {', '.join(available) or 'none'}")
    try:
        json.loads(input_json)
    except json.JSONDecodeError:
        return _error("input_json must be a JSON object")
    try:
        proc = subprocess.run(
            [sys.executable, str(target)],
            input=input_json,
            text=True,
            capture_output=True,
            timeout=timeout,
            cwd=ctx.agent_dir,
        )
    except subprocess.TimeoutExpired:
        return _error(f"{script} timed out after {timeout:.0f}s")
    if proc.returncode != 0:
        return _error(f"{script} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip()[:8000]


class DevicesArgs(_Args):
    role: str | None = Field(default=None, description="border, core or access")
    site: str | None = Field(default=None, description="Site code, e.g. sh1")


def _devices(
    ctx: ToolContext,
    role: str | None = None,
    site: str | None = None,
    names: list[str] | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    con = _domain_connection(ctx)
    try:
        sql = "SELECT * FROM devices WHERE 1=1"
        params: list[Any] = []
        if role:
            sql += " AND role = ?"
            params.append(role)
        if site:
            sql += " AND site = ?"
            params.append(site)
        if names:
            sql += " AND hostname IN (SELECT unnest(?::VARCHAR[]))"
            params.append(names)
        cur = con.execute(sql + " ORDER BY hostname", params)
        return [d[0] for d in cur.description], cur.fetchall()
    finally:
        con.close()


def list_devices(ctx: ToolContext, role: str | None = None, site: str | None = None) -> str:
    try:
        cols, rows = _devices(ctx, role, site)
    except Exception as exc:
        return _error(f"the inventory is not available ({exc})")
    return _rows_text(cols, rows[:SHOWN_ROWS], len(rows))


class BackupArgs(_Args):
    device: str = Field(description="Hostname from the inventory, e.g. sh1-border01")


def backup_device_config(ctx: ToolContext, device: str) -> str:
    """Lab simulator: renders the device's configuration from the inventory and saves it."""
    cols, rows = _devices(ctx, names=[device])
    if not rows:
        return _error(f"unknown device {device!r}; call list_devices first")
    d = dict(zip(cols, rows[0], strict=True))
    config = "\n".join(
        [
            f"! {d['hostname']} ({d['vendor']} {d['model']}, {d['os_version']})",
            f"hostname {d['hostname']}",
            "interface Loopback0",
            f" ip address {d['loopback']} 255.255.255.255",
            "interface Management0",
            f" ip address {d['mgmt_ip']} 255.255.255.0",
            f"router bgp {d['asn']}",
            f" bgp router-id {d['loopback']}",
            "end",
        ]
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return format_and_export(ctx, config, "txt", f"backups/{device}_{stamp}.cfg")


class SnapshotArgs(_Args):
    devices: list[str] = Field(description="Hostnames to snapshot.")


def take_snapshot(ctx: ToolContext, devices: list[str]) -> str:
    _, rows = _devices(ctx, names=[strip_quote_leak(d) for d in devices])
    if not rows:
        return _error("none of those devices are in the inventory; call list_devices first")
    found = [r[0] for r in rows]
    snap = {"taken_at": datetime.now(UTC).isoformat(), "devices": found}
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    saved = format_and_export(ctx, json.dumps(snap), "json", f"snapshots/snapshot_{stamp}.json")
    missing = sorted(set(devices) - set(found))
    return saved + (f"; not in inventory: {', '.join(missing)}" if missing else "")


class NoArgs(_Args):
    pass


def memory_stats(ctx: ToolContext) -> str:
    s = ctx.store.stats()
    cats = ", ".join(f"{k} {v}" for k, v in s["by_category"].items())
    scopes = ", ".join(f"{k} {v}" for k, v in s["by_scope"].items())
    return f"{s['rows']} rows ({s['embedder']}, {s['dim']}-d). Categories: {cats}. Scopes: {scopes}"


class ScanArgs(_Args):
    days: int = Field(default=7, ge=1, le=90, description="How many days back to scan.")


def scan_error_signatures_tool(ctx: ToolContext, days: int = 7) -> str:
    from olav.learning.signatures import scan_error_signatures

    sigs = scan_error_signatures(ctx.audit_db, ctx.logs, days=days, tier=ctx.tier)
    if not sigs:
        return f"No errors in the last {days} days."
    return json.dumps([s.to_json() for s in sigs], ensure_ascii=False, indent=1)


class GuideDraftArgs(_Args):
    intent: str = Field(description="snake_case name of the convention.")
    keywords: list[str] = Field(description="Words that should recall it (both languages).")
    body: str = Field(description="The directive, imperative and specific.")
    agent: str = Field(default="core", description="Agent the guide belongs to.")


def propose_guide_draft(
    ctx: ToolContext, intent: str, keywords: list[str], body: str, agent: str = "core"
) -> str:
    from olav.learning.curator import propose_draft, sanitise_intent

    try:
        preview = propose_draft(
            ctx.root,
            intent=intent,
            keywords=keywords,
            body=body,
            category="usage_guide",
            agent=agent,
            run_id=ctx.run_id,
        )
    except OlavError as exc:
        return _error(str(exc))
    name = sanitise_intent(intent)
    return (
        "Guide draft saved for a human to review; it is NOT in memory. They see it with "
        f"`olav kb drafts show {name}`.\n" + preview
    )


class CodeFixArgs(_Args):
    title: str = Field(description="Short title of the problem.")
    root_cause: str = Field(description="What causes the error, from the evidence.")
    suggested_fix: str = Field(description="What a developer should change.")
    patch: str = Field(default="", description="Optional unified diff; never applied.")


def draft_code_fix(
    ctx: ToolContext, title: str, root_cause: str, suggested_fix: str, patch: str = ""
) -> str:
    from olav.learning.reflector import write_code_fix

    path = write_code_fix(
        ctx.root,
        ctx.exports,
        title=title,
        root_cause=root_cause,
        suggested_fix=suggested_fix,
        patch=patch,
    )
    return (
        f"Proposal written to {path.relative_to(ctx.root)} (not applied). A person reviews it "
        f"with `olav kb drafts show {path.stem}`."
    )


class LessonArgs(_Args):
    lesson: str = Field(description="One-line constraint learned from a failure.")


def record_reflection(ctx: ToolContext, lesson: str) -> str:
    from olav.memory.calibration import dedup_distance
    from olav.memory.lessons import add_reflection
    from olav.memory.scopes import private_scope

    threshold = dedup_distance(ctx.config, ctx.store.embedder.name) if ctx.config else 0.20
    scope = private_scope(ctx.config) or "global"
    added, rid = add_reflection(
        ctx.store, lesson, source="reflector", dedup_distance=threshold, scope=scope
    )
    return f"Recorded lesson {rid}" if added else f"Skipped: a near-identical lesson exists ({rid})"


class DraftArgs(_Args):
    intent: str = Field(description="snake_case name of the memory, e.g. r1_loopback")
    keywords: list[str] = Field(description="Words that should recall it (both languages).")
    body: str = Field(description="The memory itself, as the user stated it.")
    category: Literal[
        "usage_guide",
        "format_guide",
        "fact",
        "preference",
        "decision",
        "expert_knowledge",
        "document",
        "topology",
    ] = "fact"
    agent: str = Field(default="core", description="Agent the memory belongs to.")
    scope: str | None = Field(default=None, description="global, an agent, or team:<id>.")
    chunks: list[str] | None = Field(
        default=None,
        description="Only for category document: the pieces to store; leave empty to split "
        "automatically.",
    )


def propose_memory_draft(
    ctx: ToolContext,
    intent: str,
    keywords: list[str],
    body: str,
    category: str = "fact",
    agent: str = "core",
    scope: str | None = None,
    chunks: list[str] | None = None,
) -> str:
    from olav.learning.curator import propose_draft

    try:
        return propose_draft(
            ctx.root,
            intent=intent,
            keywords=keywords,
            body=body,
            category=category,
            agent=agent,
            scope=scope,
            chunks=chunks,
            run_id=ctx.run_id,
        )
    except OlavError as exc:
        return _error(str(exc))


class CommitArgs(_Args):
    from_draft: bool = Field(default=True, description="Must be true: commit the draft.")
    intent: str | None = Field(default=None, description="Which draft; default the latest.")


def commit_to_memory(ctx: ToolContext, from_draft: bool = True, intent: str | None = None) -> str:
    from olav.learning.curator import commit_draft

    if not from_draft:
        return _error("commit_to_memory only commits a draft the user has confirmed")
    consent = current_consent()
    if consent is None:  # the approval middleware did not ask a person, or they said no
        return _error("a person must confirm the draft at the chat's approval prompt first")
    try:
        return commit_draft(
            ctx.root,
            ctx.store,
            intent=consent.subject,  # the draft the person was shown, not a newer one
            audit_path=ctx.audit_db,
            run_id=ctx.run_id,
            confirmed_by=consent.by,
        )
    except OlavError as exc:
        return _error(str(exc))


def describe_commit(ctx: ToolContext, args: dict[str, Any]) -> ConsentRequest:
    """The draft commit_to_memory would store, shown at the y/N prompt. Raises OlavError when
    there is nothing to confirm (no draft, or one proposed in this very turn)."""
    from olav.learning.curator import draft_for_consent

    if args.get("from_draft") is False:
        raise OlavError("commit_to_memory only commits a draft the user has confirmed")
    draft, preview = draft_for_consent(
        ctx.root, args.get("intent"), run_id=ctx.run_id, audit_path=ctx.audit_db
    )
    refusal = (
        f"the person did not confirm the draft {draft.intent}; nothing was stored. The draft "
        f"stays: they can confirm it later with `olav kb drafts confirm {draft.intent}`. "
        "Do not retry; tell them that."
    )
    return ConsentRequest(subject=draft.intent, preview=preview, refusal=refusal)


_DESCRIBE: dict[str, Callable[[ToolContext, dict[str, Any]], ConsentRequest]] = {
    "commit_to_memory": describe_commit,
}


_SPECS: dict[str, tuple[Callable[..., str], type[BaseModel], str]] = {
    "format_and_export": (
        format_and_export,
        ExportArgs,
        "Write or save content to a file in exports/. The only way to save.",
    ),
    "db_query": (
        db_query,
        QueryArgs,
        "Run one read-only SQL query over the workspace tables (devices, runs, ...).",
    ),
    "describe_table": (
        describe_table,
        DescribeArgs,
        "Show a table's columns. Use it after an unknown column/table error.",
    ),
    "recall_memory": (recall_memory, RecallArgs, "Search memory explicitly."),
    "execute_skill_script": (
        execute_skill_script,
        ScriptArgs,
        "Run a script from this agent's scripts/ folder with JSON input.",
    ),
    "list_devices": (list_devices, DevicesArgs, "List inventory devices by role and/or site."),
    "backup_device_config": (
        backup_device_config,
        BackupArgs,
        "Save one device's running configuration to exports/backups/.",
    ),
    "take_snapshot": (take_snapshot, SnapshotArgs, "Record a state snapshot of devices."),
    "memory_stats": (memory_stats, NoArgs, "Summarise memory rows per category and scope."),
    "scan_error_signatures": (
        scan_error_signatures_tool,
        ScanArgs,
        "Histogram of normalised recent errors from the audit log.",
    ),
    "record_reflection": (
        record_reflection,
        LessonArgs,
        "Store a one-line lesson learned from a failure.",
    ),
    "propose_memory_draft": (
        propose_memory_draft,
        DraftArgs,
        "Turn 1 of 'remember that': write a draft and return a preview to quote. Stores nothing.",
    ),
    "commit_to_memory": (
        commit_to_memory,
        CommitArgs,
        "Turn 2: commit the draft after the user confirmed it.",
    ),
    "propose_guide_draft": (
        propose_guide_draft,
        GuideDraftArgs,
        "Draft a new guide for a human to confirm (KB lane). Stores nothing in memory.",
    ),
    "draft_code_fix": (
        draft_code_fix,
        CodeFixArgs,
        "Write a fix proposal to exports/reflections/ (code lane; never applied).",
    ),
}
BUILTIN_TOOLS = tuple(_SPECS)


def register_tool(
    name: str, fn: Callable[..., str], args_schema: type[BaseModel], description: str
) -> None:
    """Add a tool that agents can list in SKILL.md. ``fn(ctx, **args) -> str``; return
    "Error: ..." strings for failures the model should see."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise OlavError(f"tool name {name!r} must be snake_case")
    _SPECS[name] = (fn, args_schema, description)


def build_tools(names: list[str], ctx: ToolContext) -> list[BaseTool]:
    """The named built-in tools bound to a context. Unknown names are a build-time error."""
    tools: list[BaseTool] = []
    for name in names:
        if name not in _SPECS:
            raise OlavError(
                f"agent {ctx.agent} lists unknown tool {name!r}",
                hint="Available tools: " + ", ".join(sorted(_SPECS)),
            )
        fn, schema, desc = _SPECS[name]

        def bound(_fn: Callable[..., str] = fn, **kwargs: Any) -> str:
            try:
                result = _fn(ctx, **kwargs)
            except Exception as exc:  # returned to the model as a value
                result = _error(f"{type(exc).__name__}: {exc}")
            if isinstance(result, ToolFailure):
                raise ToolException(str(result))  # the tool node answers with status=error
            return result

        tools.append(_make_tool(name, bound, schema, desc, ctx))
    return tools


def _make_tool(
    name: str, fn: Callable[..., str], schema: type[BaseModel], desc: str, ctx: ToolContext
) -> BaseTool:
    if name not in NEEDS_CONSENT:
        return StructuredTool.from_function(
            func=fn, name=name, description=desc, args_schema=schema, handle_tool_error=True
        )
    describe = _DESCRIBE[name]
    return ConsentTool.from_function(
        func=fn,
        name=name,
        description=desc,
        args_schema=schema,
        handle_tool_error=True,
        describe=lambda args: describe(ctx, args),
    )


def expires_in(days: int) -> datetime:
    return datetime.now(UTC) + timedelta(days=days)
