"""The `engrama-vault` console script's entry point, kept tiny on purpose.

Note reader processes are started with `spawn` (vault_sync/reader_process.py), which re-imports the parent's
main module: the console script, and with it whatever module the script imports. Pointing the script here
rather than at server.cli keeps each reader from importing every command, the MCP SDK and the search code it
never uses (about 10 MB of memory per reader)."""

from __future__ import annotations


def main() -> int:
    from server.cli import main as run

    return run()
