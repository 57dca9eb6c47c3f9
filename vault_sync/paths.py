"""Vault path rules: which paths a tool may name, and which files in the vault are notes.

Two jobs, kept apart on purpose:

- `resolve_in_vault` guards the edge where a path arrives from outside (an MCP tool argument). It refuses
  anything that would let a tool read or write outside the vault: absolute paths, `..` climbing out, and
  symlinks (of the file or of any parent folder) whose real path lies outside the vault's real path.
- `classify` decides what a vault-relative path *is* for the sync: a note, a note in Obsidian's trash (which
  counts as deleted), a sync tool's conflict copy of a note (reported, never synced as a note of its own), or
  something to ignore (dot-folders, non-Markdown files, editor temp and swap files, and our own temp files).

Conflict copies recognised by name (`conflict_original`), each a copy left beside the original note:

- Syncthing: `Note.sync-conflict-20240501-093000-ABCDEF1.md`;
- "conflicted copy" in parentheses: Dropbox (`Note (Ann's conflicted copy 2024-05-01).md`, also with ` (1)`),
  Google Drive for desktop, Nextcloud and ownCloud (`Note (conflicted copy 2024-05-01 093000).md`), and
  Obsidian Sync when its conflict resolution is set to create conflict files (`Note (Conflicted copy ...).md`);
- Seafile: `Note (SFConflict ann@example.com 2024-05-01-09-30-00).md`; older ownCloud: `Note_conflict-20240501-093000.md`;
- OneDrive "keep both": the computer's name appended, recognised for Windows' default names only
  (`Note-DESKTOP-AB12CD3.md`, `Note-LAPTOP-AB12CD3.md`); a custom computer name looks like any other name;
- `git mergetool`: the versions it lays beside the note while the person merges, `Note_BASE_6997.md`,
  `Note_LOCAL_6997.md`, `Note_REMOTE_6997.md`, `Note_BACKUP_6997.md` (the process id), deleted when the merge
  is done (review 22b: given ids of their own, one of them then carried its id into the merged note).

iCloud's conflict copies (`Note 2.md`) cannot be told from a note the person numbered, so they are notes.
Cloud placeholders (`cloud_placeholder_of`): iCloud replaces a note it evicted from the disk with a hidden
`.Note.md.icloud`; the note is still in the vault, only not downloaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from vault_sync.errors import PathOutsideVault

FileKind = Literal["note", "trash", "conflict", "ignored"]

TRASH_FOLDER = ".trash"  # Obsidian's "move to Obsidian trash" target, at the vault root
TEMP_PREFIX = ".engrama-tmp-"  # our temp files: hidden, so Obsidian and the watcher both skip them

_HINT = "give a path relative to the vault, e.g. Projects/Engrama.md"
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")  # C:\x, C:/x and the drive-relative C:x
_VIM_SWAP = re.compile(r"\.sw[a-px]$", re.IGNORECASE)  # vim counts down .swp, .swo, ... .swa; .swx probes
# Each names the original note's stem and extension; see the module docstring for the tools behind them.
_CONFLICT_NAMES = (
    re.compile(r"^(?P<stem>.+)\.sync-conflict-\d{8}-\d{6}-[A-Z0-9]{7}(?P<ext>\.md)$", re.IGNORECASE),
    re.compile(
        r"^(?P<stem>.+?) \([^()]*\bconflicted copy\b[^()]*(?:\(\d+\)[^()]*)?\)(?P<ext>\.md)$", re.IGNORECASE
    ),
    re.compile(r"^(?P<stem>.+?) \(SFConflict [^()]*\)(?P<ext>\.md)$", re.IGNORECASE),
    re.compile(r"^(?P<stem>.+?)_conflict-\d{8}-\d{6}(?P<ext>\.md)$", re.IGNORECASE),
    re.compile(r"^(?P<stem>.+)-(?:DESKTOP|LAPTOP)-[A-Z0-9]{7}(?P<ext>\.md)$"),
    re.compile(r"^(?P<stem>.+)_(?:BASE|LOCAL|REMOTE|BACKUP)_\d+(?P<ext>\.md)$"),
)
_ICLOUD_PLACEHOLDER = re.compile(r"^\.(?P<name>.+\.md)\.icloud$", re.IGNORECASE)


def resolve_in_vault(root: Path, rel: str) -> Path:
    """The absolute path that vault-relative `rel` names inside the vault at `root`; the file need not exist.

    Refuses with `PathOutsideVault`: absolute paths (POSIX `/x`, Windows `C:\\x`, `\\\\server\\share`), a `~`
    home path, `..` that climbs above the vault, NUL bytes, and any path whose real path — after following
    every symlink, parent folders included — lies outside the vault's real path.

    Backslashes count as separators (clients on Windows send them; Obsidian forbids them in names). `..` is
    resolved lexically, as Obsidian's vault paths are. The result sits under `root` as given, with symlinks not
    expanded, so `to_rel` maps it back to the same vault path.
    """
    parts = _relative_parts(rel)
    root_abs = Path(os.path.abspath(root))
    candidate = root_abs.joinpath(*parts)
    if not is_inside(os.path.realpath(root_abs), os.path.realpath(candidate)):
        raise PathOutsideVault(f"{rel!r} leads out of the vault through a symlink; {_HINT}")
    return candidate


def vault_path(root: Path, rel: str) -> str:
    """The vault path that `rel`, given from outside (a tool's argument), names as the sync knows its notes:
    refused as `resolve_in_vault` refuses, with separators, `.` and `..` resolved, and a folder on the way that
    is a symlink to another folder of the vault named by its real place. The walk and the watcher never enter a
    linked folder, so a note there is known at its real path only: taken in under the link's path it would be
    a second note with the same id (review 21c). The file itself is not followed: a link to a note is the
    link's path (`links_to_note`)."""
    path = resolve_in_vault(root, rel)
    if path == Path(os.path.abspath(root)):
        return ""
    return to_rel(root, os.path.join(os.path.realpath(path.parent), path.name))


def vault_folder(root: Path, folder: str) -> str:
    """The vault path of the folder `folder` names (given from outside), as `vault_path` names a note's: the
    folder itself followed too, when it is a link to another folder of the vault ("" for the vault)."""
    return to_rel(root, os.path.realpath(resolve_in_vault(root, folder)))


def to_rel(root: Path, abs_path: Path | str) -> str:
    """The vault-relative POSIX path of `abs_path` ("" for the vault root itself).

    Accepts paths under `root` as given or under its real path (a vault reached through a symlink).
    Raises `PathOutsideVault` for a path outside both.
    """
    path = os.path.abspath(abs_path)
    for base in (os.path.abspath(root), os.path.realpath(root)):
        if is_inside(base, path):
            return path[len(base) :].lstrip(os.sep).replace(os.sep, "/")
    raise PathOutsideVault(f"{abs_path} is not inside the vault at {root}")


def is_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """True when `path` is `root` or below it, comparing the strings as given (resolve symlinks first)."""
    root_s, path_s = os.fspath(root), os.fspath(path)
    # Compare whole components: /vault-old must not count as inside /vault.
    return path_s == root_s or path_s.startswith(root_s.rstrip(os.sep) + os.sep)


def classify(rel_path: str) -> FileKind:
    """What the sync makes of a vault-relative POSIX path: "note", "trash" or "ignored".

    A note is a `.md` file (any case) outside every dot-folder. A `.md` file under the root `.trash/` is
    "trash": Obsidian moved it there, so the note counts as deleted. Everything else is "ignored": other
    dot-folders (`.obsidian`, `.git`, `.engrama`), non-Markdown files, hidden files and editor scratch files.
    """
    *folders, name = rel_path.split("/")
    if is_scratch_name(name) or not name.lower().endswith(".md"):
        return "ignored"
    if folders and folders[0] == TRASH_FOLDER:
        return "trash"
    if any(folder.startswith(".") for folder in folders):
        return "ignored"
    if conflict_original(rel_path) is not None:
        return "conflict"
    return "note"


def links_to_note(root: str | os.PathLike[str], link: str | os.PathLike[str]) -> bool:
    """True when `link` (an absolute path) is a symlink to a file that is itself a note of the vault at
    `root`. Such a link is that note under a second name, not a note of its own: the sync knows the note at
    its real path, where the watcher sees it change (a second node for the link would share its id, and one
    of the two would be given a new one). Only a symlink costs more than one `lstat`."""
    if not os.path.islink(link):
        return False
    root_real, target = os.path.realpath(root), os.path.realpath(link)
    if not is_inside(root_real, target) or target == root_real or not os.path.isfile(target):
        return False
    return classify(Path(os.path.relpath(target, root_real)).as_posix()) == "note"


def listed_as(folder: str | os.PathLike[str], name: str) -> bool:
    """Whether `folder` lists an entry spelled exactly `name`.

    On a file system that ignores case or Unicode normalization (macOS and Windows by default), a name opens
    the file under any of its spellings: after `Atlas.md` was renamed `atlas.md`, `Atlas.md` still opens it.
    Only the folder's listing says which spelling the file has now. True when the folder cannot be listed (no
    sign of another spelling)."""
    try:
        return name in os.listdir(folder)
    except OSError:
        return True


def spelled_as_listed(root: str | os.PathLike[str], rel: str) -> bool:
    """Whether every part of vault path `rel` is spelled as its folder lists it (`listed_as`): False for a
    path that opens a file only because the file system ignores case or normalization (a note, or a folder
    above it, renamed to another spelling)."""
    folder = os.fspath(root)
    for part in rel.split("/"):
        if not listed_as(folder, part):
            return False
        folder = os.path.join(folder, part)
    return True


def conflict_original(rel_path: str) -> str | None:
    """The vault path of the note that `rel_path` is a sync tool's conflict copy of; None for any other path.

    Only the name is looked at: the original may be gone (the person kept the copy and deleted the note)."""
    folder, _, name = rel_path.rpartition("/")
    for pattern in _CONFLICT_NAMES:
        found = pattern.match(name)
        if found is not None:
            original = found["stem"] + found["ext"]
            return f"{folder}/{original}" if folder else original
    return None


def cloud_placeholder_of(name: str) -> str | None:
    """The note file name an iCloud placeholder file name stands for (`.Note.md.icloud` -> `Note.md`), else None."""
    found = _ICLOUD_PLACEHOLDER.match(name)
    return found["name"] if found is not None else None


def placeholder_name(name: str) -> str:
    """The name of the iCloud placeholder that stands for the note file `name` while it is not downloaded."""
    return f".{name}.icloud"


def is_scratch_name(name: str) -> bool:
    """True for file names that editors, sync tools and engrama use for temporary files.

    Hidden names (`.DS_Store`, emacs locks `.#x`, vim `.x.swp`, our `.engrama-tmp-*`), backups `x~`, vim's
    `4913` write probe, emacs auto-saves `#x#`, Office owner files `~$x`, and `.tmp` / `.temp` / vim swap
    suffixes. The watcher must ignore these, or every save in an editor would look like a new note.
    """
    lower = name.lower()
    return (
        name.startswith((".", "~$"))
        or name.endswith("~")
        or name == "4913"
        or (len(name) > 1 and name.startswith("#") and name.endswith("#"))
        or lower.endswith((".tmp", ".temp"))
        or _VIM_SWAP.search(name) is not None
    )


_SUM_CHARS = 16  # of a sha256 hex digest in a temp file's name: 64 bits, never a chance match
_NOTE_MARK = "n"  # before the short hash of the note's file name in a temp file's name


def make_temp_name(sums: Iterable[str] = (), note: str | None = None) -> str:
    """A fresh, unguessable temp file name that `classify` ignores and `is_engrama_temp` recognises.

    It carries what a clean-up after a crash needs to tell engrama's own bytes from a person's
    (`temp_name_parts`): the start of the sha256 hex digest of each version engrama knows the file may hold
    (what it writes, and the note's version a swap puts there), and a short hash of the note's file name.
    """
    parts = [secrets.token_hex(8), *(s[:_SUM_CHARS] for s in sums)]
    if note is not None:
        parts.append(_NOTE_MARK + name_hash(note))
    return f"{TEMP_PREFIX}{'-'.join(parts)}.tmp"


def is_engrama_temp(name: str) -> bool:
    """True for temp file names made by `make_temp_name` (e.g. left behind by a crash)."""
    return name.startswith(TEMP_PREFIX) and name.endswith(".tmp")


def temp_name_parts(name: str) -> tuple[frozenset[str], str | None]:
    """What `make_temp_name` put in `name`: the digest starts it carries and the note's name hash (None when
    it names none: a temp file an earlier version left)."""
    parts = name[len(TEMP_PREFIX) : -len(".tmp")].split("-")[1:]
    sums = frozenset(p for p in parts if len(p) == _SUM_CHARS and _is_hex(p))
    notes = [p[1:] for p in parts if p.startswith(_NOTE_MARK) and _is_hex(p[1:])]
    return sums, notes[0] if notes else None


def sum_in_name(digest: str) -> str:
    """The part of a sha256 hex digest a temp file's name carries."""
    return digest[:_SUM_CHARS]


def name_hash(name: str) -> str:
    """A short hash of a file name, for a temp file's name to say which note it belongs to."""
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _relative_parts(rel: str) -> list[str]:
    """The components of a tool-given path after lexical clean-up; refuses the forms that cannot be relative."""
    if "\x00" in rel:
        raise PathOutsideVault(f"{rel!r} contains a NUL byte; {_HINT}")
    try:
        os.fsencode(rel)
    except UnicodeEncodeError:
        raise PathOutsideVault(f"{rel!r} cannot be a file name on this system; {_HINT}") from None
    text = rel.replace("\\", "/")
    if text.startswith("/") or _WINDOWS_DRIVE.match(text):
        raise PathOutsideVault(f"{rel!r} is an absolute path; {_HINT}")
    if text == "~" or text.startswith("~/"):
        raise PathOutsideVault(f"{rel!r} is a home-folder path; {_HINT}")
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
        else:
            raise PathOutsideVault(f"{rel!r} climbs out of the vault with '..'; {_HINT}")
    return parts
