"""Walk the vault and list its notes with size and mtime: the cheap first pass of a reconcile.

The walk uses `os.scandir` (one `stat` per note, none per folder), so 10,000 notes take a small fraction
of a second. It never leaves the vault and never loops:

- dot-folders (`.obsidian`, `.git`, `.trash`, `.engrama`, ...) are not entered at all;
- a symlinked *file* whose real path is inside the vault counts as a note at the link's path (the same bytes
  then also appear at the target's own path, as Obsidian shows them too);
- a symlinked *folder* inside the vault is not followed: its notes are already listed at their real path, and
  following it could list them twice or loop forever;
- symlinks leading out of the vault, broken links and link loops are reported in `errors`, not followed;
- a folder or file that cannot be listed or stat'ed is reported in `errors` and the walk goes on.

A reconcile must not archive a known note just because the scan did not list it: use `ScanResult.covers`,
which is False for paths outside the scanned folder and below anything that was reported as an error.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from vault_sync.errors import VaultError
from vault_sync.paths import classify, is_inside, resolve_in_vault, to_rel


@dataclass(frozen=True)
class StatEntry:
    """One note file as the walk saw it (for a symlinked note: the target's size and mtime)."""

    rel_path: str  # vault-relative, POSIX separators
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ScanResult:
    """The notes under `folder` ("" = the whole vault), sorted by path, and what could not be scanned."""

    folder: str
    notes: tuple[StatEntry, ...]
    errors: tuple[tuple[str, str], ...]  # (vault-relative path, what went wrong and what to do)

    def covers(self, rel_path: str) -> bool:
        """True when this scan can vouch for `rel_path`: absent from `notes` then really means gone."""
        if not _under(self.folder, rel_path):
            return False
        return not any(_under(path, rel_path) for path, _ in self.errors)


def scan_vault(root: Path, folder: str | None = None) -> ScanResult:
    """List every note in the vault at `root`, or below the vault-relative `folder`.

    Raises `PathOutsideVault` for a folder outside the vault and `VaultError` when the folder is hidden, is not
    a folder, or cannot be listed at all (then nothing is known, and a reconcile must not archive anything).
    Problems below the start folder are reported in `ScanResult.errors` instead.
    """
    start = _start_folder(root, folder)
    walk = _Walk(os.path.abspath(root), os.path.realpath(root))
    try:
        walk.list_folder(start, raise_errors=True)
    except OSError as exc:
        raise VaultError(f"cannot list the vault folder {start or root!s}: {_describe(exc)}") from None
    while walk.pending:
        walk.list_folder(walk.pending.pop(), raise_errors=False)
    notes = tuple(sorted(walk.notes, key=lambda entry: entry.rel_path))
    return ScanResult(folder=start, notes=notes, errors=tuple(sorted(walk.errors)))


class _Walk:
    """The mutable state of one walk: folders still to list, notes found, errors met."""

    def __init__(self, root_abs: str, root_real: str) -> None:
        self.root_abs = root_abs
        self.root_real = root_real
        self.pending: list[str] = []
        self.notes: list[StatEntry] = []
        self.errors: list[tuple[str, str]] = []

    def list_folder(self, rel_dir: str, *, raise_errors: bool) -> None:
        try:
            with os.scandir(os.path.join(self.root_abs, rel_dir)) as entries:
                listed = list(entries)
        except OSError as exc:
            if raise_errors:
                raise
            self.errors.append((rel_dir, f"folder cannot be listed: {_describe(exc)}"))
            return
        for entry in listed:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                self.visit(entry, rel)
            except OSError as exc:
                self.errors.append((rel, _describe(exc)))

    def visit(self, entry: os.DirEntry[str], rel: str) -> None:
        if entry.is_symlink():
            self.visit_link(entry, rel)
        elif entry.is_dir(follow_symlinks=False):
            if not entry.name.startswith("."):
                self.pending.append(rel)
        elif classify(rel) == "note":
            self.add_note(rel, entry.stat(follow_symlinks=False))

    def visit_link(self, entry: os.DirEntry[str], rel: str) -> None:
        if entry.name.startswith("."):
            return  # hidden links are scratch: emacs locks `.#note.md` are dangling symlinks by design
        try:
            st = os.stat(entry.path)
        except FileNotFoundError:
            self.errors.append(
                (rel, f"broken symlink (to {os.readlink(entry.path)}); fix or remove the link")
            )
            return
        target = os.path.realpath(entry.path)
        is_dir = stat.S_ISDIR(st.st_mode)
        if not is_dir and classify(rel) != "note":
            return  # a linked image or PDF is none of our business, wherever it points
        if not is_inside(self.root_real, target):
            what = "folder" if is_dir else "note"
            self.errors.append(
                (
                    rel,
                    f"symlinked {what} points outside the vault ({target}); not followed. Move it into the vault",
                )
            )
        elif not is_dir:
            self.add_note(rel, st)

    def add_note(self, rel: str, st: os.stat_result) -> None:
        if stat.S_ISREG(st.st_mode):
            self.notes.append(StatEntry(rel, st.st_size, st.st_mtime_ns))
        else:
            self.errors.append((rel, "not a regular file (a pipe, socket or device); rename or remove it"))


def _start_folder(root: Path, folder: str | None) -> str:
    if not folder:
        return ""
    path = resolve_in_vault(root, folder)
    rel = to_rel(root, path)
    if any(part.startswith(".") for part in rel.split("/")):
        raise VaultError(f"{rel} is inside a hidden folder, which engrama never syncs; give a visible folder")
    if not path.is_dir():
        raise VaultError(
            f"{folder!r} is not a folder in the vault; give a vault-relative folder, e.g. Projects"
        )
    return rel


def _under(folder: str, rel_path: str) -> bool:
    return folder == "" or rel_path == folder or rel_path.startswith(folder + "/")


def _describe(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied; fix its permissions so engrama can read it"
    if exc.errno == errno.ELOOP:
        return "symlink loop; point the link at a real note or folder"
    return exc.strerror or str(exc)
