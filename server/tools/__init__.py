"""The MCP tools. Each module registers a small group; handlers validate, call one service, return a model."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from server.services import reflect_hooks
from server.tools import brief, context, forget, ingest, memory, read_note, search, status, sync


def register_tools(mcp: MCPServer) -> None:
    """Register the engrama_* tools; the four insight tools only when reflect is installed."""
    for module in (status, search, memory, context, forget, sync, ingest, brief, read_note):
        module.register(mcp)
    if reflect_hooks.available():
        from server.tools import insights

        insights.register(mcp)
