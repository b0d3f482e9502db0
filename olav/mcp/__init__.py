"""``olav mcp``: the workspace's memory for any MCP client (editor agents, desktop assistants).

Import this package only inside a command: it loads the MCP SDK and the memory store.
"""

from olav.mcp.serve import serve
from olav.mcp.server import build_server
from olav.mcp.service import McpArgumentError, MemoryService, ToolCall

__all__ = ["McpArgumentError", "MemoryService", "ToolCall", "build_server", "serve"]
