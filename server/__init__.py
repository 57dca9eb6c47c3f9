"""engrama-vault MCP server, graph store, search and reflect."""

__version__ = "0.1.0"
