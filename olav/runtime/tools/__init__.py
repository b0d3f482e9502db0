"""olav's built-in tools, one module per family: exports (saving files), data (read-only SQL),
scripts (an agent's own scripts), netlab (the network lab simulator) and memory; the
registry binds them, and the extra tools a composer passes (olav.compose: the learning
tools), to a run. Argument schemas are strict pydantic models (no ``Any``),
string arguments lose leaked literal quotes, and failures go back to the model as values
(``ToolFailure`` strings starting "Error: "), never as exceptions that end the run."""

from olav.runtime.tools.base import (
    DANGEROUS,
    NEEDS_CONSENT,
    Consent,
    ConsentRequest,
    ConsentTool,
    ToolArgs,
    ToolContext,
    ToolFailure,
    consent_given,
    current_consent,
    strip_quote_leak,
    tool_error,
)
from olav.runtime.tools.registry import BUILTIN_TOOLS, ToolSpec, build_tools, register_tool

__all__ = [
    "BUILTIN_TOOLS",
    "DANGEROUS",
    "NEEDS_CONSENT",
    "Consent",
    "ConsentRequest",
    "ConsentTool",
    "ToolArgs",
    "ToolContext",
    "ToolFailure",
    "ToolSpec",
    "build_tools",
    "consent_given",
    "current_consent",
    "register_tool",
    "strip_quote_leak",
    "tool_error",
]
