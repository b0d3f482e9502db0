"""The tool registry: every built-in tool by name, ``register_tool`` for more, and
``build_tools`` binding the ones an agent lists to its context."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel

from olav.core.errors import OlavError
from olav.runtime.tools.base import (
    NEEDS_CONSENT,
    ConsentRequest,
    ConsentTool,
    ToolContext,
    ToolFailure,
    tool_error,
)
from olav.runtime.tools.data import DescribeArgs, QueryArgs, db_query, describe_table
from olav.runtime.tools.exports import ExportArgs, format_and_export
from olav.runtime.tools.learning import (
    CodeFixArgs,
    GuideDraftArgs,
    ScanArgs,
    draft_code_fix,
    propose_guide_draft,
    scan_error_signatures_tool,
)
from olav.runtime.tools.memory import (
    CommitArgs,
    DraftArgs,
    LessonArgs,
    NoArgs,
    RecallArgs,
    commit_to_memory,
    describe_commit,
    memory_stats,
    propose_memory_draft,
    recall_memory,
    record_reflection,
)
from olav.runtime.tools.netlab import (
    BackupArgs,
    DevicesArgs,
    SnapshotArgs,
    backup_device_config,
    list_devices,
    take_snapshot,
)
from olav.runtime.tools.scripts import ScriptArgs, execute_skill_script

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
                result = tool_error(f"{type(exc).__name__}: {exc}")
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
