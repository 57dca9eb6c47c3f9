"""Check the shape of one profile or module file and turn it into plain entries.

This module looks at a single file only; whether the labels a relation names exist is decided after
composition (`profiles.loader`), because a module may rely on labels from base or from another module.

File shape (a module has no `extends`, `modules` or `decay_rate`):

    name: developer
    description: ...
    extends: base              # a profile name or a path relative to this file
    modules: [hacking]         # modules always loaded with this profile
    decay_rate: 0.005          # default per-day confidence decay for labels without their own
    labels:
      Library: {description: ..., properties: [version], folder: Libraries, decay_rate: 0.01}
    relations:
      DEPENDS_ON: {description: ..., from: [Project, Library], to: [Library]}   # "*" = any label
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from profiles.errors import ProfileError
from profiles.schema import WILDCARD, normalise_relation_name

_TOP_KEYS = {
    "profile": ("name", "description", "extends", "modules", "decay_rate", "labels", "relations"),
    "module": ("name", "description", "labels", "relations"),
}
_LABEL_KEYS = ("description", "properties", "folder", "decay_rate")
_RELATION_KEYS = ("description", "from", "to")
_LABEL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_RELATION_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
# Frontmatter keys engrama-vault itself owns (DESIGN §3); a label property of that name would clash.
_RESERVED_PROPERTIES = ("engrama_id", "type", "relations")


@dataclass(frozen=True)
class LabelEntry:
    """A label as one file declares it; None means "this file does not say"."""

    name: str
    description: str | None
    properties: tuple[str, ...]
    folder: str | None
    decay_rate: float | None


@dataclass(frozen=True)
class RelationEntry:
    """A relation as one file declares it, endpoints spelled as written."""

    name: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    description: str | None


@dataclass(frozen=True)
class ProfileFile:
    """One parsed profile or module file."""

    display: str
    directory: Path | None
    name: str
    description: str
    extends: str | None
    modules: tuple[str, ...]
    decay_rate: float | None
    labels: tuple[LabelEntry, ...]
    relations: tuple[RelationEntry, ...]


def parse_profile_file(data: Any, display: str, kind: str, directory: Path | None) -> ProfileFile:
    """Validate the YAML data of one `kind` ("profile" or "module") file named `display`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ProfileError(f"{display}: the file must be a mapping with `labels:` and `relations:` keys")
    _check_keys(data, _TOP_KEYS[kind], display, f"at the top level of a {kind}")
    name = _optional_str(data, "name", display, "the file") or PurePosixPath(display.replace("\\", "/")).stem
    extends = _optional_str(data, "extends", display, "the file")
    modules = data.get("modules") or []
    if not isinstance(modules, list) or not all(isinstance(m, str) and m.strip() for m in modules):
        raise ProfileError(f"{display}: `modules` must be a list of module names, e.g. [hacking, ai]")
    return ProfileFile(
        display=display,
        directory=directory,
        name=name,
        description=_optional_str(data, "description", display, "the file") or "",
        extends=extends,
        modules=tuple(m.strip() for m in modules),
        decay_rate=_decay_rate(data, display, "the file"),
        labels=tuple(_label(n, v, display) for n, v in _section(data, "labels", display).items()),
        relations=tuple(_relation(n, v, display) for n, v in _section(data, "relations", display).items()),
    )


def _section(data: dict, key: str, display: str) -> dict:
    section = data.get(key) or {}
    if not isinstance(section, dict):
        raise ProfileError(f"{display}: `{key}` must be a mapping of names to definitions")
    return section


def _label(name: Any, value: Any, display: str) -> LabelEntry:
    if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name):
        raise ProfileError(
            f"{display}: label name {name!r} is invalid; use a letter then letters, digits or _ (e.g. Project)"
        )
    where = f"label {name}"
    value = _entry(value, display, where, _LABEL_KEYS)
    return LabelEntry(
        name=name,
        description=_optional_str(value, "description", display, where),
        properties=_properties(value.get("properties"), display, where),
        folder=_folder(value.get("folder"), display, where),
        decay_rate=_decay_rate(value, display, where),
    )


def _relation(name: Any, value: Any, display: str) -> RelationEntry:
    canonical = normalise_relation_name(name) if isinstance(name, str) else ""
    if not _RELATION_NAME.fullmatch(canonical):
        raise ProfileError(
            f"{display}: relation name {name!r} is invalid; use letters, digits and _ (e.g. DEPENDS_ON)"
        )
    where = f"relation {canonical}"
    value = _entry(value, display, where, _RELATION_KEYS)
    return RelationEntry(
        name=canonical,
        sources=_endpoints(value.get("from"), display, where, "from"),
        targets=_endpoints(value.get("to"), display, where, "to"),
        description=_optional_str(value, "description", display, where),
    )


def _entry(value: Any, display: str, where: str, allowed: tuple[str, ...]) -> dict:
    # `Course:` with nothing under it is a bare re-declaration, which is harmless.
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProfileError(f"{display}: {where} must be a mapping with keys {', '.join(allowed)}")
    _check_keys(value, allowed, display, f"in {where}")
    return value


def _check_keys(data: dict, allowed: tuple[str, ...], display: str, where: str) -> None:
    # Unknown keys are refused so that a typo (`propertis:`) is reported instead of silently ignored.
    for key in data:
        if key not in allowed:
            raise ProfileError(f"{display}: unknown key {key!r} {where}; allowed keys: {', '.join(allowed)}")


def _optional_str(data: dict, key: str, display: str, where: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ProfileError(f"{display}: `{key}` of {where} must be a non-empty string")
    return value.strip()


def _properties(value: Any, display: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(p, str) and p.strip() for p in value):
        raise ProfileError(f"{display}: `properties` of {where} must be a list of names, e.g. [status, url]")
    for prop in value:
        if prop.strip() in _RESERVED_PROPERTIES:
            raise ProfileError(
                f"{display}: {where} lists property '{prop}', which engrama-vault reserves; rename it"
            )
    return tuple(dict.fromkeys(p.strip() for p in value))


def _folder(value: Any, display: str, where: str) -> str | None:
    if value is None:
        return None
    # One plain folder at the vault root: untyped notes are labelled by their first path segment,
    # and a hidden folder (.obsidian, .trash) is never a place for notes.
    bad = not isinstance(value, str) or not value.strip() or value.strip().startswith(".")
    if bad or any(c in value for c in "/\\:"):
        raise ProfileError(
            f"{display}: `folder` of {where} must be one folder name at the vault root, e.g. Projects"
        )
    return value.strip()


def _decay_rate(data: dict, display: str, where: str) -> float | None:
    value = data.get("decay_rate")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ProfileError(f"{display}: `decay_rate` of {where} must be a number from 0 to 1 (per day)")
    return float(value)


def _endpoints(value: Any, display: str, where: str, key: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise ProfileError(f'{display}: {where} needs `{key}:` — a label, a list of labels, or "*" for any')
    for item in items:
        if item.strip() != WILDCARD and not _LABEL_NAME.fullmatch(item.strip()):
            raise ProfileError(f"{display}: {where} `{key}` has invalid label name {item!r}")
    return tuple(dict.fromkeys(i.strip() for i in items))
