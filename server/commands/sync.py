"""`engrama-vault sync`: reconcile the whole vault with the graph once (what the watcher does continuously)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from server.commands.common import add_common_options, settings_from
from server.runtime import open_runtime
from server.store import outbox_sql
from server.store.outbox_sql import OutboxSummary
from vault_sync.attention import conflict_advice
from vault_sync.report import SyncReport


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "sync",
        help="reconcile every note of the vault with the graph",
        description="Reconcile every note of the vault with the graph: new notes get an engrama_id line, changed "
        "notes update their node, deleted notes are archived. A pass that finds a large share of the vault "
        "gone at once archives nothing until you confirm with --confirm-archive (the vault may be only partly "
        "there: an unplugged drive, a share not mounted). Exits 1 when some notes could not be synced or "
        "archiving was held back.",
    )
    add_common_options(parser)
    parser.add_argument("--folder", metavar="FOLDER", help="only this vault-relative folder")
    parser.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    parser.add_argument("--json", action="store_true", help="print the sync report as JSON on stdout")
    parser.add_argument(
        "--confirm-archive",
        action="store_true",
        help="archive the missing notes even when a large share of the vault is missing at once",
    )
    parser.set_defaults(handler=run)


class _Bar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.enabled and total:
            filled = int(30 * done / total)
            sys.stderr.write(f"\rsyncing [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args, watch=False)
    bar = _Bar()

    async def go() -> tuple[SyncReport, OutboxSummary]:
        async with open_runtime(settings, take_lease=not args.dry_run) as rt:
            sync = rt.require_sync()
            report = await sync.sync_vault(
                args.folder, dry_run=args.dry_run, progress=bar, confirm_archive=args.confirm_archive
            )
            waiting = OutboxSummary(0)
            if sync.writable and not args.dry_run:  # no watcher will come back for notes just changed
                await sync.settle_deferred(report, timeout=sync.settle + 5.0)
                # Writes other clients queued were applied when the lease was taken; one that waited for a note
                # the pass has just read again (its YAML fixed) is tried once more, and what still waits is said
                # (review 22a: the command said all was well while a queued write could not be applied).
                from server.services.outbox import drain  # here: the outbox's services build on the runtime

                await drain(rt)
                waiting = await rt.store.read(outbox_sql.summary)
            return report, waiting

    started = time.perf_counter()
    report, waiting = asyncio.run(go())
    bar.close()
    if args.json:
        print(json.dumps({**report.as_dict(), "queued_writes_waiting": _waiting(waiting)}, indent=2))
    else:
        print(_summary(report, time.perf_counter() - started, args.dry_run, waiting))
    return 1 if report.errors or report.archive_held_back or waiting.waiting else 0


def _waiting(waiting: OutboxSummary) -> dict[str, object] | None:
    if not waiting.waiting:
        return None
    return {"count": waiting.waiting, "oldest_queued_at": waiting.oldest_queued_at, "error": waiting.error}


def _summary(report: SyncReport, seconds: float, dry_run: bool, waiting: OutboxSummary | None = None) -> str:
    head = "dry run: would sync" if dry_run else "synced"
    lines = [
        f"{head} {report.scanned} notes in {seconds:.1f}s: {report.created} created, {report.updated} updated, "
        f"{report.unchanged} unchanged, {report.archived} archived, {report.moved} moved, "
        f"{len(report.ids_injected)} ids {'to insert' if dry_run else 'inserted'}, {len(report.errors)} failed"
    ]
    lines.extend(f"  failed: {e.path}: {e.error}" for e in report.errors)
    lines.extend(f"  indexed without an id line: {e.path}: {e.error}" for e in report.ids_not_written)
    if report.ids_owed and not dry_run:  # still being edited when the sync gave up waiting (review 23i)
        shown = ", ".join(report.ids_owed[:5]) + (", ..." if len(report.ids_owed) > 5 else "")
        lines.append(
            f"  id line not written yet: {len(report.ids_owed)} note(s) were still being edited ({shown}); "
            "they are in the graph, and the next sync or a running server writes the line once they are left alone"
        )
    if report.archive_held_back:
        lines.append(f"  archive held back: {report.archive_hint}")
    lines.extend(f"  conflict copy: {c.path}: {conflict_advice(c)}" for c in report.conflict_copies)
    if report.not_downloaded:
        shown = ", ".join(report.not_downloaded[:5]) + (", ..." if len(report.not_downloaded) > 5 else "")
        lines.append(
            f"  not downloaded: {len(report.not_downloaded)} note(s) are only cloud placeholders and were left "
            f"as they were ({shown}); download them to sync them"
        )
    if waiting is not None and waiting.waiting:
        why = f" (the oldest: {waiting.error})" if waiting.error else ""
        lines.append(
            f"  queued writes still waiting: {waiting.waiting}{why}; they are written by the next server or "
            "sync that can (engrama_status shows them)"
        )
    return "\n".join(lines)
