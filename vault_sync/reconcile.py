"""Reconcile notes on disk with the graph: one path, or the whole vault (DESIGN.md section 2).

The flow for one note: stat -> same size+mtime as recorded? nothing -> read bytes -> same checksum? nothing
(this is how our own writes are recognised) -> parse -> settle its engrama_id (insert one if missing; give a
copy a fresh one) -> upsert node, edges and passages -> record the checksum of the bytes now on disk.
File reading and parsing run off the event loop in batches (`readers.py`): in a worker thread, or for a big
sync in a worker process (`reader_process.py`), pipelined with the database applying the previous batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from vault_sync import identify, templates
from vault_sync.attention import load_attention, save_attention
from vault_sync.errors import IdLineRefused, NoteInConflict, NoteReadOnly, NoteUnwritable, VaultError
from vault_sync.model import FileState, NodeRef, NoteUpdate
from vault_sync.paths import (
    classify,
    conflict_original,
    links_to_note,
    resolve_in_vault,
    spelled_as_listed,
    vault_folder,
    vault_path,
)
from vault_sync.protocol import GraphPort
from vault_sync.reader_process import ReaderProcess, ReaderStopped, pickled_rules
from vault_sync.readers import OWED_ID, NoteRead, NoteReader, NoteRules, derived_id, describe, same_stat
from vault_sync.report import (
    ARCHIVED,
    CREATED,
    FAILED,
    IGNORED,
    UNCHANGED,
    UPDATED,
    WAITING_FOR_HOLDER,
    ConflictCopy,
    NoteOutcome,
    SyncReport,
)
from vault_sync.scan import presence, scan_vault, vault_is_empty
from vault_sync.writer import KEEP_EXTRA, KEEP_TIMES, NoteBusy, Quiet, edit_note_aside, kept_edit, kept_paths

__all__ = ["BATCH", "PROCESS_THRESHOLD", "NoteRules", "Progress", "VaultSync"]

log = logging.getLogger(__name__)

BATCH = 256  # notes per transaction: fewer commits and FTS flushes (measured: 64 -> 256 is ~12% faster)
# Notes to read above which a sync reads them in worker processes (`reader_process.py`): starting them costs
# ~0.3 s, paid back after a few hundred notes (reading a note and inserting its id costs ~2 ms of CPU, which
# then no longer shares the GIL with the database). Below it, as for the watcher's single paths, a thread reads.
PROCESS_THRESHOLD = 500
# Seconds a note must have been quiet (no change on disk) before engrama writes an id line into it. Obsidian
# saves about 2 s after the last keystroke and editors saving in place leave the file empty for a moment
# (0.4 s was seen); 3 s is longer than both, so the id is never written into a note that is being saved or
# typed into, and it still arrives within seconds of the person pausing. Tests lower it (tests/conftest.py).
DEFAULT_SETTLE = 3.0
DEFER_MARGIN = 0.05  # look again a moment after the quiet window ends, so the file is sure to be past it
# One pass that would archive at least this share of the notes the graph knows, and at least this many notes,
# archives nothing until confirmed (`confirm_archive`). People delete a few notes at a time, and while a server
# runs the watcher archives each as it goes; a pass finding a quarter of the vault gone at once is far more
# often a view of the vault the scan could not tell was partial (the empty mount point of an unmounted share,
# a cloud client still downloading or evicting the vault, a sync tool half-way through a big change) than a
# clean-up. Below 20 notes a wrong archive is small and undone when the notes come back (they revive by id),
# so a small vault's ordinary deletes go through without asking.
HOLD_BACK_SHARE = 0.25
HOLD_BACK_MIN = 20
Progress = Callable[[int, int], Awaitable[None] | None]
ReadBatch = Callable[[Sequence[str], Mapping[str, FileState], bool], Awaitable[list[NoteRead]]]


@dataclass(frozen=True)
class _Apply:
    """A note ready to be applied, with what to report once it is."""

    update: NoteUpdate
    injected: bool
    moved_from: str | None
    owed: bool = False  # indexed, but its id line waits until the note is quiet
    not_written: str | None = None  # indexed, but its id line cannot be written: why

    def outcome(self, created: bool) -> NoteOutcome:
        return NoteOutcome(
            self.update.state.path,
            CREATED if created else UPDATED,
            id=self.update.node_id,
            inject_id=self.injected,
            moved_from=self.moved_from,
            id_owed=self.owed,
            id_not_written=self.not_written,
        )


class _Postponed:
    """`_prepare`'s answer for a note that would take over the node of its path (it holds no id, or one the
    graph has never seen), or, outside a walk of the whole vault, that carries a note's id but is another file
    than the one the graph read (`_perhaps_a_copy`): decided after every other note of the sync, once the notes
    that carry ids have moved where they went (see `_sync_batches`)."""


_POSTPONED = _Postponed()
# The paths of the notes postponed by `_prepare` (`_POSTPONED`), in the order met, each once (a dict as ordered set).
Later = dict[str, None]


def _perhaps_a_copy(existing: NodeRef | None, rel: str, ino: int | None) -> bool:
    """Whether the file at `rel`, carrying the id of `existing` whose note was elsewhere, may be a copy of that
    note rather than the note itself moved: it is another file (inode) than the one the graph last read there.
    When the note was copied and the original renamed, the renamed original (the same file) keeps the id and
    the copy gets its own, in whichever order the two are met: a walk of the whole vault knows where each inode
    is (`_original_elsewhere`); other syncs decide such a note after the others (`_sync_batches`). Unknown
    inodes (a database from before they were recorded) decide at once, as before."""
    return (
        existing is not None
        and existing.path not in (None, rel)
        and existing.ino is not None
        and ino is not None
        and ino != existing.ino
    )


def _path_owner(
    known: FileState | None, refs: Mapping[str, NodeRef], claimed: set[str], rel: str
) -> str | None:
    """The id of the node whose note lives at `rel` (as the graph last saw it), if no other note took it."""
    if known is None or known.node_id is None or known.node_id in claimed:
        return None
    ref = refs.get(known.node_id)
    return known.node_id if ref is not None and ref.path == rel else None


class VaultSync:
    """Keeps the graph in step with one vault. `writable=False` never touches files (a follower process).

    A sync with more than `process_threshold` notes to read reads them in a worker process."""

    def __init__(
        self,
        root: Path,
        graph: GraphPort,
        rules: NoteRules,
        *,
        writable: bool = True,
        process_threshold: int = PROCESS_THRESHOLD,
        settle: float | None = None,
    ) -> None:
        self.root = root
        self.graph = graph
        self.rules = rules
        self.process_threshold = process_threshold
        self.settle = DEFAULT_SETTLE if settle is None else settle
        self.reader = NoteReader(root, rules, writable, self.settle)
        # Notes indexed but still owed their id line (blank, or changed a moment ago), with when to look again
        # (time.monotonic()). `on_defer` (the live reconciler) is told, so it comes back to each one.
        self.deferred: dict[str, float] = {}
        self.on_defer: Callable[[str, float], None] | None = None
        self._lock = asyncio.Lock()  # one reconcile at a time: the watcher and tools share this engine
        # During a walk of the whole vault (`sync_vault`, under the lock): inode -> path of each note found.
        self._pass_inodes: Mapping[int, str] | None = None
        # Paths whose note would take over its path's node: when that was first seen, and the checksum then
        # (`_takeover_wait`).
        self._takeovers: dict[str, tuple[float, str]] = {}
        self._again: set[asyncio.Task[None]] = set()  # tool writes being made again (`write_again_later`)

    @property
    def writable(self) -> bool:
        """False in a process that does not hold the vault lease: then no file is ever written."""
        return self.reader.writable

    @writable.setter
    def writable(self, value: bool) -> None:
        self.reader = replace(self.reader, writable=value)

    # --- public entry points -------------------------------------------------------------------------------

    async def settle_later(self, later: Later) -> SyncReport:
        """Decide the notes that syncs given `later` postponed (the watcher's events of one moment: a renamed
        note in a new folder and a new note under its old name reach it as separate syncs), once every note
        carrying an id has found its node (see `_sync_batches`). They are read again now: what is decided is
        the note as it is, and nothing but their paths was kept meanwhile."""
        report = SyncReport()
        paths = list(later)
        later.clear()
        if paths:
            async with self._lock:
                await self._decide_later(paths, report, dry_run=False)
        return report

    async def _decide_later(self, paths: Sequence[str], report: SyncReport, *, dry_run: bool) -> None:
        known = await self.graph.file_states(paths)
        for start in range(0, len(paths), BATCH):
            part = paths[start : start + BATCH]
            reads = await self._read_in_thread(part, known, dry_run, by_content=True)
            for outcome in await self._settle_batch(reads, known, dry_run):
                report.add(outcome)

    async def sync_path(self, rel: str, *, dry_run: bool = False, later: Later | None = None) -> NoteOutcome:
        """Reconcile one vault-relative path (created, changed, or gone). With `later`, a note that would take
        over its path's node (or may be a copy) is put there for `settle_later`, and the outcome says
        "unchanged" for now."""
        rel = vault_path(self.root, rel)  # refuses paths that leave the vault; "P\\N.md" is "P/N.md"
        async with self._lock:
            known = await self.graph.file_state(rel)
            if rel not in await asyncio.to_thread(self._own_notes, [rel]):
                if known is not None:  # e.g. moved into .trash: the note is gone from where it was
                    return await self._archive(rel, dry_run)
                return NoteOutcome(rel, IGNORED)
            reads = await self._read_in_thread([rel], {rel: known} if known else {}, dry_run, by_content=True)
            outcomes = await self._settle_batch(
                reads, {rel: known} if known else {}, dry_run, None if dry_run else later
            )
            outcome = (
                outcomes[0] if outcomes else NoteOutcome(rel, UNCHANGED, id=known.node_id if known else None)
            )
            if not dry_run:
                await self._keep_unsynced([(rel, outcome.error if outcome.action == FAILED else None)])
            return outcome

    async def sync_paths(self, rels: Sequence[str], *, later: Later | None = None) -> SyncReport:
        """Reconcile many note paths at once, read and applied in batches like a full pass (the watcher's
        bursts: many notes changed together, or many notes owed their id line settling at the same moment).

        Together, not one by one, so that a note renamed while a new one took its old name keeps its identity
        (`_sync_batches`). A path that is no note of its own (a symlink to another note of the vault) is
        treated as `sync_path` treats it."""
        report = SyncReport()
        async with self._lock:
            wanted = list(dict.fromkeys(rels))
            known = await self.graph.file_states(wanted)
            own = await asyncio.to_thread(self._own_notes, wanted)
            todo = [rel for rel in wanted if rel in own]
            for rel in wanted:
                if rel not in own and rel in known:
                    report.add(await self._archive(rel, False))
            read = functools.partial(self._read_in_thread, by_content=True)  # each path has a reason
            await self._sync_batches(todo, known, False, read, report, None, len(todo), later)
            failed = {e.path: e.error for e in report.errors}
            await self._keep_unsynced([(rel, failed.get(rel)) for rel in wanted])
        return report

    async def _keep_unsynced(self, outcomes: Sequence[tuple[str, str | None]]) -> None:
        """Keep the list of notes that cannot be synced (`attention`, shown by `engrama_status`) current as
        notes are reconciled one by one: (path, why it failed, or None)."""
        before = await load_attention(self.graph)
        if before.unsynced or any(why is not None for _, why in outcomes):
            await save_attention(self.graph, before, before.with_outcomes(outcomes))

    def _own_notes(self, rels: Sequence[str]) -> set[str]:
        rules = templates.rules(self.root)
        return {rel for rel in rels if self._note_of_its_own(rel, rules)}

    def _note_of_its_own(self, rel: str, rules: templates.Templates) -> bool:
        """Whether `rel` names a note of its own (not a link to another note of the vault, nor a non-note, nor
        one of the person's templates: vault_sync.templates)."""
        return (
            classify(rel) == "note" and not rules.holds(rel) and not links_to_note(self.root, self.root / rel)
        )

    async def sync_vault(
        self,
        folder: str | None = None,
        *,
        dry_run: bool = False,
        progress: Progress | None = None,
        confirm_archive: bool = False,
        reported: Container[str] = (),
        later: Later | None = None,
    ) -> SyncReport:
        """Reconcile every note under `folder` (the whole vault by default); gone notes are archived. With
        `later`, the notes postponed to the end of the pass go there instead (for `settle_later`).

        When a large share of the vault is gone at once (`HOLD_BACK_SHARE`, `HOLD_BACK_MIN`) nothing is
        archived unless `confirm_archive`: the report says how many were held back and how to confirm. Notes
        the watcher saw go are archived all the same: `reported` holds the note and folder paths it reported
        changing (a burst of events too large to take one by one ends in a full pass)."""
        if folder:  # refused when it leaves the vault; a link to a folder of the vault is that folder
            folder = vault_folder(self.root, folder) or None
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
            todo: list[str] = []
            # A note listed as not synced is read again whatever its size and time say: it may have become
            # unreadable without changing either (`chmod 000`), and the pass would otherwise drop it from the
            # list while it still cannot be read (review 22e).
            listed = {path for path, _ in (await load_attention(self.graph)).unsynced}
            # Unchanged by size and time but another file (a vault copied or restored with its times): its new
            # inode is recorded, or every later move or rename of it looks like a copy of the note, and a
            # folder's rename archives its notes before bringing them back.
            moved_inodes: list[tuple[str, int]] = []
            for e in entries:
                state = known.get(e.rel_path)
                if not same_stat(state, e.size, e.mtime_ns) or e.rel_path in listed:
                    todo.append(e.rel_path)
                elif e.ino and state is not None and state.ino != e.ino:
                    moved_inodes.append((e.rel_path, e.ino))
            report.unchanged += len(entries) - len(todo)
            if moved_inodes and not dry_run:
                await self.graph.record_inodes(moved_inodes)
                for path, ino in moved_inodes:
                    known[path] = replace(known[path], ino=ino)
            if not folder:
                self._pass_inodes = {e.ino: e.rel_path for e in entries if e.ino}
            await _report(progress, report.unchanged, len(entries))  # the walk is done: what is left to read
            try:
                async with AsyncExitStack() as stack:
                    read = await self._choose_reader(stack, len(todo))
                    await self._sync_batches(
                        todo, known, dry_run, read, report, progress, len(entries), later
                    )
            finally:
                self._pass_inodes = None
            present = {e.rel_path for e in entries}
            # Not under an unreadable folder, not a cloud placeholder, not outside the scanned folder.
            gone = [path for path in sorted(set(known) - present) if scan.covers(path)]
            if dry_run:
                # A move found by the pass is not applied in a dry run: its old path is not "gone" (review 23i:
                # a renamed folder was counted archived, or held back).
                left = set(report.moved_from)
                gone = [path for path in gone if path not in left]
            await self._archive_gone(
                gone, known, report, dry_run=dry_run, confirm=confirm_archive, reported=reported
            )
            report.conflict_copies = [ConflictCopy(copy, original) for copy, original in scan.conflicts]
            report.not_downloaded = list(scan.placeholders)
            if not dry_run:
                before = await load_attention(self.graph)
                await save_attention(self.graph, before, before.after_pass(scan.folder, report))
        return report

    async def note_conflict_copy(self, rel: str) -> None:
        """Keep the conflict copies listed for the person current as the watcher sees one come or go."""
        original = conflict_original(rel)
        if original is None:
            return
        there = await asyncio.to_thread(os.path.lexists, os.path.join(self.root, rel))
        before = await load_attention(self.graph)
        await save_attention(
            self.graph, before, before.with_conflict_copy(ConflictCopy(rel, original), there)
        )

    # --- steps ---------------------------------------------------------------------------------------------

    async def _choose_reader(self, stack: AsyncExitStack, count: int) -> ReadBatch:
        """A worker process for a big sync (when the rules can travel to one), else a worker thread."""
        if count <= self.process_threshold:
            return self._read_in_thread
        rules = pickled_rules(self.rules)
        if rules is None:
            return self._read_in_thread
        process = await stack.enter_async_context(
            ReaderProcess(self.root, rules, self.writable, settle=self.settle)
        )
        return process.read_batch

    async def _read_in_thread(
        self, paths: Sequence[str], known: Mapping[str, FileState], dry_run: bool, *, by_content: bool = False
    ) -> list[NoteRead]:
        return await asyncio.to_thread(self.reader.read_batch, paths, known, dry_run, by_content)

    async def _sync_batches(
        self,
        todo: Sequence[str],
        known: Mapping[str, FileState],
        dry_run: bool,
        read: ReadBatch,
        report: SyncReport,
        progress: Progress | None,
        total: int,
        outer: Later | None = None,
    ) -> None:
        """Read and apply `todo` in batches, pipelined: the next batch is read while this one is applied.

        A note that would take over the node of its path (it holds no id, or an id the graph has never seen) is
        decided last, after every note of the sync that carries an id. Where a note was renamed and a new one
        took its old name at once (a `git pull`, a sync client bringing another device's changes), the renamed
        note, which carries the node's id, moves first; the new note then gets a node of its own instead of
        the renamed one's identity and history, and the renamed one is never mistaken for a copy. Likewise,
        outside a walk of the whole vault, a file carrying a note's id that is not the file the graph read (a
        copy, `_perhaps_a_copy`) waits, so that the original, renamed meanwhile, keeps the id. Only the paths
        wait; the notes are read again when decided (`_decide_later`)."""
        batches = [todo[i : i + BATCH] for i in range(0, len(todo), BATCH)]
        # Given: the caller decides them after more syncs (`settle_later`); else they are decided here, last.
        outer = None if dry_run else outer
        later: Later = outer if outer is not None else {}
        pending = asyncio.ensure_future(read(batches[0], known, dry_run)) if batches else None
        try:
            for index, batch in enumerate(batches):
                assert pending is not None
                try:
                    # Shielded: cancelling the sync must not abandon a read in flight (see `finally`).
                    reads = await asyncio.shield(pending)
                except ReaderStopped as exc:
                    log.error("%s; reading the rest of the vault in this process", exc)
                    reads = [NoteRead(path, error=str(exc)) for path in batch]
                    read = self._read_in_thread
                pending = None
                if index + 1 < len(batches):
                    pending = asyncio.ensure_future(read(batches[index + 1], known, dry_run))
                for outcome in await self._settle_batch(reads, known, dry_run, later):
                    report.add(outcome)
                await _report(progress, report.unchanged + sum(len(b) for b in batches[: index + 1]), total)
            if outer is None and later:
                await self._decide_later(list(later), report, dry_run=dry_run)
        finally:
            if pending is not None:
                # The apply failed or the sync was cancelled: nobody will use this read, but it may be writing
                # an id into a note right now. Let it finish (one batch at most), so a stop never leaves a
                # temp file or a worker behind; the next sync sees the ids it wrote.
                await asyncio.wait({pending})  # never cancels `pending`, never raises its error
                if not pending.cancelled():
                    pending.exception()  # retrieved: the failure belongs to no one now

    async def _settle_batch(
        self,
        reads: Sequence[NoteRead],
        known: Mapping[str, FileState],
        dry_run: bool,
        later: Later | None = None,
    ) -> list[NoteOutcome]:
        """Settle ids for a batch of read notes, then apply them to the graph in one transaction. With `later`,
        the notes that would take over their path's node are put there instead (`_sync_batches`)."""
        if not reads:
            return []
        outcomes: list[NoteOutcome | _Apply] = []
        claimed: set[str] = set()  # ids taken by earlier notes of this batch (a copy inside one batch)
        # One lookup for the whole batch: a round trip per note would cost more than applying the note.
        # The nodes the paths belonged to are looked up too: a known path keeps its node's id.
        wanted = [r.note.engrama_id for r in reads if r.note and r.note.engrama_id]
        wanted += [s.node_id for r in reads if r.note and (s := known.get(r.path)) and s.node_id]
        # The ids the notes without one would get, derived from their path and bytes: one a node has already
        # (the same bytes restored at that note's old path) is not given again (`_fresh_id`).
        derived = {r.path: derived_id(r) for r in reads if r.note and not r.note.engrama_id and r.state}
        refs = await self.graph.nodes_by_ids([*wanted, *derived.values()])
        gone: list[str] = []
        for read in reads:
            if not dry_run:  # whatever this read decides; `_defer` puts the path back when it must wait again
                self.deferred.pop(read.path, None)
            if read.missing:  # archived after the others are applied (below)
                gone.append(read.path)
                continue
            prepared = await self._prepare(
                read, known.get(read.path), dry_run, claimed, refs, later is not None, derived.get(read.path)
            )
            if isinstance(prepared, _Postponed):
                assert later is not None
                later[read.path] = None  # its path only: it is read again when decided
            else:
                outcomes.append(prepared)
        applies = [o for o in outcomes if isinstance(o, _Apply)]
        created = await self.graph.apply_notes([a.update for a in applies]) if applies else []
        if not dry_run and self.writable and (kept := kept_paths()):
            for read in reads:
                if read.path in kept and (edit := await asyncio.to_thread(kept_edit, self.root, read.path)):
                    self.write_again_later(read.path, edit)
        flags = dict(zip((id(a) for a in applies), created, strict=True))
        done = [o if isinstance(o, NoteOutcome) else o.outcome(flags[id(o)]) for o in outcomes]
        # A path gone is archived once the batch's notes are applied: a note renamed or moved within the batch
        # (the watcher reports both paths of a move together) is at its new path by then, so its node is not
        # archived, its relations closed and opened again, only to come back a moment later.
        return done + [await self._archive(path, dry_run) for path in gone]

    async def _prepare(
        self,
        read: NoteRead,
        known: FileState | None,
        dry_run: bool,
        claimed: set[str],
        refs: Mapping[str, NodeRef],
        postpone: bool = False,
        derived: str | None = None,
    ) -> NoteOutcome | _Apply | _Postponed:
        """Decide what one read note means; returns a final outcome or the update to apply (or, with
        `postpone`, `_POSTPONED` for a note that would take over its path's node). `derived`: the id an id-less
        note gets if it needs a new one (`readers.derived_id`), looked up with its batch. A missing note is
        archived by the caller, once its batch is applied."""
        if read.error is not None:
            log.warning("cannot sync %s: %s", read.path, read.error)
            if read.text_known and not dry_run and known is not None and known.node_id is not None:
                await self.graph.replace_text(known.node_id, read.text_chunks)  # never what it said before
            return NoteOutcome(read.path, FAILED, id=known.node_id if known else None, error=read.error)
        assert read.state is not None
        if read.note is None:  # same bytes as recorded
            if (
                known is not None
                and not dry_run
                and (known.mtime_ns, known.ino) != (read.state.mtime_ns, read.state.ino)
            ):
                await self.graph.record_file_state(replace(read.state, node_id=known.node_id))
            return NoteOutcome(read.path, UNCHANGED, id=known.node_id if known else None)
        note, state, chunks, injected = read.note, read.state, read.chunks, read.injected
        node_id = note.engrama_id
        # An id the reader just derived and wrote is the note's own, unless a node has it already (the same
        # path and bytes as a note given that id before: a backup of it restored where it was). Then it is
        # decided as a carried id is: a copy of the note that has it gets an id of its own.
        if node_id is not None and (not injected or node_id in refs or node_id in claimed):
            carried = refs.get(node_id)  # the node of the id the note carries (None: never seen)
            if await self._another_spelling(read.path, carried):
                return NoteOutcome(read.path, IGNORED, id=node_id)
            copy = False
            if _perhaps_a_copy(carried, read.path, state.ino):
                if self._pass_inodes is not None:  # a walk of the whole vault: the original's file is known
                    copy = await self._original_elsewhere(carried, read.path)
                elif postpone:
                    return _POSTPONED
            if copy or node_id in claimed or await self._is_copy(carried, read.path):
                node_id = None  # a copy of another note: it gets an id of its own
            elif carried is None and (old := _path_owner(known, refs, claimed, read.path)):
                # The file at a path we know now carries an id the graph has never seen: another device (or
                # the person) re-keyed the note. Keep the node, its history and relations, under the new id.
                if postpone:
                    return _POSTPONED
                if dry_run:
                    return NoteOutcome(read.path, UPDATED, id=node_id)
                await self.graph.rekey_node(old, node_id)
                log.info(
                    "%s: its engrama_id changed from %s to %s; the node follows it", read.path, old, node_id
                )
        owed = False
        not_written: str | None = None
        if node_id is None:
            owner = _path_owner(known, refs, claimed, read.path)  # a path we know never gets a fresh id
            renamed = owner is None and known is None and not dry_run
            owner = await self._renamed_owing(read, claimed) if renamed else owner
            if owner is not None and postpone:
                return _POSTPONED
            if dry_run:
                action = UPDATED if owner else CREATED
                return NoteOutcome(read.path, action, id=owner, inject_id=not read.blank)
            quiet = read.quiet_for()
            if read.blank and owner is not None and quiet < self.settle and not renamed:
                # A known note emptied a moment ago: an editor saving in place (truncate, then write). Keep the
                # graph as it was and look again once the write had time to land.
                self._defer(read.path, self.settle - quiet)
                return NoteOutcome(read.path, UNCHANGED, id=owner)
            if owner is None and not self.writable:
                # Only the lease holder names new notes: two processes inventing ids for one note would race.
                return NoteOutcome(read.path, FAILED, error=WAITING_FOR_HOLDER)
            node_id = owner or await self._fresh_id(read, derived, refs, claimed)
            busy = False
            takeover = self._takeover_wait(read, owner, known) if self.writable else 0.0
            not_written = read.id_not_written  # the reader tried already
            retry = read.id_retry
            if self.writable and not_written is None and read.may_take_id(self.settle) and takeover <= 0:
                try:
                    note, state, chunks = await asyncio.to_thread(self.reader.write_id, read, node_id)
                    injected = True
                except NoteBusy:
                    busy = True  # a save began since the read: index it now, write the line once quiet
                except (IdLineRefused, NoteReadOnly, NoteUnwritable, NoteInConflict) as exc:
                    # It parses, but cannot take the line (read-only, on a read-only file system or locked, a
                    # layout such as JSON, a merge conflict the person is resolving): indexed all the same, its
                    # id kept in the database only; tried again when the note changes.
                    not_written, retry = describe(exc), isinstance(exc, NoteUnwritable)
                except (OSError, VaultError) as exc:
                    return NoteOutcome(read.path, FAILED, error=describe(exc))
            if not_written is not None:
                log.warning("%s: indexed without an engrama_id line: %s", read.path, not_written)
            if retry:
                # The file system refused, not the note: recorded as owed, so the next pass reads it again and
                # writes the line once it may (and a rename meanwhile keeps its node: `_renamed_owing`).
                state = replace(state, checksum=OWED_ID)
            if not injected and not_written is None:
                owed = True  # indexed under its id now; the line is written once the note is quiet
                state = replace(state, checksum=OWED_ID)
                if not read.blank:
                    wait = read.window(self.settle) - quiet
                    self._defer(read.path, self.settle if busy else max(wait, takeover))
        claimed.add(node_id)
        existing = refs.get(node_id)  # None for an id given just now
        moved_from = existing.path if existing and existing.path and existing.path != read.path else None
        if dry_run:
            action = CREATED if existing is None or existing.status == "stub" else UPDATED
            return NoteOutcome(read.path, action, id=node_id, moved_from=moved_from)
        update = NoteUpdate(note, node_id, chunks, replace(state, node_id=node_id))
        return _Apply(update, injected, moved_from, owed, not_written)

    async def _renamed_owing(self, read: NoteRead, claimed: set[str]) -> str | None:
        """The node of a note renamed before its id line was written, for the id-less note `read` at a path the
        graph does not know: the graph holds that file (its inode, size and modification time as it was read) at
        a path that is gone, as a note still owed its id line. Obsidian makes a new note as an empty
        `Untitled.md` and renames it when the title is typed; a note whose id line was taken out may be renamed
        before it is put back. Without this, the note started a second node and the first was archived with its
        history and relations (review 18b)."""
        state = read.state
        if state is None or state.ino is None:
            return None
        for old in await self.graph.files_with_inode(state.ino):
            if (
                old.path == read.path
                or old.checksum != OWED_ID
                or old.node_id is None
                or old.node_id in claimed
                # A rename keeps a file's size and modification time; an inode number alone is no identity: a
                # file deleted frees it, and a new, unrelated note may get it at once (ext4 does; review 18c).
                # Unless the note was empty: Obsidian renames its new `Untitled.md` and saves the first words
                # at once (or while no server runs), so the renamed file holds more than was read; an empty
                # note's node holds no words and no id line to lose (reviews 22b, 22h: an archived "Untitled"
                # stayed, and the brief called it deleted).
                or ((old.size, old.mtime_ns) != (state.size, state.mtime_ns) and old.size != 0)
            ):
                continue
            ref = (await self.graph.nodes_by_ids([old.node_id])).get(old.node_id)
            if ref is None or ref.path != old.path or ref.status == "archived":
                continue
            if not await asyncio.to_thread(os.path.lexists, self.root / old.path):
                log.info(
                    "%s: renamed from %s before its id line was written; the node follows it",
                    read.path,
                    old.path,
                )
                return old.node_id
        return None

    async def _fresh_id(
        self, read: NoteRead, derived: str | None, refs: Mapping[str, NodeRef], claimed: set[str]
    ) -> str:
        """The note's derived id (`readers.derived_id`; for a copy, derived and looked up now), unless a node or
        a note of this batch has it already: then a random one."""
        assert read.note is not None
        if derived is None:
            derived = derived_id(read)
            taken = derived in claimed or bool(await self.graph.nodes_by_ids([derived]))
        else:
            taken = derived in refs or derived in claimed
        return identify.new_engrama_id(read.note.file_began) if taken else derived

    def _takeover_wait(self, read: NoteRead, owner: str | None, known: FileState | None) -> float:
        """Seconds to wait before the id of the node at this path (`owner`) is written into the id-less note now
        there (0: now).

        Only once this process has seen the note unchanged for the settle window, whatever its file time says:
        a sync client brings another device's files with that device's times, so a new note put at a renamed
        note's old path looks quiet at once, and the renamed note (which carries the node's id) may be reported
        a moment later, from another folder. Written at once, the id would give the new note the renamed one's
        identity and make the renamed one look like a copy; waiting lets the renamed note claim its node
        first (this note then gets an id of its own)."""
        if owner is None or read.state is None or (known is not None and known.checksum == OWED_ID):
            return 0.0  # no note to take over, or the node is this note's own, its id not written yet
        now, checksum = time.monotonic(), read.state.checksum
        since, seen = self._takeovers.get(read.path, (now, checksum))
        if seen != checksum:
            since = now
        if now - since >= self.settle:
            self._takeovers.pop(read.path, None)
            return 0.0
        self._takeovers[read.path] = (since, checksum)
        return self.settle - (now - since)

    def write_again_later(self, rel: str, edit: Callable[[bytes], bytes]) -> None:
        """A tool's write into `rel` was saved over by an editor holding an older copy of the note
        (`writer.kept_edit`, or a write the process before this one recorded: `server.live`): make it again on
        what the note holds now, once the note is quiet, off this reconcile."""
        task = asyncio.get_running_loop().create_task(self._make_again(rel, edit))
        self._again.add(task)
        task.add_done_callback(self._again.discard)

    async def _make_again(self, rel: str, edit: Callable[[bytes], bytes]) -> None:
        quiet = Quiet(self.settle, None, self.settle + KEEP_EXTRA, keep=True)
        for _ in range(KEEP_TIMES):
            try:
                done = await edit_note_aside(self.root, rel, edit, quiet=quiet)
            except NoteBusy:
                continue  # still being typed in: wait for the pause again
            except (OSError, VaultError) as exc:
                log.warning(
                    "%s: engrama's write, saved over by an editor, could not be made again: %s", rel, exc
                )
                return
            if done.changed:
                log.warning(
                    "%s: an editor saved an older copy of the note over engrama's write; it is made again on "
                    "top of the person's text",
                    rel,
                )
            return
        log.warning("%s: engrama's write, saved over by an editor, waited for quiet in vain; it is lost", rel)

    async def stop_writing_again(self) -> None:
        """Cancel the writes being made again (the process lets the vault go)."""
        for task in list(self._again):
            task.cancel()
        for task in list(self._again):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _defer(self, rel: str, delay: float) -> None:
        """Come back to `rel` after `delay` seconds (only a process that may write has anything to come back for)."""
        if not self.writable:
            return
        delay = max(delay, 0.0) + DEFER_MARGIN
        self.deferred[rel] = time.monotonic() + delay
        if self.on_defer is not None:
            self.on_defer(rel, delay)

    async def settle_deferred(self, report: SyncReport, timeout: float) -> None:
        """Wait for the notes that still owe their id line to become quiet, write them, and update `report`
        (for one-shot commands, which have no watcher to come back later).

        Gives up after `timeout` seconds; what is left gets its id at the next sync or from the watcher."""
        deadline = time.monotonic() + timeout
        while self.deferred:
            due = min(self.deferred.values())
            if due > deadline:
                return
            await asyncio.sleep(max(due - time.monotonic(), 0.0))
            ready = [p for p, at in self.deferred.items() if at <= time.monotonic()]
            settled = await self.sync_paths(ready)  # in batches, like the pass itself
            written = set(settled.ids_injected)
            refused = [e for e in settled.ids_not_written if e.path in ready]
            done = written | {e.path for e in refused}
            report.ids_owed = [p for p in report.ids_owed if p not in done]
            report.ids_injected += [p for p in ready if p in written]
            report.ids_not_written += refused

    async def _original_elsewhere(self, existing: NodeRef | None, rel: str) -> bool:
        """Whether the file the graph last read for `existing` (its inode, found by this pass's walk) is at
        another path than `rel` and still carries its id: the note renamed, and `rel` a copy of it."""
        other = (
            self._pass_inodes.get(existing.ino) if existing and existing.ino and self._pass_inodes else None
        )
        if other is None or other == rel or existing is None:
            return False
        try:
            data = await asyncio.to_thread(resolve_in_vault(self.root, other).read_bytes)
        except (OSError, VaultError):
            return False
        return identify.read_id(data) == existing.id

    async def _another_spelling(self, rel: str, existing: NodeRef | None) -> bool:
        """Whether `rel` only opens the note recorded at `existing.path` under a spelling the vault does not list
        (macOS, Windows: `Atlas.md` after the note became `atlas.md`): no note of its own."""
        if existing is None or existing.path is None or existing.path == rel:
            return False
        other = existing.path

        def same_file_not_listed() -> bool:
            try:
                same = os.path.samefile(self.root / rel, self.root / other)
            except OSError:
                return False
            return same and not spelled_as_listed(self.root, rel)

        return await asyncio.to_thread(same_file_not_listed)

    async def _is_copy(self, existing: NodeRef | None, rel: str) -> bool:
        """True when the node of this id belongs to another note file that still exists with that id, or to a
        template.

        Archived nodes count too: a note archived through its frontmatter (`status: archived`) is still there,
        and a note archived because it was deleted no longer is, so reading the file tells the two apart."""
        if existing is None or existing.path is None or existing.path == rel:
            return False
        if templates.rules(self.root).holds(existing.path):
            # The id was a template's (one given an id line before it was known for one): a note carrying it
            # was made from the template, wherever the template has moved since (review 19c).
            return True
        try:
            data = await asyncio.to_thread(resolve_in_vault(self.root, existing.path).read_bytes)
        except (OSError, VaultError):
            return False  # the other file is gone: this is a move, not a copy
        if identify.read_id(data) != existing.id:
            return False
        # On macOS or Windows the old path may open this very file under another spelling (`Atlas.md` after
        # a rename to `atlas.md`): then it is a move too.
        return await asyncio.to_thread(spelled_as_listed, self.root, existing.path)

    async def _archive_gone(
        self,
        gone: Sequence[str],
        known: Mapping[str, FileState],
        report: SyncReport,
        *,
        dry_run: bool,
        confirm: bool,
        reported: Container[str] = (),
    ) -> None:
        """Archive the notes a pass found gone, unless so many went at once that the view may be partial; the
        ones the watcher saw go (`reported`, or under a folder in it) are archived even then, each checked
        again by `_archive` (a folder deleted while the server watched is no partial view)."""
        paths = gone
        # Notes that became templates (the vault's settings now name their folder) are no partial view: they
        # are there, and the person's setting says they are not notes (vault_sync.templates).
        rules = templates.rules(self.root)
        templated = {path for path in gone if rules.holds(path)}
        if templated:
            log.info("%d notes are now templates (%s): archived", len(templated), rules.describe())
        leaving = await self._count_leaving([p for p in gone if p not in templated], known)
        # A vault folder holding nothing at all (not even `.obsidian`) is the empty mount point of a share or
        # drive that is not mounted, however few notes it held (review 19b: a small vault was archived whole).
        empty = bool(leaving) and await asyncio.to_thread(vault_is_empty, self.root)
        if not confirm and (empty or (leaving >= HOLD_BACK_MIN and leaving >= HOLD_BACK_SHARE * len(known))):
            paths = [path for path in gone if _reported(path, reported) or path in templated]
            seen = set(paths)
            held = await self._count_leaving([p for p in gone if p not in seen], known)
            if held:
                report.archive_held_back = held
                report.archive_hint = _hold_back_hint(held, len(known), empty=empty)
                log.warning("%s", report.archive_hint)
        for path in paths:
            outcome = await self._archive(path, dry_run, confirmed=confirm)
            if outcome.action in (ARCHIVED, FAILED):
                report.add(outcome)

    async def _count_leaving(self, paths: Sequence[str], known: Mapping[str, FileState]) -> int:
        """How many of these gone paths would archive a live node (a note moved elsewhere takes its node along;
        in a dry run, where the moves found are not applied, their old paths are left out of `paths`)."""
        ids = [state.node_id for path in paths if (state := known[path]).node_id]
        refs = await self.graph.nodes_by_ids(ids) if ids else {}
        leaving = 0
        for path in paths:
            ref = refs.get(known[path].node_id or "")
            if ref is not None and ref.path in (None, path) and ref.status != "archived":
                leaving += 1
        return leaving

    async def _archive(self, rel: str, dry_run: bool, *, confirmed: bool = False) -> NoteOutcome:
        """Archive the node of the note that was at `rel`, once the vault vouches that it is really gone.

        A missing vault root, a folder that cannot be listed, or a cloud placeholder in the note's place mean
        the note may still be there: it is left as it was, and the outcome says why (`scan.presence`). So does
        a vault folder holding nothing at all, unless the person `confirmed` that the notes went."""
        if not dry_run:
            self.deferred.pop(rel, None)  # nothing is owed to a note that is not there
            self._takeovers.pop(rel, None)
        known = await self.graph.file_state(rel)
        node_id = known.node_id if known else None
        seen = await asyncio.to_thread(
            lambda: presence(
                self.root,
                rel,
                still_a_note=classify(rel) == "note" and not templates.rules(self.root).holds(rel),
                emptied=confirmed,
            )
        )
        if seen.state == "there":  # back already: the event it came back with syncs it
            return NoteOutcome(rel, UNCHANGED, id=node_id)
        if seen.state == "unseen":
            log.info("%s not archived: %s", rel, seen.reason)
            return NoteOutcome(rel, FAILED, id=node_id, error=f"not archived: {seen.reason}")
        if dry_run:
            return NoteOutcome(rel, ARCHIVED if known else UNCHANGED, id=node_id)
        node_id = await self.graph.archive_path(rel)
        return NoteOutcome(rel, ARCHIVED if node_id else UNCHANGED, id=node_id)


def _reported(path: str, reported: Container[str]) -> bool:
    """Whether the watcher reported `path`, or a folder holding it."""
    parts = path.split("/")
    return any("/".join(parts[:depth]) in reported for depth in range(1, len(parts) + 1))


def _hold_back_hint(leaving: int, live: int, *, empty: bool = False) -> str:
    share = round(100 * leaving / live) if live else 100
    where = (
        "the vault folder holds nothing at all, as the mount point of a share or drive that is not mounted does"
        if empty
        else "the vault may be only partly there (a drive unplugged, a share not mounted, a cloud folder still "
        "downloading)"
    )
    return (
        f"{leaving} of the {live} notes engrama knows ({share}%) are missing from the vault at once, so none "
        f"was archived: {where}. If you did delete them, confirm with `engrama-vault sync "
        "--confirm-archive` or engrama_sync_vault(confirm_archive=true)"
    )


async def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is None:
        return
    result = progress(done, total)
    if result is not None:
        await result
