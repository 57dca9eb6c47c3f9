"""`engrama-vault status`: what the graph holds and how the subsystems are configured."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from server.commands.common import add_common_options, settings_from
from server.runtime import open_runtime
from server.status import build_status


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "status",
        help="show the graph, vault, search and profile status",
        description="Show the graph, vault, search and profile status. --json prints the same object as the "
        "engrama_status MCP tool.",
    )
    add_common_options(parser)
    parser.add_argument("--json", action="store_true", help="print the status object as JSON on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)

    async def collect() -> dict[str, Any]:
        async with open_runtime(settings, writable=False) as rt:
            return await build_status(rt)

    status = asyncio.run(collect())
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print(_human(status))
    return 0


def _human(status: dict[str, Any]) -> str:
    backend, vault, search, profile = status["backend"], status["vault"], status["search"], status["profile"]
    lines = [
        f"engrama-vault {status['version']}",
        f"database: {backend['db_path']} ({backend['node_count']} nodes)",
        f"vault:    {vault.get('path', 'not configured')}"
        + (f" ({vault['note_count']} notes synced)" if vault.get("configured") else ""),
        f"search:   {search['mode']}"
        + (f" (degraded: {search.get('reason')})" if search.get("degraded") else ""),
        f"profile:  {profile['name']}"
        + (f" + {', '.join(profile['modules'])}" if profile["modules"] else ""),
    ]
    if vault.get("configured"):  # what a person at a terminal asks first: is it in step? (review 22h)
        watching = "watching" if vault.get("watching") else "not watching (no server holds the vault)"
        lines.append(f"sync:     {watching}, {vault.get('pending', 0)} change(s) pending")
    outbox = vault.get("outbox") or {}
    if outbox.get("waiting"):
        lines.append(
            f"outbox:   {outbox['waiting']} write(s) waiting for the lease holder, oldest "
            f"{outbox.get('oldest_age_seconds', 0)} s"
            + (f" (last error: {outbox['error']})" if outbox.get("error") else "")
        )
    attention = vault.get("attention") or {}
    if attention.get("archive_held_back"):
        lines.append(f"archive:  held back: {attention['archive_hint']}")
    lines.extend(f"conflict: {c['path']}: {c['what_to_do']}" for c in attention.get("conflict_copies", []))
    lines.extend(f"not synced: {u['path']}: {u['why']}" for u in attention.get("not_synced", []))
    if attention.get("not_synced_total"):
        lines.append(
            f"not synced: {attention['not_synced_total']} note(s) in all (engrama_status lists them)"
        )
    if attention.get("not_downloaded"):
        lines.append(f"cloud:    {attention['not_downloaded']} note(s) not downloaded, left as they were")
    if "embedder" in status:
        e = status["embedder"]
        lines.append(f"embedder: {e.get('provider')} {e.get('model') or ''}".rstrip())
    return "\n".join(lines)
