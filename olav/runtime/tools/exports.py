"""Saving files: ``format_and_export``, the only way a tool writes into exports/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field

from olav.core.errors import OlavError
from olav.core.fsutil import atomic_write_text
from olav.runtime.tools.base import ToolArgs, ToolContext, tool_error


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


class ExportArgs(ToolArgs):
    data: str = Field(description="The full content to write, as one plain string.")
    format: Literal["md", "json", "csv", "html", "txt"] = Field(
        description="File format: md, json, csv, html or txt."
    )
    filename: str = Field(description="File name inside exports/, e.g. bgp_audit.md")


def format_and_export(ctx: ToolContext, data: str, format: str, filename: str) -> str:
    try:
        target = _safe_export_path(ctx, filename, format)
    except OlavError as exc:
        return tool_error(str(exc))
    if format == "json":
        try:
            data = json.dumps(json.loads(data), ensure_ascii=False, indent=2)
        except json.JSONDecodeError as exc:
            reason = f"{exc.msg} at char {exc.pos}"
            return tool_error(f"data is not valid JSON ({reason}); fix and retry")
    atomic_write_text(target, data)
    rel = target.relative_to(ctx.root)
    return f"Saved {rel} ({len(data.encode())} bytes)"
