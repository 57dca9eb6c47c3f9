"""`engrama-vault brief`: the session brief on stdout, for clients' session-start hooks and for scripts.

Claude Code, for one, runs a command when a session starts and adds what it prints to the conversation:
`engrama-vault brief --vault PATH --client claude-code` there gives the assistant the brief before the first
message. Before reading, it catches the graph up with notes changed while no server was running (reading
them only: it never writes into a note); `--no-sync` skips that.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from server.commands.common import CommandError, add_common_options, settings_from
from server.runtime import open_runtime
from server.services.brief import DEFAULT_BUDGET, Brief, record_brief, render_brief
from vault_sync.reconcile import WAITING_FOR_HOLDER

log = logging.getLogger(__name__)
MIN_BUDGET, MAX_BUDGET = 200, 20_000


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "brief",
        help="print the session brief: what changed, active work, what waits for a decision",
        description="Print the session brief as Markdown: what changed in the vault since this client's "
        "previous brief, active projects and their open problems, decisions and insights waiting, and the "
        "notes related to --cues. Each client (--client) has its own 'since'.",
    )
    add_common_options(parser)
    parser.add_argument("--cues", metavar="TEXT", help="what you are about to do, to find related notes")
    parser.add_argument("--project", metavar="NAME", help="a project (or any entity) to focus on")
    parser.add_argument(
        "--budget",
        metavar="N",
        type=int,
        default=DEFAULT_BUDGET,
        help=f"token budget (default {DEFAULT_BUDGET})",
    )
    parser.add_argument(
        "--client", metavar="NAME", default="cli", help="whose 'since' to use and move (default: cli)"
    )
    parser.add_argument("--json", action="store_true", help="print the brief as JSON (sections and items)")
    parser.add_argument(
        "--no-sync", action="store_true", help="do not catch up with notes changed while no server ran"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not MIN_BUDGET <= args.budget <= MAX_BUDGET:
        raise CommandError(
            f"--budget must be between {MIN_BUDGET} and {MAX_BUDGET} tokens, not {args.budget}"
        )
    settings = settings_from(args, watch=False)

    async def go() -> Brief:
        unnamed: list[str] = []  # new notes: only a process that may write the vault gives them their id
        async with open_runtime(settings, writable=False) as rt:
            if rt.sync is not None and not args.no_sync:
                report = await rt.sync.sync_vault()
                unnamed = sorted(e.path for e in report.errors if e.error == WAITING_FOR_HOLDER)
                if report.errors:
                    log.info(
                        "%d note(s) not brought up to date; `engrama-vault sync` names them",
                        len(report.errors),
                    )
            brief = await render_brief(
                rt,
                client=args.client.strip() or None,
                cues=args.cues,
                project=args.project,
                budget_tokens=args.budget,
            )
            text = (
                json.dumps({**brief.to_json(), "not_indexed": unnamed}, ensure_ascii=False, indent=2) + "\n"
                if args.json
                else brief.markdown + _not_indexed(unnamed)
            )
            sys.stdout.write(text)
            sys.stdout.flush()
            await record_brief(rt, brief)  # only once it was printed
            return brief

    asyncio.run(go())
    return 0


def _not_indexed(paths: list[str]) -> str:
    """The line saying which new notes this brief could not include (it never writes into a note, so it cannot
    give them their `engrama_id`), so the assistant does not take the brief for the whole vault."""
    if not paths:
        return ""
    shown = ", ".join(f"`{p}`" for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return (
        f"\nNot in this brief: {len(paths)} new note(s) written while no engrama server ran ({shown}); a "
        "running server or `engrama-vault sync` takes them in.\n"
    )
