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
from dataclasses import dataclass, replace
from pathlib import Path

from vault_sync import identify
from vault_sync.checksum import sha256_hex
from vault_sync.chunking import chunk_body
from vault_sync.errors import VaultError
from vault_sync.model import Chunk, FileState, NodeRef, NoteUpdate, ParsedNote
from vault_sync.parse import parse_note
from vault_sync.paths import classify, resolve_in_vault
from vault_sync.protocol import GraphPort
from vault_sync.report import ARCHIVED, CREATED, FAILED, IGNORED, UNCHANGED, UPDATED, NoteOutcome, SyncReport
from vault_sync.scan import scan_vault
from vault_sync.writer import MAX_NOTE_BYTES, edit_note

log = logging.getLogger(__name__)

BATCH = 256  # notes per transaction: fewer commits and FTS flushes (measured: 64 -> 256 is ~12% faster)
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
    chunks: tuple[Chunk, ...] = ()
    injected: bool = False  # the engrama_id line was inserted by this read


@dataclass(frozen=True)
class _Apply:
    """A note ready to be applied, with what to report once it is."""

    update: NoteUpdate
    injected: bool
    moved_from: str | None

    def outcome(self, created: bool) -> NoteOutcome:
        return NoteOutcome(
            self.update.state.path,
            CREATED if created else UPDATED,
            id=self.update.node_id,
            inject_id=self.injected,
            moved_from=self.moved_from,
        )


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
            reads = await asyncio.to_thread(self._read_batch, [rel], {rel: known} if known else {}, dry_run)
            [outcome] = await self._settle_batch(reads, {rel: known} if known else {}, dry_run)
            return outcome

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
                scan.notes, key=lambda e: (e.mtime_ns, e.rel_path)
            )  # older first: copies lose the id
            report.scanned = len(entries)
            todo = [e.rel_path for e in entries if not _same_stat(known.get(e.rel_path), e.size, e.mtime_ns)]
            report.unchanged += len(entries) - len(todo)
            batches = [todo[i : i + BATCH] for i in range(0, len(todo), BATCH)]
            # Pipeline: the next batch is read and parsed in a thread while this one is applied.
            pending = (
                asyncio.create_task(asyncio.to_thread(self._read_batch, batches[0], known, dry_run))
                if batches
                else None
            )
            for index in range(len(batches)):
                assert pending is not None
                reads = await pending
                if index + 1 < len(batches):
                    pending = asyncio.create_task(
                        asyncio.to_thread(self._read_batch, batches[index + 1], known, dry_run)
                    )
                for outcome in await self._settle_batch(reads, known, dry_run):
                    report.add(outcome)
                await _report(
                    progress, report.unchanged + sum(len(b) for b in batches[: index + 1]), len(entries)
                )
            present = {e.rel_path for e in entries}
            for path in sorted(set(known) - present):
                if scan.covers(path):  # not under an unreadable folder, nor outside the scanned one
                    outcome = await self._archive(path, dry_run)
                    if outcome.action == ARCHIVED:
                        report.add(outcome)
        return report

    # --- steps ---------------------------------------------------------------------------------------------

    def _read_batch(self, paths: Sequence[str], known: Mapping[str, FileState], dry_run: bool) -> list[_Read]:
        """Read, checksum, parse and chunk notes, and give id-less notes their id (runs in a worker thread).

        Inserting ids here, rather than on the event loop, lets it overlap with the database applying the
        previous batch. A note without an id never needs the graph to decide: it always gets a fresh one."""
        reads = [self._read_one(path, known.get(path)) for path in paths]
        if self.writable and not dry_run:
            reads = [
                self._identify(read) if read.note and read.note.engrama_id is None else read for read in reads
            ]
        return reads

    def _identify(self, read: _Read) -> _Read:
        try:
            note, state, chunks = self._write_id(read, identify.new_engrama_id())
        except (OSError, VaultError) as exc:
            return replace(read, note=None, error=_describe(exc))
        return replace(read, note=note, state=state, chunks=chunks, injected=True)

    def _read_one(self, rel: str, known: FileState | None) -> _Read:
        try:
            absolute = resolve_in_vault(self.root, rel)
            with open(absolute, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if known is not None and _same_stat(known, stat.st_size, stat.st_mtime_ns):
                    return _Read(rel, FileState(rel, stat.st_size, stat.st_mtime_ns, known.checksum, None))
                if stat.st_size > MAX_NOTE_BYTES:
                    return _Read(
                        rel,
                        error=f"note is {stat.st_size // 2**20} MiB, over the "
                        f"{MAX_NOTE_BYTES // 2**20} MiB limit; split it into smaller notes",
                    )
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
            note = self._parse(rel, data)
        except VaultError as exc:
            return _Read(rel, state, error=_describe(exc))
        return _Read(rel, state, data, note, chunks=tuple(chunk_body(note.body)))

    def _parse(self, rel: str, data: bytes) -> ParsedNote:
        return parse_note(
            rel, data, folder_labels=self.rules.folder_labels, canonical_label=self.rules.canonical_label
        )

    async def _settle_batch(
        self, reads: Sequence[_Read], known: Mapping[str, FileState], dry_run: bool
    ) -> list[NoteOutcome]:
        """Settle ids for a batch of read notes, then apply them to the graph in one transaction."""
        outcomes: list[NoteOutcome | _Apply] = []
        claimed: set[str] = set()  # ids taken by earlier notes of this batch (a copy inside one batch)
        # One lookup for the whole batch: a round trip per note would cost more than applying the note.
        refs = await self.graph.nodes_by_ids(
            [r.note.engrama_id for r in reads if r.note and r.note.engrama_id]
        )
        for read in reads:
            outcomes.append(await self._prepare(read, known.get(read.path), dry_run, claimed, refs))
        applies = [o for o in outcomes if isinstance(o, _Apply)]
        created = await self.graph.apply_notes([a.update for a in applies]) if applies else []
        flags = dict(zip((id(a) for a in applies), created, strict=True))
        return [o if isinstance(o, NoteOutcome) else o.outcome(flags[id(o)]) for o in outcomes]

    async def _prepare(
        self,
        read: _Read,
        known: FileState | None,
        dry_run: bool,
        claimed: set[str],
        refs: Mapping[str, NodeRef],
    ) -> NoteOutcome | _Apply:
        """Decide what one read note means; returns a final outcome or the update to apply."""
        if read.missing:
            return await self._archive(read.path, dry_run)
        if read.error is not None:
            log.warning("cannot sync %s: %s", read.path, read.error)
            return NoteOutcome(read.path, FAILED, error=read.error)
        assert read.state is not None
        if read.note is None:  # same bytes as recorded
            if known is not None and not dry_run and known.mtime_ns != read.state.mtime_ns:
                await self.graph.record_file_state(replace(read.state, node_id=known.node_id))
            return NoteOutcome(read.path, UNCHANGED, id=known.node_id if known else None)
        note, state, chunks, injected = read.note, read.state, read.chunks, read.injected
        node_id = note.engrama_id
        if (
            not injected
            and node_id is not None
            and (node_id in claimed or await self._is_copy(refs.get(node_id), read.path))
        ):
            node_id = None  # a copy of another note: it gets an id of its own
        if node_id is None:
            if dry_run:
                return NoteOutcome(read.path, CREATED, inject_id=True)
            if not self.writable:
                return NoteOutcome(
                    read.path, FAILED, error="waiting for the process that holds the vault lease"
                )
            try:
                note, state, chunks = await asyncio.to_thread(self._write_id, read, identify.new_engrama_id())
            except (OSError, VaultError) as exc:
                return NoteOutcome(read.path, FAILED, error=_describe(exc))
            node_id, injected = note.engrama_id, True
            assert node_id is not None
        claimed.add(node_id)
        existing = refs.get(node_id)  # None for an id given just now
        moved_from = existing.path if existing and existing.path and existing.path != read.path else None
        if dry_run:
            action = CREATED if existing is None or existing.status == "stub" else UPDATED
            return NoteOutcome(read.path, action, id=node_id, moved_from=moved_from)
        update = NoteUpdate(note, node_id, chunks, replace(state, node_id=node_id))
        return _Apply(update, injected, moved_from)

    async def _is_copy(self, existing: NodeRef | None, rel: str) -> bool:
        """True when the node of this id belongs to another note file that still exists with that id."""
        if existing is None or existing.path is None or existing.path == rel or existing.status != "active":
            return False
        try:
            data = await asyncio.to_thread(resolve_in_vault(self.root, existing.path).read_bytes)
        except (OSError, VaultError):
            return False  # the other file is gone: this is a move, not a copy
        return identify.read_id(data) == existing.id

    def _write_id(self, read: _Read, node_id: str) -> tuple[ParsedNote, FileState, tuple[Chunk, ...]]:
        """Insert (or, for a copy, replace) the engrama_id line; return the note as now on disk."""
        produced: dict[str, bytes] = {}

        # A note read without an id only needs the line inserted; a copy has its id line rewritten.
        give_id = (
            identify.insert_id if read.note is not None and read.note.engrama_id is None else identify.set_id
        )

        def edit(data: bytes) -> bytes:
            produced["data"] = give_id(data, node_id)
            return produced["data"]

        assert read.state is not None and read.note is not None
        result = edit_note(self.root, read.path, edit, expected_checksum=read.state.checksum)
        state = replace(result.state, path=read.path)
        if result.before_checksum == read.state.checksum:
            # The edit was based on the bytes we parsed, and it only inserts the id line (verified by set_id).
            return replace(read.note, engrama_id=node_id, has_frontmatter=True), state, read.chunks
        note = self._parse(read.path, produced["data"])  # re-based on newer content: parse what we wrote
        return note, state, tuple(chunk_body(note.body))

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
