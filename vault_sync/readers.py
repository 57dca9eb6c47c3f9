"""Read notes for a reconcile: read bytes, checksum, parse, chunk, and give id-less notes their engrama_id.

`NoteReader` holds no graph and no event loop, only the vault root and the profile's rules, so the same code
runs in a worker thread (small syncs, the watcher) or in a worker process (big syncs, `reader_process.py`).
Its results are `NoteRead` values: frozen and picklable, so they can cross a process boundary.
"""

from __future__ import annotations

import errno
import os
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from vault_sync import identify
from vault_sync.began import file_began
from vault_sync.checksum import sha256_hex
from vault_sync.chunking import chunk_body
from vault_sync.errors import IdLineRefused, NoteInConflict, NoteReadOnly, NoteUnwritable, VaultError
from vault_sync.frontmatter import decode_note, locate_frontmatter
from vault_sync.model import Chunk, FileState, ParsedNote
from vault_sync.parse import parse_note
from vault_sync.paths import resolve_in_vault
from vault_sync.writer import ARRIVED_QUIET, MAX_NOTE_BYTES, NoteBusy, Quiet, arrived, edit_note, seen_here

# A symlink to a note inside the vault is followed (`resolve_in_vault` checked where it leads).
_OPEN_NOTE = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
NOT_A_FILE = "not a regular file (a pipe, socket or device); rename or remove it"


def id_seed(path: str, checksum: str) -> bytes:
    """What a new id for the id-less note at `path` with these bytes is derived from (`identify.new_engrama_id`):
    two machines giving the same synced note its id write the same line, so their copies stay identical. The
    path is composed (NFC): a Mac may spell an accented name decomposed where Linux and Windows compose it."""
    return f"{unicodedata.normalize('NFC', path)}\0{checksum}".encode()


def derived_id(read: NoteRead) -> str:
    """The id a new note gets: stamped with when it began, derived from its path and bytes (`id_seed`), so two
    machines sharing the vault give a note from a third one the same id."""
    assert read.note is not None and read.state is not None
    return identify.new_engrama_id(read.note.file_began, id_seed(read.path, read.state.checksum))


@dataclass(frozen=True)
class NoteRules:
    """What the active profile tells the parser: folder -> label map and label canonicalisation."""

    folder_labels: Mapping[str, str]
    canonical_label: Callable[[str], str | None]


@dataclass(frozen=True)
class NoteRead:
    """A note file read and parsed off the event loop."""

    path: str
    state: FileState | None = None  # size, mtime, checksum of the bytes read (node_id unset)
    note: ParsedNote | None = None
    error: str | None = None
    missing: bool = False
    chunks: tuple[Chunk, ...] = ()
    injected: bool = False  # the engrama_id line was inserted by this read
    blank: bool = False  # nothing but whitespace (an editor's truncation, or Obsidian's new `Untitled.md`)
    id_not_written: str | None = None  # the id line could not be written into it (read-only, JSON...): why
    # Not written for a reason of the file system's, which may pass with nothing in the note changing (a
    # read-only mount made writable, a lock lifted): the line is tried again at the next pass (`NoteUnwritable`).
    id_retry: bool = False
    arrived: bool = False  # reported as it arrived from elsewhere, not saved here (`arrived`, `read_one`)
    # With `error`, when what the file holds is known (`text_known`): what its text says though it cannot be
    # read as a note (the body after a broken frontmatter; nothing when it is no text, or too large to read):
    # what search may find meanwhile. Not known after a failed read (a share's hiccup): the graph keeps it.
    text_chunks: tuple[Chunk, ...] = ()
    text_known: bool = False

    def quiet_for(self, now_ns: int | None = None) -> float:
        """Seconds since the file's content last changed: its mtime, which an editor saving (in place or by
        rename) sets to now.

        An mtime in the future of this clock was not set by an editor saving here just now (a sync tool
        carried it from a machine whose clock runs ahead, or it was touched by hand): it counts as quiet."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        changed_ns = self.state.mtime_ns if self.state is not None else 0
        if changed_ns > now_ns:
            return float("inf")
        return (now_ns - changed_ns) / 1e9

    def may_take_id(self, settle: float) -> bool:
        """True when engrama may write an id line into this note now: not blank, quiet for `window(settle)`.

        An editor saving in place truncates the file and writes it a moment later; a rename of the file in
        between would send the editor's write to an unlinked inode (the person's text lost). A blank note
        has nothing to identify yet, and a note changed within `settle` seconds may still be being saved
        or typed into, so both are indexed but left alone until quiet (DESIGN section 2)."""
        return not self.blank and self.quiet_for() >= self.window(settle)

    def window(self, settle: float) -> float:
        """How long the note must be quiet before an id line is written: `settle`, or ARRIVED_QUIET for a note
        that arrived from elsewhere (settle 0, the person's choice of "at once", stays 0)."""
        return max(settle, ARRIVED_QUIET) if self.arrived and settle > 0 else settle


def text_of(data: bytes) -> tuple[Chunk, ...]:
    """The passages of a note's text when it cannot be read as a note: the body after its frontmatter block,
    whatever that block holds (all of it when the block is not closed); none when it is not UTF-8 text."""
    try:
        span = locate_frontmatter(data)
    except VaultError:
        span = None
    try:
        body = decode_note(data[span.end :] if span is not None else data)
    except VaultError:
        return ()
    return tuple(chunk_body(body))


@dataclass(frozen=True)
class NoteReader:
    """Reads notes of the vault at `root`; `writable=False` never touches files (a follower process)."""

    root: Path
    rules: NoteRules
    writable: bool = True
    settle: float = 0.0  # seconds a note must be quiet before an id line is written into it (`may_take_id`)

    def read_batch(
        self, paths: Sequence[str], known: Mapping[str, FileState], dry_run: bool, by_content: bool = False
    ) -> list[NoteRead]:
        """Read, checksum, parse and chunk notes, and give id-less notes their id (off the event loop).

        Inserting ids here, rather than on the event loop, lets it overlap with the database applying the
        previous batch. Only a note at a path the graph does not know needs no graph to decide (it gets a
        fresh id); and only when it may take one now (`NoteRead.may_take_id`). The reconcile settles the rest:
        a known path keeps its node's id, and a note that must wait is indexed without being written.
        `by_content`: see `read_one`."""
        reads = [self.read_one(path, known.get(path), by_content) for path in paths]
        if self.writable and not dry_run:
            reads = [self._identify(r) if self._fresh_and_ready(r, known) else r for r in reads]
        return reads

    def _fresh_and_ready(self, read: NoteRead, known: Mapping[str, FileState]) -> bool:
        state = known.get(read.path)
        return (
            read.note is not None
            and read.note.engrama_id is None
            and (state is None or state.node_id is None)
            and read.may_take_id(self.settle)
        )

    def read_one(self, rel: str, known: FileState | None, by_content: bool = False) -> NoteRead:
        """Read one note; `note` is None (and `error` too) when its bytes are the ones `known` records.

        Size and modification time equal to `known`'s are taken to mean the same bytes, unless `by_content`:
        then the bytes are compared. A path reconciled on its own (a watcher event, `engrama_sync_note`, a
        tool's write) has a reason to have changed, and an edit can keep both: the same number of bytes
        within one tick of a coarse clock (FAT and exFAT keep 2 s or 10 ms, some network shares 1 s), or a
        tool that sets the time back (`rsync -t`, `cp -p`, sync clients)."""
        try:
            absolute = resolve_in_vault(self.root, rel)
            # Not blocking: a FIFO named x.md would hang the open until something wrote to it, and with it the
            # sync and every write (review 22e); fstat then says what the path holds.
            with os.fdopen(os.open(absolute, _OPEN_NOTE), "rb") as handle:
                stat = os.fstat(handle.fileno())
                if S_ISDIR(stat.st_mode):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(absolute))
                if not S_ISREG(stat.st_mode):
                    return NoteRead(rel, error=NOT_A_FILE)
                seen_here(stat)  # a version saved here: a rename later does not make it look arrived
                if not by_content and known is not None and same_stat(known, stat.st_size, stat.st_mtime_ns):
                    return NoteRead(
                        rel, FileState(rel, stat.st_size, stat.st_mtime_ns, known.checksum, None, stat.st_ino)
                    )
                if stat.st_size > MAX_NOTE_BYTES:
                    return NoteRead(
                        rel,
                        error=f"note is {stat.st_size // 2**20} MiB, over the "
                        f"{MAX_NOTE_BYTES // 2**20} MiB limit; split it into smaller notes",
                        text_known=True,
                    )
                data = handle.read()
        except (FileNotFoundError, NotADirectoryError):  # or a file took the name of a folder on its way
            return NoteRead(rel, missing=True)
        except IsADirectoryError:
            if known is not None:  # a folder took the note's name: the note is gone (`scan.presence` agrees)
                return NoteRead(rel, missing=True)
            return NoteRead(rel, error="is a folder whose name ends in .md; rename it")
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket: no open at all (review 22f)
                return NoteRead(rel, error=NOT_A_FILE)
            return NoteRead(rel, error=describe(exc))
        except VaultError as exc:
            return NoteRead(rel, error=describe(exc))
        state = FileState(rel, stat.st_size, stat.st_mtime_ns, sha256_hex(data), None, stat.st_ino)
        if known is not None and known.checksum == state.checksum:
            return NoteRead(rel, state)
        blank = not data.strip(b" \t\r\n\f\v\xef\xbb\xbf")
        try:
            note = replace(self.parse(rel, data), file_began=file_began(stat))  # evidence of its start
        except VaultError as exc:
            return NoteRead(
                rel, state, error=describe(exc), blank=blank, text_chunks=text_of(data), text_known=True
            )
        chunks = tuple(chunk_body(note.body))
        # Only a note reported as it changed (`by_content`: a watcher event) can be arriving while it is typed
        # elsewhere; one a walk of the vault finds (a first sync, the catch-up at start) waits as usual.
        came = by_content and arrived(stat)
        return NoteRead(rel, state, note, chunks=chunks, blank=blank, arrived=came)

    def parse(self, rel: str, data: bytes) -> ParsedNote:
        return parse_note(
            rel, data, folder_labels=self.rules.folder_labels, canonical_label=self.rules.canonical_label
        )

    def write_id(self, read: NoteRead, node_id: str) -> tuple[ParsedNote, FileState, tuple[Chunk, ...]]:
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
        # Quiet when written, not only when read: an editor may have begun saving in place (the file truncated,
        # its text not yet written) since the note was read. Then this raises NoteBusy and writes nothing, for
        # the line would replace the empty file and the editor's text would land in an unlinked inode.
        seen = (read.state.size, read.state.mtime_ns)
        result = edit_note(
            self.root,
            read.path,
            edit,
            expected_checksum=read.state.checksum,
            quiet=Quiet(settle=self.settle, seen=seen),
        )
        written = produced.pop("data")  # the edit stays watched a while (writer._swap_in): not the bytes
        state = replace(result.state, path=read.path)
        if result.before_checksum == read.state.checksum:
            # The edit was based on the bytes we parsed, and it only inserts the id line (verified by set_id):
            # the person last changed the note when those bytes were written, not now.
            state = replace(state, touched_ns=read.state.mtime_ns)
            return replace(read.note, engrama_id=node_id, has_frontmatter=True), state, read.chunks
        note = self.parse(read.path, written)  # re-based on newer content: parse what we wrote
        note = replace(note, file_began=read.note.file_began)
        return note, state, tuple(chunk_body(note.body))

    def _identify(self, read: NoteRead) -> NoteRead:
        try:
            note, state, chunks = self.write_id(read, derived_id(read))
        except NoteBusy:
            return read  # being saved right now: the reconcile indexes it and writes its line once quiet
        except (
            IdLineRefused,
            NoteReadOnly,
            NoteUnwritable,
            NoteInConflict,
        ) as exc:  # indexed all the same (reconcile), saying why
            return replace(read, id_not_written=describe(exc), id_retry=isinstance(exc, NoteUnwritable))
        except (OSError, VaultError) as exc:
            return replace(read, note=None, error=describe(exc))
        return replace(read, note=note, state=state, chunks=chunks, injected=True)


# Recorded as the checksum of a note that is indexed but still owed its id line (it was blank, or changed a
# moment ago): it never equals a real checksum, so the next reconcile of the path reads and settles the note
# again, even after a restart.
OWED_ID = "owed-id"


def same_stat(known: FileState | None, size: int, mtime_ns: int) -> bool:
    """True when `known` records a file of this size and mtime (and the note owes nothing)."""
    return (
        known is not None and known.size == size and known.mtime_ns == mtime_ns and known.checksum != OWED_ID
    )


def describe(exc: BaseException) -> str:
    """The message a sync report gives for a note that could not be read or written."""
    if isinstance(exc, PermissionError):
        return "permission denied; allow this user to read the file"
    return str(exc) or type(exc).__name__
