"""`engrama-vault decay`: let the confidence of what has not been updated for a while fade.

Only the graph changes (no note is written), so it needs neither the vault's lease nor a sync first and runs
safely beside a server. Each run recomputes from the confidence at the last update, so running it daily (from
cron, say) never compounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict
from datetime import UTC, datetime

from server.commands.common import CommandError, add_common_options, settings_from
from server.runtime import NoVaultConfigured, open_runtime
from server.settings import Settings
from server.store.decay_sql import DecayReport, decay


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "decay",
        help="fade the confidence of nodes and relations by the time since their last update",
        description="Set each active node's and open relation's confidence to its confidence at the last update "
        "x exp(-rate x days since), with the per-label rate of the profile. Only the graph changes; editing a note "
        "restores its confidence. Safe to run daily: it never compounds.",
    )
    add_common_options(parser)
    parser.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    parser.add_argument("--json", action="store_true", help="print the decay report as JSON on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args, watch=False)
    _require_graph(settings)

    async def go() -> DecayReport:
        # Not writable and no lease: decay writes no note, and SQLite lets a running server share the file.
        async with open_runtime(settings, writable=False) as rt:
            unit = rt.store.read if args.dry_run else rt.store.write
            return await unit(decay, rt.profile.decay_rate_for, datetime.now(UTC), args.dry_run)

    report = asyncio.run(go())
    if args.json:
        print(json.dumps(asdict(report), indent=2, ensure_ascii=False))
    else:
        print(_human(report))
    return 0


def _require_graph(settings: Settings) -> None:
    # The vault's recorded profile holds the per-label rates, so a run without it would use the wrong ones.
    if settings.vault is None:
        raise NoVaultConfigured()
    if not settings.db_path.exists():
        raise CommandError(
            f"no graph database at {settings.db_path}; run `engrama-vault sync --vault {settings.vault}` first"
        )


def _human(report: DecayReport) -> str:
    verb = "would decay" if report.dry_run else "decayed"
    line = (
        f"{verb} {report.nodes_changed:,} of {report.nodes:,} nodes and "
        f"{report.edges_changed:,} of {report.edges:,} relations"
    )
    if report.lowest:
        line += "; lowest: " + ", ".join(f"{n.name} ({n.label}) {n.confidence:.2f}" for n in report.lowest)
    return line + (" (dry run: nothing written)" if report.dry_run else "")
