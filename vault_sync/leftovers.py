"""Settle the temp files a killed writer left behind (`.engrama-tmp-*.tmp`, see `paths.make_temp_name`).

The safe writer puts each edit in a hidden temp file beside the note and exchanges it with the note; a process
killed in between (SIGKILL, power loss) leaves the temp file there, and sync clients upload it. Only the
process holding the vault's lease writes notes, so the moment it takes the lease no temp file of ours can be
in use any more: `remove_leftover_temps` is called then (before any write of its own).

A leftover may hold one of three things: what engrama was writing (the swap never happened), the note's version
a swap replaced (the exchange put it at the temp name), or a save another program made: one that landed at the
note's path just before the exchange, or an editor's save in place into the replaced note, which keeps its
temp name while a program has it open for writing (`writer.open_for_writing`). Each temp file's name carries
the checksums of the first two (and a hash of its note's name), so the clean-up removes a leftover only when
its bytes are one of those (or it is empty) and no program has it open for writing, and keeps anything else
beside its note as a conflict copy, listed for the person like a sync tool's: a person's save is never removed
by a guess. (A save the writer had put back into the note when it was killed is one of those: the replaced
file's temp name is changed to carry its checksum as soon as it is stored, `writer._Recovery._stored`.) A temp
file an earlier version left carries no checksums; it is removed when it holds exactly what a note beside it
holds.

Where the writer can put them: the folder of a note it edits or creates, which is the vault root or a folder
below it outside every dot-folder (it never edits notes in `.trash`; moving to the trash is a rename). So the
walk skips dot-folders (`.git`, `.obsidian`, `.trash`) and does not follow symlinked folders (their notes, and
so the writer's temp files, are in the folder the link points to, which the walk reaches by its real path).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from vault_sync.errors import VaultError
from vault_sync.paths import is_engrama_temp, name_hash, sum_in_name, temp_name_parts
from vault_sync.writer import keep_beside, open_for_writing

log = logging.getLogger(__name__)

UNNAMED = "engrama recovered save.md"  # the copy's name when the note a leftover was for is not beside it


def remove_leftover_temps(root: Path) -> int:
    """Settle every engrama temp file in the note folders of the vault at `root` (see the module docstring);
    return how many were removed.

    Call it only while holding the vault's lease, before writing anything: a temp file is in use only while
    a writer that holds the lease is between writing it and renaming it. Folders that cannot be listed and
    files that cannot be read or moved are skipped (logged), never raised: a clean-up must not stop a start.
    """
    removed = 0
    pending = [os.path.abspath(root)]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as exc:
            log.debug("leftover temp files: cannot list %s (%s); skipped", folder, exc.strerror)
            continue
        temps: list[os.DirEntry[str]] = []
        for entry in listed:
            if entry.name.startswith("."):
                if is_engrama_temp(entry.name):
                    temps.append(entry)
                continue  # dot-folders (.git, .obsidian, .trash) never hold our temp files
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
            except OSError:
                continue
        notes = [e for e in listed if not e.name.startswith(".") and e.name.lower().endswith(".md")]
        removed += sum(_settle(entry, notes) for entry in temps)
    return removed


def _settle(entry: os.DirEntry[str], notes: list[os.DirEntry[str]]) -> int:
    """Remove one leftover temp file when its bytes are engrama's own (1), or keep it as a copy (0)."""
    try:
        if not entry.is_file(follow_symlinks=False):
            return 0  # our temp files are plain files; anything else with that name is not ours
        size, digest, writing = _look_at(entry.path)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        log.warning("could not read the leftover temp file %s: %s; it stays", entry.path, exc.strerror)
        return 0
    sums, note_hash = temp_name_parts(entry.name)
    # One a program still has open for writing is an editor's save in place not written yet (its writer was
    # killed a moment ago): whatever it holds now, it is kept, and the save lands in the copy.
    ours = size == 0 or sum_in_name(digest) in sums or (not sums and _held_by_a_note(notes, size, digest))
    if ours and writing is not True:
        return _remove(entry)
    note = next((n for n in notes if note_hash is not None and name_hash(n.name) == note_hash), None)
    beside = Path(note.path if note is not None else os.path.join(os.path.dirname(entry.path), UNNAMED))
    try:
        kept = keep_beside(Path(entry.path), beside)
    except (OSError, VaultError) as exc:
        log.warning("could not keep the leftover temp file %s: %s; it stays", entry.path, exc)
        return 0
    if kept is None:
        log.warning("no free name beside %s for the leftover temp file %s; it stays", beside.name, entry.path)
    else:
        log.warning(
            "a save of %s that engrama was putting back into the note when it was stopped is kept as %s",
            beside.name,
            kept.name,
        )
    return 0


def _held_by_a_note(notes: list[os.DirEntry[str]], size: int, digest: str) -> bool:
    for note in notes:
        try:
            same_size = (
                note.is_file(follow_symlinks=False) and note.stat(follow_symlinks=False).st_size == size
            )
            if same_size and _digest(note.path)[1] == digest:
                return True
        except OSError:
            continue
    return False


def _digest(path: str) -> tuple[int, str]:
    """(size, sha256 hex digest) of the file at `path`, read in pieces; symlinks are not followed. No lease is
    taken: a note can be opened by its name, and a program opening it for writing would break the lease."""
    size, digest, _ = _look_at(path, lease=False)
    return size, digest


def _look_at(path: str, *, lease: bool = True) -> tuple[int, str, bool | None]:
    """(size, sha256 hex digest, whether a program has it open for writing) of the file at `path`."""
    h, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        while piece := os.read(fd, 1 << 20):
            h.update(piece)
            size += len(piece)
        writing = open_for_writing(fd) if lease else None
    finally:
        os.close(fd)
    return size, h.hexdigest(), writing


def _remove(entry: os.DirEntry[str]) -> int:
    try:
        os.unlink(entry.path)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        log.warning("could not remove the leftover temp file %s: %s", entry.path, exc.strerror)
        return 0
    return 1
