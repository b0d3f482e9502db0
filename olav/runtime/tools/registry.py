"""The tool registry: every built-in tool by name, ``register_tool`` for more, and
``build_tools`` binding the ones an agent lists (from the registry, or the extra tools a
Session's composer passes) to its context."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
from olav.runtime.tools.memory import (
    LessonArgs,
    NoArgs,
    RecallArgs,
    memory_stats,
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


@dataclass(frozen=True)
class ToolSpec:
    """One tool: ``fn(ctx, **args) -> str``, its argument model and the description the model
    reads. A tool in NEEDS_CONSENT has ``describe(ctx, args)``: what a person is asked to
    approve before it runs."""

    fn: Callable[..., str]
    args: type[BaseModel]
    description: str
    describe: Callable[[ToolContext, dict[str, Any]], ConsentRequest] | None = None


_SPECS: dict[str, ToolSpec] = {
    "format_and_export": ToolSpec(
        format_and_export,
        ExportArgs,
        "Write or save content to a file in exports/. The only way to save.",
    ),
    "db_query": ToolSpec(
        db_query,
        QueryArgs,
        "Run one read-only SQL query over the workspace tables (devices, runs, ...).",
    ),
    "describe_table": ToolSpec(
        describe_table,
        DescribeArgs,
        "Show a table's columns. Use it after an unknown column/table error.",
    ),
    "recall_memory": ToolSpec(recall_memory, RecallArgs, "Search memory explicitly."),
    "execute_skill_script": ToolSpec(
        execute_skill_script,
        ScriptArgs,
        "Run a script from this agent's scripts/ folder with JSON input.",
    ),
    "list_devices": ToolSpec(
        list_devices, DevicesArgs, "List inventory devices by role and/or site."
    ),
    "backup_device_config": ToolSpec(
        backup_device_config,
        BackupArgs,
        "Save one device's running configuration to exports/backups/.",
    ),
    "take_snapshot": ToolSpec(take_snapshot, SnapshotArgs, "Record a state snapshot of devices."),
    "memory_stats": ToolSpec(memory_stats, NoArgs, "Summarise memory rows per category and scope."),
    "record_reflection": ToolSpec(
        record_reflection,
        LessonArgs,
        "Store a one-line lesson learned from a failure.",
    ),
}
# the engine's own tools; the learning tools (drafts, commits, error scans) are added by
# whoever composes a Session with learning (olav.compose)
BUILTIN_TOOLS = tuple(_SPECS)


def tool_names() -> list[str]:
    """The registry's tool names, registered plugins' included."""
    return sorted(_SPECS)


def register_tool(
    name: str, fn: Callable[..., str], args_schema: type[BaseModel], description: str
) -> None:
    """Add a tool that agents can list in SKILL.md. ``fn(ctx, **args) -> str``; return
    "Error: ..." strings for failures the model should see."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise OlavError(f"tool name {name!r} must be snake_case")
    _SPECS[name] = ToolSpec(fn, args_schema, description)


def build_tools(
    names: list[str], ctx: ToolContext, extra: Mapping[str, ToolSpec] | None = None
) -> list[BaseTool]:
    """The named tools bound to a context: the registry's, and ``extra`` (the tools the
    Session's composer adds). Unknown names are a build-time error."""
    specs = {**_SPECS, **(extra or {})}
    tools: list[BaseTool] = []
    for name in names:
        if name not in specs:
            raise OlavError(
                f"agent {ctx.agent} lists unknown tool {name!r}",
                hint="Available tools: " + ", ".join(sorted(specs)),
            )
        spec = specs[name]

        def bound(_fn: Callable[..., str] = spec.fn, **kwargs: Any) -> str:
            try:
                result = _fn(ctx, **kwargs)
            except Exception as exc:  # returned to the model as a value
                result = tool_error(f"{type(exc).__name__}: {exc}")
            if isinstance(result, ToolFailure):
                raise ToolException(str(result))  # the tool node answers with status=error
            return result

        tools.append(_make_tool(name, bound, spec, ctx))
    return tools


def _make_tool(name: str, fn: Callable[..., str], spec: ToolSpec, ctx: ToolContext) -> BaseTool:
    common: dict[str, Any] = {
        "func": fn,
        "name": name,
        "description": spec.description,
        "args_schema": spec.args,
        "handle_tool_error": True,
    }
    if name not in NEEDS_CONSENT:
        return StructuredTool.from_function(**common)
    describe = spec.describe
    if describe is None:
        raise OlavError(f"tool {name!r} needs a person's consent but cannot describe its call")
    return ConsentTool.from_function(**common, describe=lambda args: describe(ctx, args))
