"""Server middleware for ``olav mcp``: strict tool arguments and an audit row per call."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from olav.mcp.service import MemoryService

AUDITED = ("tools/call", "resources/read", "prompts/get")


def client_name(ctx: Any) -> str:
    """The client's name from its initialize clientInfo (or request envelope), else unknown."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    return str(getattr(info, "name", "") or "unknown")


class CallAudit:
    """Server middleware: checks tool arguments strictly (one-line errors) and audits every
    tool call, resource read and prompt in audit.duckdb as an ``mcp_call`` event."""

    def __init__(self, svc: MemoryService, tools: list[Tool], transport: str) -> None:
        self.svc = svc
        self.tools = {t.name: t for t in tools}
        self.transport = transport
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="olav-mcp-audit")

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method not in AUDITED or ctx.request_id is None:
            return await call_next(ctx)
        started = time.perf_counter()
        status: str = "error"
        error: str | None = "the call raised"
        try:
            result = self.refusal(ctx.params or {}) if ctx.method == "tools/call" else None
            result = result or await call_next(ctx)
            status, error = outcome_of(result)
            return result
        finally:
            detail = {
                "client": client_name(ctx),
                "method": ctx.method,
                "tool": _target(ctx.params or {}),
                "agent": self.svc.agent,
                "operator": self.svc.author.name,  # over HTTP: the session's token's
                "transport": self.transport,
                "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                "status": status,
                "error": error,
            }
            # written after the reply, one at a time, so auditing adds no latency
            self._writer.submit(self.svc.audit.event, None, "mcp_call", detail)

    def refusal(self, params: Any) -> CallToolResult | None:
        """A tool error for arguments the tool's schema refuses, else None."""
        name = str(params.get("name"))
        tool = self.tools.get(name)
        args = params.get("arguments") or {}
        if tool is None or not isinstance(args, dict):
            return None
        known = list(tool.parameters.get("properties", {}))
        unknown = sorted(set(args) - set(known))
        if unknown:
            return tool_error(
                f"{name}: unknown argument {unknown[0]!r}; it takes {', '.join(known)}"
            )
        try:
            tool.fn_metadata.validate_arguments(args)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            return tool_error(f"{name}: argument {where!r}: {first['msg']}")
        return None


def tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _target(params: Any) -> str:
    return str(params.get("name") or params.get("uri") or "")


def outcome_of(result: Any) -> tuple[str, str | None]:
    """(status, error) of a handler's result: ok, error (with its text) or input_required."""
    data = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result or {}
    if data.get("resultType") == "input_required" or "inputRequests" in data:
        return "input_required", None
    if data.get("isError"):
        content = data.get("content") or [{}]
        return "error", str(content[0].get("text", ""))[:300]
    return "ok", None
