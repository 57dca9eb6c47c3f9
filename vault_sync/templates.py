"""The person's note templates: Markdown files in the vault that are not notes (DESIGN.md section 2, "Ignored").

Obsidian keeps templates as ordinary `.md` files, in a folder the person chooses, and copies a template's text,
frontmatter included, into every note made from it. A template is therefore not knowledge to remember, and
nothing may be written into it: an `engrama_id` line in a template would be copied into every note made from
it (each then a copy to be given its own id), and the template itself (`{{title}}`, `<% tp.date.now() %>`)
would rank in search and feed reflect. So the sync treats the files named below as no notes: never indexed,
never given an id line, never written by a tool; a template indexed before (by an older version, or before
its folder was named a templates folder) is archived like a note that went, and its graph history kept.

Where the vault's settings name them (`.obsidian/`, Obsidian's default configuration folder):

- the core Templates plugin's folder: `templates.json`, key `folder`;
- the Templater plugin's folder: `plugins/templater-obsidian/data.json`, key `templates_folder`;
- the daily-note template file: `daily-notes.json`, key `template`;
- the Periodic Notes plugin's template files: `plugins/periodic-notes/data.json`, the `template` key of each
  period (`daily`, `weekly`, ...).

Paths compare composed (NFC) and case-folded, as a folder named in a setting is matched on macOS and Windows.
A setting naming the vault root itself, or leading out of the vault, is ignored (it would make every note a
template). A settings file caught being written (empty, half-written, or deleted and not yet created again, as git
does) names what it named when last read (`rules`); one never read well names nothing.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CONFIG_FOLDER = ".obsidian"
CORE = "templates.json"
TEMPLATER = "plugins/templater-obsidian/data.json"
DAILY = "daily-notes.json"
PERIODIC = "plugins/periodic-notes/data.json"
FOLDER_KEYS = {CORE: "folder", TEMPLATER: "templates_folder"}  # the other two name template files
SETTINGS = tuple(f"{CONFIG_FOLDER}/{name}" for name in (CORE, TEMPLATER, DAILY, PERIODIC))
MAX_SETTINGS_BYTES = 1 << 20  # a settings file is a few hundred bytes; past this it is not one


def _key(rel: str) -> str:
    return unicodedata.normalize("NFC", rel).casefold()


@dataclass(frozen=True)
class Templates:
    """The template folders and files of one vault (vault-relative, each as `_key` gives it)."""

    folders: frozenset[str] = frozenset()
    files: frozenset[str] = frozenset()

    def holds(self, rel: str) -> bool:
        """Whether the vault-relative path `rel` is a template (in a template folder, or a template file)."""
        folder, slash, _ = rel.rpartition("/")
        return self.holds_file(rel) or (bool(slash) and self.holds_folder(folder))

    def holds_file(self, rel: str) -> bool:
        """Whether `rel` is a template file the settings name one by one (the walk never enters the folders)."""
        return bool(self.files) and _key(rel) in self.files

    def holds_folder(self, rel: str) -> bool:
        """Whether the vault folder `rel` is a template folder or inside one (its notes are all templates)."""
        if not self.folders:
            return False
        parts = _key(rel).split("/")
        return any("/".join(parts[:depth]) in self.folders for depth in range(1, len(parts) + 1))

    def describe(self) -> str:
        return ", ".join(sorted(self.folders | self.files)) or "none"


NONE = Templates()


def _clean(value: Any, *, note: bool) -> str | None:
    """A path from a setting as a vault-relative key, or None for an empty, root or out-of-vault one. `note`:
    a template file, named with or without `.md`."""
    if not isinstance(value, str):
        return None
    parts = [p for p in value.replace("\\", "/").strip().split("/") if p not in ("", ".")]
    if not parts or ".." in parts or value.strip().startswith("~"):
        return None
    rel = "/".join(parts)
    if note and not rel.lower().endswith(".md"):
        rel += ".md"
    return _key(rel)


_UNREADABLE = object()  # a settings file that is there but cannot be read as a JSON object right now
Named = tuple[frozenset[str], frozenset[str]]  # (folders, files) one settings file names


def _read_json(path: Path) -> Any:
    """The file's JSON object; None when there is no such file; `_UNREADABLE` when it is there but is not (yet)
    one: Obsidian and git write a settings file by truncating or replacing it, so a reader can meet it empty
    or half-written."""
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            return _UNREADABLE
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.debug("vault setting %s not read now: %s", path, exc)
        return _UNREADABLE
    return data if isinstance(data, dict) else _UNREADABLE


def _named(rel: str, data: dict[str, Any]) -> Named:
    """What one settings file (`rel`, one of SETTINGS) names: its templates folder, or its template files."""
    name = rel.removeprefix(f"{CONFIG_FOLDER}/")
    if name in FOLDER_KEYS:
        folder = _clean(data.get(FOLDER_KEYS[name]), note=False)
        return frozenset({folder} if folder else ()), frozenset()
    periods = data.values() if name == PERIODIC else [data]
    files = {_clean(p.get("template"), note=True) for p in periods if isinstance(p, dict)}
    return frozenset(), frozenset(f for f in files if f)


def _readings(root: Path | str, kept: dict[str, Named]) -> dict[str, Named]:
    """What each settings file names now. One that cannot be read now (half-written, or gone: git replaces a
    file by deleting and creating it) keeps what it named when last read in this process (`kept`): a
    templates folder must not turn into notes, and receive id lines, for the moment a file is being saved."""
    found: dict[str, Named] = {}
    for rel in SETTINGS:
        data = _read_json(Path(root) / rel)
        if isinstance(data, dict):
            found[rel] = _named(rel, data)
        elif rel in kept:
            found[rel] = kept[rel]
    return found


def _union(readings: dict[str, Named]) -> Templates:
    folders = frozenset(f for named in readings.values() for f in named[0])
    files = frozenset(f for named in readings.values() for f in named[1])
    return Templates(folders, files) if folders or files else NONE


def read_templates(root: Path | str) -> Templates:
    """The templates the settings of the vault at `root` name as read now (see the module docstring)."""
    return _union(_readings(root, {}))


# Per vault root: the settings files' signature, what each file named when last read, and their union.
_cache: dict[str, tuple[tuple[tuple[int, int] | None, ...], dict[str, Named], Templates]] = {}
_cache_lock = threading.Lock()


def _signature(root: Path | str) -> tuple[tuple[int, int] | None, ...]:
    marks: list[tuple[int, int] | None] = []
    for rel in SETTINGS:
        try:
            st = os.stat(os.path.join(root, rel))
            marks.append((st.st_size, st.st_mtime_ns))
        except OSError:
            marks.append(None)
    return tuple(marks)


def rules(root: Path | str) -> Templates:
    """The vault's templates, read again only when one of the settings files changed (four stats a call):
    cheap enough for every walk and every batch of reconciled notes. A settings file that cannot be read now
    (being written, or gone) names what it named when this process last read it (`_readings`); a process that
    never read it before takes it as naming nothing."""
    key = os.path.abspath(root)
    signature = _signature(root)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == signature:
        return cached[2]
    readings = _readings(root, cached[1] if cached is not None else {})
    found = _union(readings)
    with _cache_lock:
        _cache[key] = (signature, readings, found)
    if cached is not None and cached[2] != found:
        log.info("the vault's templates are now: %s", found.describe())
    return found


def is_settings_path(rel: str) -> bool:
    """Whether the vault-relative path `rel` is one of the settings that name templates."""
    return rel in SETTINGS
