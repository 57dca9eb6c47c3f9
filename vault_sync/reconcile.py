"""Reconcile notes on disk with the graph: one path, or the whole vault (DESIGN.md section 2).

The flow for one note: stat -> same size+mtime as recorded? nothing -> read bytes -> same checksum? nothing
(this is how our own writes are recognised) -> parse -> settle its engrama_id (insert one if missing; give a
copy a fresh one) -> upsert node, edges and passages -> record the checksum of the bytes now on disk.
File reading and parsing run in a worker thread in batches, so the event loop stays responsive.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vault_sync import identify
from vault_sync.checksum import sha256_hex
from vault_sync.chunking import chunk_body
from vault_sync.errors import VaultError
from vault_sync.model import FileState, ParsedNote
from vault_sync.parse import parse_note
from vault_sync.paths import classify, resolve_in_vault
from vault_sync.protocol import GraphPort
from vault_sync.report import ARCHIVED, CREATED, FAILED, IGNORED, UNCHANGED, UPDATED, NoteOutcome, SyncReport
from vault_sync.scan import scan_vault
from vault_sync.writer import edit_note

log = logging.getLogger(__name__)

BATCH = 64
Progress = Callable[[int, int], Awaitable[None] | None]


@dataclass(frozen=True)
class NoteRules:
    """What the active profile tells the parser: folder -> label map and label canonicalisation."""

    folder_labels: Mapping[str, str]
    canonical_label: Callable[[str], str | None]


@dataclass(frozen=True)
class _Read:
    """A note file read and parsed off the event loop."""

    path: str
    state: FileState | None = None  # size, mtime, checksum of the bytes read (node_id unset)
    data: bytes = b""
    note: ParsedNote | None = None
    error: str | None = None
    missing: bool = False


class VaultSync:
    """Keeps the graph in step with one vault. `writable=False` never touches files (a follower process)."""

    def __init__(self, root: Path, graph: GraphPort, rules: NoteRules, *, writable: bool = True) -> None:
        self.root = root
        self.graph = graph
        self.rules = rules
        self.writable = writable
        self._lock = asyncio.Lock()  # one reconcile at a time: the watcher and tools share this engine

    # --- public entry points -------------------------------------------------------------------------------

    async def sync_path(self, rel: str, *, dry_run: bool = False) -> NoteOutcome:
        """Reconcile one vault-relative path (created, changed, or gone)."""
        resolve_in_vault(self.root, rel)  # refuses paths that leave the vault
        async with self._lock:
            known = await self.graph.file_state(rel)
            if classify(rel) != "note":
                if known is not None:  # e.g. moved into .trash: the note is gone from where it was
                    return await self._archive(rel, dry_run)
                return NoteOutcome(rel, IGNORED)
            [read] = await asyncio.to_thread(self._read_batch, [rel], {rel: known} if known else {})
            return await self._settle(read, known, dry_run)

    async def sync_vault(
        self, folder: str | None = None, *, dry_run: bool = False, progress: Progress | None = None
    ) -> SyncReport:
        """Reconcile every note under `folder` (the whole vault by default); gone notes are archived."""
        if folder:
            resolve_in_vault(self.root, folder)
        report = SyncReport()
        async with self._lock:
            scan = await asyncio.to_thread(scan_vault, self.root, folder)
            known = await self.graph.file_states()
            for path, error in scan.errors:
                report.add(NoteOutcome(path, FAILED, error=error))
            entries = sorted(
                scan.entries, key=lambda e: (e.mtime_ns, e.rel_path)
            )  # older first: copies lose the id
            present = {e.rel_path for e in entries}
            report.scanned = len(entries)
            total = len(entries)
            for start in range(0, total, BATCH):
                batch = entries[start : start + BATCH]
                todo = [
                    e.rel_path for e in batch if not _same_stat(known.get(e.rel_path), e.size, e.mtime_ns)
                ]
                report.unchanged += len(batch) - len(todo)
                reads = await asyncio.to_thread(self._read_batch, todo, known) if todo else []
                for read in reads:
                    report.add(await self._settle(read, known.get(read.path), dry_run))
                await _report(progress, min(start + BATCH, total), total)
            for path in sorted(set(known) - present):
                if scan.covers(path):  # not under an unreadable folder, nor outside the scanned one
                    outcome = await self._archive(path, dry_run)
                    if outcome.action == ARCHIVED:
                        report.add(outcome)
        return report

    # --- steps ---------------------------------------------------------------------------------------------

    def _read_batch(self, paths: Sequence[str], known: Mapping[str, FileState]) -> list[_Read]:
        """Read, checksum and parse notes (runs in a worker thread)."""
        return [self._read_one(path, known.get(path)) for path in paths]

    def _read_one(self, rel: str, known: FileState | None) -> _Read:
        try:
            absolute = resolve_in_vault(self.root, rel)
            with open(absolute, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if known is not None and _same_stat(known, stat.st_size, stat.st_mtime_ns):
                    return _Read(rel, FileState(rel, stat.st_size, stat.st_mtime_ns, known.checksum, None))
                data = handle.read()
        except FileNotFoundError:
            return _Read(rel, missing=True)
        except IsADirectoryError:
            return _Read(rel, error="is a folder whose name ends in .md; rename it")
        except (OSError, VaultError) as exc:
            return _Read(rel, error=_describe(exc))
        state = FileState(rel, stat.st_size, stat.st_mtime_ns, sha256_hex(data), None)
        if known is not None and known.checksum == state.checksum:
            return _Read(rel, state)
        try:
            note = parse_note(
                rel, data, folder_labels=self.rules.folder_labels, canonical_label=self.rules.canonical_label
            )
        except VaultError as exc:
            return _Read(rel, state, error=_describe(exc))
        return _Read(rel, state, data, note)

    async def _settle(self, read: _Read, known: FileState | None, dry_run: bool) -> NoteOutcome:
        """Bring the graph in line with one read note."""
        if read.missing:
            return await self._archive(read.path, dry_run)
        if read.error is not None:
            log.warning("cannot sync %s: %s", read.path, read.error)
            return NoteOutcome(read.path, FAILED, error=read.error)
        assert read.state is not None
        if read.note is None:  # same bytes as recorded
            if known is not None and not dry_run and known.mtime_ns != read.state.mtime_ns:
                await self.graph.record_file_state(
                    FileState(**{**read.state.__dict__, "node_id": known.node_id})
                )
            return NoteOutcome(read.path, UNCHANGED, id=known.node_id if known else None)
        note, state, injected = read.note, read.state, False
        node_id = note.engrama_id
        if node_id is not None and await self._is_copy(node_id, read.path):
            node_id = None  # a copy of another note: it gets an id of its own
        if node_id is None:
            node_id = identify.new_engrama_id()
            if dry_run:
                return NoteOutcome(read.path, CREATED, id=None, inject_id=True)
            if not self.writable:
                return NoteOutcome(
                    read.path, FAILED, error="waiting for the process that holds the vault lease"
                )
            try:
                note, state = await self._write_id(read, node_id)
            except VaultError as exc:
                return NoteOutcome(read.path, FAILED, error=_describe(exc))
            injected = True
        existing = await self.graph.node_by_id(node_id)
        moved_from = existing.path if existing and existing.path and existing.path != read.path else None
        if dry_run:
            action = CREATED if existing is None or existing.status == "stub" else UPDATED
            return NoteOutcome(read.path, action, id=node_id, moved_from=moved_from)
        created = await self.graph.apply_note(note, node_id, chunk_body(note.body), state)
        return NoteOutcome(
            read.path, CREATED if created else UPDATED, id=node_id, inject_id=injected, moved_from=moved_from
        )

    async def _is_copy(self, node_id: str, rel: str) -> bool:
        """True when `node_id` already belongs to another note file that still exists with that id."""
        existing = await self.graph.node_by_id(node_id)
        if existing is None or existing.path is None or existing.path == rel or existing.status != "active":
            return False
        other = await self.graph.file_state(existing.path)
        if other is None:
            return False
        try:
            data = await asyncio.to_thread(resolve_in_vault(self.root, existing.path).read_bytes)
        except OSError:
            return False  # the other file is gone: this is a move, not a copy
        return sha256_hex(data) == other.checksum or identify.read_id(data) == node_id

    async def _write_id(self, read: _Read, node_id: str) -> tuple[ParsedNote, FileState]:
        """Insert (or, for a copy, replace) the engrama_id line; return the note as now on disk."""
        produced: dict[str, bytes] = {}

        def edit(data: bytes) -> bytes:
            produced["data"] = identify.set_id(data, node_id)
            return produced["data"]

        assert read.state is not None
        result = await asyncio.to_thread(
            edit_note, self.root, read.path, edit, expected_checksum=read.state.checksum
        )
        data = produced["data"]
        note = parse_note(
            read.path,
            data,
            folder_labels=self.rules.folder_labels,
            canonical_label=self.rules.canonical_label,
        )
        return note, result.state

    async def _archive(self, rel: str, dry_run: bool) -> NoteOutcome:
        known = await self.graph.file_state(rel)
        if dry_run:
            return NoteOutcome(rel, ARCHIVED if known else UNCHANGED, id=known.node_id if known else None)
        node_id = await self.graph.archive_path(rel)
        return NoteOutcome(rel, ARCHIVED if node_id else UNCHANGED, id=node_id)


def _same_stat(known: FileState | None, size: int, mtime_ns: int) -> bool:
    return known is not None and known.size == size and known.mtime_ns == mtime_ns


def _describe(exc: BaseException) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied; allow this user to read the file"
    return str(exc) or type(exc).__name__


async def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is None:
        return
    result = progress(done, total)
    if result is not None:
        await result
