"""`engrama-vault reflect`: look for patterns across the graph and print the pending insights."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict
from typing import Any

from server.commands.common import CommandError, add_common_options, settings_from
from server.reflect.patterns import select_patterns
from server.reflect.service import (
    PATTERN_NAMES,
    InsightView,
    ReflectError,
    ReflectResult,
    reflect,
    surface_insights,
)
from server.reflect.wording import count
from server.runtime import open_runtime

MAX_LISTED = 1000  # every pending insight, in practice


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "reflect",
        help="find patterns across the graph and list the pending insights",
        description="Sync the vault, run the reflect patterns over the graph and print the pending insights "
        "(approve or dismiss them from your assistant's chat). Decisions already taken are kept.",
    )
    add_common_options(parser)
    parser.add_argument(
        "--pattern",
        dest="patterns",
        metavar="NAME",
        action="append",
        help=f"run only this pattern (repeatable): {', '.join(PATTERN_NAMES)}",
    )
    parser.add_argument(
        "--no-sync", action="store_true", help="reflect on the graph as it is; do not sync first"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the result and the pending insights as JSON"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        select_patterns(args.patterns)  # a name mistyped is said before the vault is synced (review 23i)
    except ReflectError as exc:
        raise CommandError(str(exc)) from exc
    settings = settings_from(args, watch=False)

    async def go() -> tuple[ReflectResult, list[InsightView]]:
        async with open_runtime(settings, take_lease=True) as rt:
            if rt.sync is not None and not args.no_sync:
                await rt.sync.sync_vault()  # the graph derives from the vault: reflect on what is there now
            result = await reflect(rt, args.patterns)
            return result, await surface_insights(rt, limit=MAX_LISTED)

    try:
        result, pending = asyncio.run(go())
    except ReflectError as exc:
        raise CommandError(str(exc)) from exc
    if args.json:
        print(json.dumps(_as_json(result, pending), indent=2, ensure_ascii=False))
    else:
        print(_human(result, pending))
    return 0


def _as_json(result: ReflectResult, pending: list[InsightView]) -> dict[str, Any]:
    return {
        "created": result.created,
        "skipped_patterns": result.skipped_patterns,
        "pending": [asdict(view) for view in pending],
    }


def _human(result: ReflectResult, pending: list[InsightView]) -> str:
    lines = [f"reflect: {count(result.created, 'new insight')}, {len(pending)} pending"]
    if result.skipped_patterns:
        lines.append(f"skipped (the graph lacks what they need): {', '.join(result.skipped_patterns)}")
    for view in pending:
        lines.append(f"\n[{view.id}] {view.title}  (confidence {view.confidence:.2f}, {view.pattern})")
        lines.append(f"  {view.body}")
    return "\n".join(lines)
