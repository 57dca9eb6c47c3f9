"""Everything that touches vault files: parse, identify, write safely, scan, watch, reconcile.

This package never imports `server` or `mcp`; it reaches the graph through `vault_sync.protocol`.
"""
