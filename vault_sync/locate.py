"""Find where a note with a given engrama_id lives now, after its file left the path the graph recorded.

A tool that is about to write an entity's note can find the file gone: the person moved or renamed it, or
moved it to Obsidian's trash, a moment ago, before the watcher reconciled the change. Writing a new note at
the old path would then give the entity two files with one id (and the person's moved note would be taken
for a copy). So the tool asks here first.

It stays cheap on a big vault: one walk (`scan_vault`, a stat per note and none per folder), then reads only
the files that can hold the id -- notes the graph does not know, notes whose size or mtime differ from what
it recorded, notes it records under this id, and the notes in `.trash/` -- each first filtered by a plain
`id in bytes` test before its frontmatter is parsed. A move keeps size and mtime but changes the path, so
the moved note is always among the few read. The watcher's pending events are not consulted: the walk sees
the files as they are, which is what the events would only hint at.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from vault_sync.errors import VaultError
from vault_sync.identify import read_id
from vault_sync.model import FileState
from vault_sync.names import fold
from vault_sync.paths import TRASH_FOLDER, classify, to_rel
from vault_sync.readers import OWED_ID
from vault_sync.scan import StatEntry, scan_vault
from vault_sync.writer import read_note


@dataclass(frozen=True)
class Located:
    """Where a note holding the id was found."""

    path: str  # vault-relative
    in_trash: bool  # True for a note in `.trash/` (the entity is archived; it can be restored)


def locate_note(root: Path, node_id: str, known: Mapping[str, FileState]) -> Located | None:
    """The note that holds `node_id` now: in the vault, else in `.trash/`; None when it is in neither.

    `known` is the graph's file states (`GraphPort.file_states`). Of two vault notes holding the id, the
    older (by mtime, then path) wins, as in a vault sync, which gives the id to the older of two copies.
    Raises `VaultError` when the vault itself cannot be listed (then nothing can be said either way).
    """
    scan = scan_vault(root)
    for rel in candidate_paths(scan.notes, known, node_id):
        if _holds(root, rel, node_id):
            return Located(rel, in_trash=False)
    for rel in _trash_notes(root):
        if _holds(root, rel, node_id):
            return Located(rel, in_trash=True)
    return None


def candidate_paths(entries: Iterable[StatEntry], known: Mapping[str, FileState], node_id: str) -> list[str]:
    """The listed notes that may hold `node_id`, older first: unknown to the graph, changed since it
    recorded them (size or mtime), or recorded under this id. Every other note is as the graph last read
    it, under another id, and is not read again."""
    chosen = [
        entry
        for entry in entries
        if (state := known.get(entry.rel_path)) is None
        or state.node_id == node_id
        or (state.size, state.mtime_ns) != (entry.size, entry.mtime_ns)
    ]
    return [entry.rel_path for entry in sorted(chosen, key=lambda e: (e.mtime_ns, e.rel_path))]


def _holds(root: Path, rel: str, node_id: str) -> bool:
    try:
        data, _ = read_note(root, rel)
    except (OSError, VaultError):
        return False  # gone again, unreadable or too large: not a note this id can live in
    return node_id.encode("utf-8") in data and read_id(data) == node_id


def _trash_notes(root: Path) -> Iterator[str]:
    """The notes in `.trash/` (and its folders), most recently moved there first (a rename sets ctime)."""
    trash = root / TRASH_FOLDER
    found: list[tuple[int, str]] = []
    for folder, dirs, files in os.walk(trash):  # never follows folder symlinks
        dirs.sort()
        for name in files:
            path = os.path.join(folder, name)
            rel = to_rel(root, path)
            if classify(rel) != "trash":
                continue
            try:
                found.append((-os.lstat(path).st_ctime_ns, rel))
            except OSError:
                continue
    for _, rel in sorted(found):
        yield rel


def unseen_notes_named(root: Path, stems: Iterable[str], known: Mapping[str, FileState]) -> list[str]:
    """The notes with one of these file names (without `.md`, case-insensitive, as Obsidian matches links)
    that the graph has not read as they are now: new, changed since, or still owed their id line.

    A tool about to create a note for an entity reconciles these first: the person may have just created
    that entity's note (Obsidian's new note, a rename), and the watcher may not have caught up yet."""
    wanted = {fold(stem) for stem in stems}
    found = []
    for entry in scan_vault(root).notes:
        stem = entry.rel_path.rsplit("/", 1)[-1][:-3]
        if fold(stem) not in wanted:
            continue
        state = known.get(entry.rel_path)
        if (
            state is None
            or (state.size, state.mtime_ns) != (entry.size, entry.mtime_ns)
            or state.checksum == OWED_ID
        ):
            found.append(entry.rel_path)
    return found
