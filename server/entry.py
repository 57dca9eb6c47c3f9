"""The `engrama-vault` console script's entry point, kept tiny on purpose: it limits the C heap's arenas
before any thread starts (vault_sync/heap.py), then hands over to the command line.

Nothing here may import the MCP SDK or the commands at module level: a process that only needs to start
(`--version`, a note reader started as `python -c`) should not pay for them."""

from __future__ import annotations


def main() -> int:
    from vault_sync.heap import limit_arenas

    limit_arenas()  # before the database, watcher and SDK threads start, each of which would take an arena
    from server.cli import main as run

    return run()
