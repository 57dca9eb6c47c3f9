"""The person's note templates: Markdown files in the vault that are not notes (DESIGN.md section 2, "Ignored").

Obsidian keeps templates as ordinary `.md` files, in a folder the person chooses, and copies a template's text,
frontmatter included, into every note made from it. A template is therefore not knowledge to remember, and
nothing may be written into it: an `engrama_id` line in a template would be copied into every note made from
it (each then a copy to be given its own id), and the template itself (`{{title}}`, `<% tp.date.now() %>`)
would rank in search and feed reflect. So the sync treats the files below are not notes: never indexed,
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
template). Unreadable or malformed settings count as naming nothing: Obsidian rewrites them as a whole, and the
next change of one is read again (`rules` compares each file's size and modification time).
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
        if not self.folders and not self.files:
            return False
        key = _key(rel)
        if key in self.files:
            return True
        parts = key.split("/")
        return any("/".join(parts[:depth]) in self.folders for depth in range(1, len(parts)))

    def holds_folder(self, rel: str) -> bool:
        """Whether the vault folder `rel` is a template folder or inside one (its notes are all templates)."""
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


def _read_json(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            return None
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.debug("vault setting %s not read: %s", path, exc)
        return None


def read_templates(root: Path | str) -> Templates:
    """The templates the settings of the vault at `root` name (see the module docstring)."""
    config = Path(root) / CONFIG_FOLDER
    folders: set[str] = set()
    files: set[str] = set()
    core = _read_json(config / CORE)
    if isinstance(core, dict) and (folder := _clean(core.get("folder"), note=False)):
        folders.add(folder)
    templater = _read_json(config / TEMPLATER)
    if isinstance(templater, dict) and (folder := _clean(templater.get("templates_folder"), note=False)):
        folders.add(folder)
    daily = _read_json(config / DAILY)
    if isinstance(daily, dict) and (file := _clean(daily.get("template"), note=True)):
        files.add(file)
    periodic = _read_json(config / PERIODIC)
    if isinstance(periodic, dict):
        for period in periodic.values():
            if isinstance(period, dict) and (file := _clean(period.get("template"), note=True)):
                files.add(file)
    return Templates(frozenset(folders), frozenset(files))


_cache: dict[str, tuple[tuple[tuple[int, int] | None, ...], Templates]] = {}
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
    """`read_templates(root)`, read again only when one of the settings files changed (four stats a call):
    cheap enough for every walk and every batch of reconciled notes."""
    key = os.path.abspath(root)
    signature = _signature(root)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == signature:
        return cached[1]
    found = read_templates(root) if any(mark is not None for mark in signature) else NONE
    with _cache_lock:
        previous = _cache.get(key)
        _cache[key] = (signature, found)
    if previous is not None and previous[1] != found:
        log.info("the vault's templates are now: %s", found.describe())
    return found


def is_settings_path(rel: str) -> bool:
    """Whether the vault-relative path `rel` is one of the settings that name templates."""
    return rel in SETTINGS
