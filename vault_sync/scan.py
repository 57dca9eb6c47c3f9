"""Walk the vault and list its notes with size and mtime: the cheap first pass of a reconcile.

The walk uses `os.scandir` (one `stat` per note, none per folder), so 10,000 notes take a small fraction
of a second. It never leaves the vault and never loops:

- dot-folders (`.obsidian`, `.git`, `.trash`, `.engrama`, ...) are not entered at all, nor are the folders the
  vault's settings name for templates; a template file named there is not listed (`vault_sync.templates`);
- a symlinked *file* whose real path is inside the vault counts as a note at the link's path (the same bytes
  then also appear at the target's own path, as Obsidian shows them too);
- a symlinked *folder* inside the vault is not followed: its notes are already listed at their real path, and
  following it could list them twice or loop forever;
- symlinks leading out of the vault, broken links and link loops are reported in `errors`, not followed;
- a folder or file that cannot be listed or stat'ed is reported in `errors` and the walk goes on.

A reconcile must not archive a known note just because the scan did not list it: use `ScanResult.covers`,
which is False for paths outside the scanned folder, below anything that was reported as an error, and for
notes that are in the vault only as a cloud placeholder. A note missed some other way (one path at a time, as
the watcher reports them) is archived only when `presence` says it is really gone: the vault root and every
folder on the way to it can be listed. A missing root (an unplugged drive, an unmounted share) archives nothing.

Cloud placeholders, which mean "the note is there but not downloaded", are listed in `placeholders`, never
read and never archived: iCloud's hidden `.Note.md.icloud` (beside no `Note.md`), and files the OS marks as
not on the disk — macOS's dataless files (`SF_DATALESS`, how iCloud Drive, Dropbox and OneDrive keep
online-only files there) and Windows' offline / recall-on-access files (OneDrive, Dropbox and Google Drive
on-demand files). Reading those would make the cloud client download the whole vault, or fail offline.
Placeholders that look like ordinary files (a zero-byte stub some clients write) cannot be told apart.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vault_sync.errors import VaultError
from vault_sync.paths import (
    classify,
    cloud_placeholder_of,
    conflict_original,
    is_inside,
    links_to_note,
    listed_as,
    placeholder_name,
    resolve_in_vault,
    to_rel,
)
from vault_sync.readers import NOT_A_FILE
from vault_sync.templates import NONE as NO_TEMPLATES
from vault_sync.templates import Templates
from vault_sync.templates import rules as template_rules

_SF_DATALESS = 0x40000000  # macOS st_flags: the file's data is in the cloud, not on the disk (sys/stat.h)
# Windows st_file_attributes: OFFLINE (0x1000), RECALL_ON_OPEN (0x40000), RECALL_ON_DATA_ACCESS (0x400000).
_WINDOWS_NOT_LOCAL = 0x1000 | 0x40000 | 0x400000


@dataclass(frozen=True)
class StatEntry:
    """One note file as the walk saw it (for a symlinked note: the target's size and mtime)."""

    rel_path: str  # vault-relative, POSIX separators
    size: int
    mtime_ns: int
    ino: int = 0  # its inode number (0: unknown)


@dataclass(frozen=True)
class ScanResult:
    """The notes under `folder` ("" = the whole vault), sorted by path, and what could not be scanned."""

    folder: str
    notes: tuple[StatEntry, ...]
    errors: tuple[tuple[str, str], ...]  # (vault-relative path, what went wrong and what to do)
    placeholders: tuple[str, ...] = ()  # notes in the vault only as a cloud placeholder (not downloaded)
    conflicts: tuple[tuple[str, str], ...] = ()  # (conflict copy, the note it is a copy of)

    def covers(self, rel_path: str) -> bool:
        """True when this scan can vouch for `rel_path`: absent from `notes` then really means gone."""
        if not _under(self.folder, rel_path) or rel_path in self.placeholders:
            return False
        return not any(_under(path, rel_path) for path, _ in self.errors)


def scan_vault(root: Path, folder: str | None = None) -> ScanResult:
    """List every note in the vault at `root`, or below the vault-relative `folder`.

    Raises `PathOutsideVault` for a folder outside the vault and `VaultError` when the folder is hidden, is not
    a folder, or cannot be listed at all (then nothing is known, and a reconcile must not archive anything).
    Problems below the start folder are reported in `ScanResult.errors` instead.
    """
    problem = _listing_problem(os.path.abspath(root))
    if problem is not None:
        raise VaultError(_root_message(root, problem))
    start = _start_folder(root, folder)
    templates = template_rules(root)
    walk = _Walk(os.path.abspath(root), os.path.realpath(root), templates)
    try:
        if not (start and templates.holds_folder(start)):  # a templates folder holds no notes
            walk.list_folder(start, raise_errors=True)
    except OSError as exc:
        raise VaultError(f"cannot list the vault folder {start or root!s}: {_describe(exc)}") from None
    while walk.pending:
        walk.list_folder(walk.pending.pop(), raise_errors=False)
    notes = tuple(sorted(walk.notes, key=lambda entry: entry.rel_path))
    present = {entry.rel_path for entry in notes}
    return ScanResult(
        folder=start,
        notes=notes,
        errors=tuple(sorted(walk.errors)),
        placeholders=tuple(sorted(set(walk.placeholders) - present)),
        conflicts=tuple(sorted(walk.conflicts)),
    )


def is_config_folder(name: str) -> bool:
    """Whether a folder of this name holds an Obsidian vault's settings: `.obsidian`, or the config folder a
    device was set to use instead (Obsidian lets each device override it; the name starts with `.obsidian` by
    habit, as `.obsidian-mobile`)."""
    return name.startswith(".obsidian")


def is_a_vault(root: Path) -> bool:
    """Whether the folder holds Obsidian's settings (a symlink to a settings folder counts). True when it cannot
    be listed now: that is no sign of a folder above a vault, and `root_problem` tells what it is."""
    try:
        with os.scandir(root) as entries:
            return any(is_config_folder(e.name) and e.is_dir() for e in entries)
    except OSError:
        return True


def vaults_inside(root: Path, enough: int = 3) -> list[str]:
    """The folders below `root` that are Obsidian vaults of their own (up to `enough` of them; the walk stops
    there): what tells that `root` is the folder above the vault a person meant. Walks folders as `scan_vault`
    does (no dot-folder or symlinked folder is entered); a folder that cannot be listed is passed over."""
    found: list[str] = []
    pending = [""]
    while pending and len(found) < enough:
        rel_dir = pending.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as listed:
                entries = list(listed)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if is_config_folder(entry.name) and rel_dir and entry.is_dir():
                    found.append(rel_dir)
                elif not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                    pending.append(rel)
            except OSError:
                continue
    return sorted(set(found))


def vaults_inside_message(root: Path, vaults: Sequence[str]) -> str:
    """What to tell a person whose vault folder is no Obsidian vault but holds one or more (`vaults`)."""
    named = ", ".join(str(root / v) for v in vaults)
    return (
        f"{root} is not an Obsidian vault (it holds no .obsidian folder), but it holds one: {named}. Nothing "
        f"was synced and no note was written to. Point --vault (or ENGRAMA_VAULT) at the vault you mean; to "
        f"keep every note under {root} as one vault, open {root} as a vault in Obsidian once (it then holds "
        ".obsidian)"
    )


def utf8_name(name: str) -> bool:
    """Whether a name read from the file system is valid UTF-8 (Python keeps undecodable bytes as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(rel: str) -> str:
    """`rel` printable and storable: undecodable bytes of its name as `\\xNN`."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class Presence:
    """What the vault can say about a path that a reconcile expected and did not find."""

    state: Literal["gone", "there", "unseen"]  # unseen: the vault cannot tell (see `reason`)
    reason: str = ""


def presence(
    root: Path, rel: str, *, still_a_note: bool = True, folder: bool = False, emptied: bool = False
) -> Presence:
    """Whether the note or folder at vault path `rel` is really gone, before anything is archived for it.

    "gone" only when the vault root is a folder that can be listed and holds something, every folder on the
    way to `rel` that still exists can be listed too, and the first missing part is really missing (not found,
    or a file where a folder was). "unseen" for everything else: the root missing (an unplugged drive, an
    unmounted share), a folder that cannot be listed, an I/O or permission error, a broken symlink, or an iCloud placeholder
    standing for the note. "there" when the path is (again) in the vault; with `still_a_note=False` (the
    path no longer names a note, e.g. it is now recognised as a conflict copy), or when it is a symlink to
    another note of the vault (`links_to_note`), the file itself may stay.
    With `folder=True`, `rel` names a folder: "there" only for a folder that can be listed, "gone" for a file;
    without, `rel` names a note: "gone" for a folder. `emptied`: the person confirmed they emptied the vault
    folder, so a folder holding nothing at all is no unmounted share.
    """
    root_abs = os.path.abspath(root)
    # The path was a note or folder of the vault: a vault folder holding nothing at all now (not even
    # `.obsidian`) is the empty mount point of a share or drive that is not mounted (review 19d: a note re-read
    # after an unmount was archived, and came back as another node).
    problem = root_problem(root, holds_notes=not emptied)
    if problem is not None:
        return Presence("unseen", problem)
    parent, parts = root_abs, rel.split("/")
    for depth, part in enumerate(parts):
        path, shown, last = os.path.join(parent, part), "/".join(parts[: depth + 1]), depth == len(parts) - 1
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            if os.path.lexists(path):
                return Presence("unseen", f"{shown} is a broken symlink; fix or remove the link")
            if last and os.path.lexists(os.path.join(parent, placeholder_name(part))):
                return Presence("unseen", _NOT_DOWNLOADED)
            return Presence("gone")
        except OSError as exc:
            return Presence("unseen", f"{shown} cannot be read: {_describe(exc)}")
        if not listed_as(parent, part):  # only another spelling is there (macOS, Windows): this one is gone
            return Presence("gone")
        if last and not folder:  # a link to another note of the vault is that note, not one of its own
            if stat.S_ISDIR(st.st_mode):
                return Presence("gone")  # a folder took the note's name: the note and its text are gone
            note = still_a_note and not links_to_note(root_abs, path)
            return Presence("there") if note else Presence("gone")
        if not stat.S_ISDIR(st.st_mode):
            return Presence("gone")  # a file where the folder was: the folder and all it held are gone
        problem = _listing_problem(path)
        if problem is not None:
            return Presence("unseen", f"folder {shown} {problem}")
        parent = path
    return Presence("there") if folder else Presence("gone")


_NOT_DOWNLOADED = (
    "only its cloud placeholder is in the vault (not downloaded); download it (e.g. Finder: Download Now) "
    "and it syncs again"
)


def _listing_problem(path: str, *, empty_is_a_problem: bool = False) -> str | None:
    """None when the folder at `path` can be listed (and, with `empty_is_a_problem`, holds something), else
    what is wrong with it (opening it is enough)."""
    try:
        with os.scandir(path) as entries:
            return "is empty" if empty_is_a_problem and next(entries, None) is None else None
    except FileNotFoundError:
        return "is missing"
    except NotADirectoryError:
        return "is not a folder"
    except OSError as exc:
        return f"cannot be listed: {_describe(exc)}"


def vault_is_empty(root: Path) -> bool:
    """Whether the vault folder holds nothing at all (not even `.obsidian`): the mount point of a share or
    drive that is not mounted, when the graph knows notes there."""
    return _listing_problem(os.path.abspath(root), empty_is_a_problem=True) == "is empty"


def root_problem(root: Path, *, holds_notes: bool) -> str | None:
    """What says the vault is not all there, or None: its root missing or unreadable (a drive unplugged, a
    share not mounted), or, when it should hold notes (`holds_notes`: the graph knows some), holding nothing
    at all, as the empty mount point of a share that is not mounted does (an Obsidian vault holds `.obsidian`
    at least). Nothing is archived and no note written while it says so."""
    problem = _listing_problem(os.path.abspath(root), empty_is_a_problem=holds_notes)
    return None if problem is None else _root_message(root, problem)


def _root_message(root: Path, problem: str) -> str:
    hint = (
        "is it on a drive that is unplugged, or a share that is not mounted? Nothing was synced or "
        "archived; reconnect it, or point --vault / ENGRAMA_VAULT at the vault"
    )
    return f"the vault folder {root} {problem}: {hint}"


class _Walk:
    """The mutable state of one walk: folders still to list, notes found, errors met."""

    def __init__(self, root_abs: str, root_real: str, templates: Templates = NO_TEMPLATES) -> None:
        self.root_abs = root_abs
        self.root_real = root_real
        self.templates = templates
        self.pending: list[str] = []
        self.notes: list[StatEntry] = []
        self.errors: list[tuple[str, str]] = []
        self.placeholders: list[str] = []
        self.conflicts: list[tuple[str, str]] = []

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
                if not utf8_name(entry.name):
                    self.misnamed(entry, rel)
                else:
                    self.visit(entry, rel)
            except OSError as exc:
                self.errors.append((rel, _describe(exc)))

    def misnamed(self, entry: os.DirEntry[str], rel: str) -> None:
        """A note or folder whose name is not UTF-8 (legal on Linux: an archive unpacked from an old Windows or Mac
        system). Obsidian cannot show it and no path of it can be stored or sent, so it is reported for the person
        to rename, and the rest of the vault syncs (a folder of that name is not entered)."""
        if entry.name.startswith(".") or not (
            entry.name.lower().endswith(".md") or entry.is_dir(follow_symlinks=False)
        ):
            return  # hidden, or not a note: none of our business, as for any other name
        what = "folder" if entry.is_dir(follow_symlinks=False) else "note"
        self.errors.append(
            (
                shown_path(rel),
                f"the {what}'s name is not valid UTF-8; rename it (Obsidian cannot open it either)",
            )
        )

    def visit(self, entry: os.DirEntry[str], rel: str) -> None:
        if entry.is_symlink():
            self.visit_link(entry, rel)
        elif entry.is_dir(follow_symlinks=False):
            if not entry.name.startswith(".") and not self.templates.holds_folder(rel):
                self.pending.append(rel)
        elif self.templates.holds_file(rel):
            return  # a template file the settings name: not a note (their folders are never entered)
        elif (kind := classify(rel)) == "note":
            self.add_note(rel, entry.stat(follow_symlinks=False))
        elif kind == "conflict":
            self.conflicts.append((rel, conflict_original(rel) or rel))
        elif (name := cloud_placeholder_of(entry.name)) is not None:
            note = rel[: -len(entry.name)] + name
            if classify(note) == "note":
                self.placeholders.append(note)

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
        if not is_dir and (classify(rel) != "note" or self.templates.holds(rel)):
            return  # a linked image or PDF is none of our business, wherever it points
        if not is_inside(self.root_real, target):
            what = "folder" if is_dir else "note"
            self.errors.append(
                (
                    rel,
                    f"symlinked {what} points outside the vault ({target}); not followed. Move it into the vault",
                )
            )
        elif not is_dir and not links_to_note(self.root_real, entry.path):
            self.add_note(rel, st)  # a link to a file no other path of the vault lists as a note

    def add_note(self, rel: str, st: os.stat_result) -> None:
        if stat.S_ISREG(st.st_mode) and not_on_disk(st):
            self.placeholders.append(rel)
        elif stat.S_ISREG(st.st_mode):
            self.notes.append(StatEntry(rel, st.st_size, st.st_mtime_ns, st.st_ino))
        else:
            self.errors.append((rel, NOT_A_FILE))


def not_on_disk(st: os.stat_result) -> bool:
    """True for a file the OS marks as kept in the cloud only (macOS dataless, Windows offline/recall)."""
    flags = getattr(st, "st_flags", 0) or 0
    attributes = getattr(st, "st_file_attributes", 0) or 0
    return bool(flags & _SF_DATALESS or attributes & _WINDOWS_NOT_LOCAL)


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
