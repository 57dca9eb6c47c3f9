"""Checking what a tool call names against the active profile: labels, relation types, names, properties.

Every check answers with the profile's canonical spelling (so it can be stored as is) or raises a
`ServiceError` whose message lists what would have been accepted.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from profiles import WILDCARD, Profile
from server.services.errors import RelationNotAllowed, ServiceError, UnknownLabel, UnknownRelation
from vault_sync.names import canonical, visible

MAX_NAME_CHARS = 200
MAX_PROPERTIES = 50
MAX_VALUE_CHARS = 10_000
# Longer keys are written by YAML as `? key` (a complex key, from 128 characters), a layout no line-by-line
# edit can keep: the note could not be edited by a tool again (review 20c).
MAX_KEY_CHARS = 100
# C0 control characters but tab, line feed, carriage return and form feed: a NUL written into a note makes it
# binary to every reader (engrama's too: the note could then never be read or written again), the others are
# invisible.
_CONTROLS = frozenset(chr(c) for c in range(32) if chr(c) not in "\t\n\r\f")
# What may not be in one line of YAML or a heading: C0 and C1 controls but tab, and every character that
# breaks a line for YAML or Python (`\x85`, U+2028, U+2029 too: a property name holding one is written as a
# `? key` complex key, which no line-by-line edit keeps; review 20d).
_NOT_IN_A_LINE = frozenset(
    [chr(c) for c in (*range(32), *range(0x7F, 0xA0)) if chr(c) != "\t"] + ["\u2028", "\u2029"]
)


def require_plain_text(text: str, what: str, *, one_line: bool = False) -> None:
    """ServiceError when `text` holds a control character (a NUL, an escape) that has no place in a note, or,
    `one_line`, any character that would break the line."""
    banned = _NOT_IN_A_LINE if one_line else _CONTROLS
    if found := next((c for c in text if c in banned), None):
        raise ServiceError(
            f"{what} holds the character {found!r} (a control character or a line break), which has no place "
            "there (a NUL makes the note binary); leave it out"
        )


# Keys the note format gives a fixed meaning (DESIGN §3); a property may not overwrite them.
RESERVED_PROPERTIES = ("engrama_id", "type", "name", "relations")
# Insights only come from reflect, which keeps their identity and approval state; nobody writes one by hand.
TOOL_ONLY_LABELS = ("Insight",)


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def require_label(profile: Profile, label: str, *, for_writing: bool = True) -> str:
    """The canonical spelling of `label`; UnknownLabel listing the valid ones otherwise.

    `for_writing` also refuses labels only tools create (Insight); reading them is fine."""
    canonical = profile.canonical_label(label)
    usable = [n for n in profile.label_names() if not for_writing or n not in TOOL_ONLY_LABELS]
    if canonical is None:
        raise UnknownLabel(
            f"unknown label {label!r}{_did_you_mean(label, usable)}; use one of: {', '.join(usable)}"
        )
    if for_writing and canonical in TOOL_ONLY_LABELS:
        raise UnknownLabel(
            f"{canonical} entities are created by engrama_reflect, not written directly; "
            f"use one of: {', '.join(usable)}"
        )
    return canonical


def optional_label(profile: Profile, label: str | None, *, for_writing: bool = True) -> str | None:
    """`require_label` for an optional argument (None or blank means not given)."""
    if label is None or not label.strip():
        return None
    return require_label(profile, label, for_writing=for_writing)


def require_relation(profile: Profile, rel_type: str) -> str:
    """The canonical spelling of relation `rel_type` (`uses` -> `USES`); UnknownRelation otherwise."""
    canonical = profile.canonical_relation(rel_type)
    if canonical is None:
        names = profile.relation_names()
        raise UnknownRelation(
            f"unknown relation type {rel_type!r}{_did_you_mean(rel_type.upper(), names)}; "
            f"use one of: {', '.join(names)}"
        )
    return canonical


def endpoints(profile: Profile, rel_type: str) -> str:
    """`Project|Person -> Technology`, for messages and guidance."""
    rel = profile.relations[rel_type]
    return f"{'|'.join(sorted(rel.sources))} -> {'|'.join(sorted(rel.targets))}"


def require_allowed(profile: Profile, rel_type: str, source_label: str, target_label: str) -> None:
    """RelationNotAllowed unless the profile lets `rel_type` go from `source_label` to `target_label`."""
    if not profile.allows(rel_type, source_label, target_label):
        raise RelationNotAllowed(
            f"{rel_type} cannot go from a {source_label} to a {target_label}: it connects "
            f"{endpoints(profile, rel_type)}; choose another relation type (RELATED_TO connects any two)"
        )


def single_label(labels: frozenset[str]) -> str | None:
    """The one concrete label of a relation end, or None when it is open (`*`) or has several."""
    return next(iter(labels)) if len(labels) == 1 and WILDCARD not in labels else None


def require_name(name: str, what: str = "name") -> str:
    """The entity name trimmed; ServiceError for names that cannot be a note title or a wikilink."""
    cleaned = canonical(name) if isinstance(name, str) else ""
    if not canonical(visible(cleaned)):  # only characters that show as nothing: a blank title (review 23h)
        raise ServiceError(f"{what} must not be empty; give the entity's name, e.g. 'SQLite'")
    if "\n" in name.strip() or "\r" in name.strip():
        raise ServiceError(f"{what} must be one line; put longer text in the observation")
    if any(c in cleaned for c in "[]|"):
        raise ServiceError(f"{what} {cleaned!r} must not contain '[', ']' or '|' (they break wikilinks)")
    require_plain_text(cleaned, what, one_line=True)
    if len(cleaned) > MAX_NAME_CHARS:
        raise ServiceError(
            f"{what} is {len(cleaned)} characters; keep it under {MAX_NAME_CHARS} "
            "and put the details in the observation"
        )
    return cleaned


def require_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Properties that can be written as top-level frontmatter keys; ServiceError says what to change."""
    if len(properties) > MAX_PROPERTIES:
        raise ServiceError(f"{len(properties)} properties is too many; give at most {MAX_PROPERTIES}")
    cleaned: dict[str, Any] = {}
    for key, value in properties.items():
        key = str(key).strip()
        if not key or any(c in key for c in "\r\n:#"):
            raise ServiceError(f"property name {key!r} must be a short word without ':', '#' or line breaks")
        if len(key) > MAX_KEY_CHARS:
            raise ServiceError(
                f"property name {key[:40]!r}... is {len(key)} characters; keep it under {MAX_KEY_CHARS}"
            )
        require_plain_text(key, f"property name {key!r}", one_line=True)
        if key.lower() in RESERVED_PROPERTIES:
            raise ServiceError(
                f"property {key!r} is reserved: pass the label and name as arguments and relations "
                "through `relations` or engrama_relate"
            )
        cleaned[key] = _plain(key, value)
    return cleaned


def _plain(key: str, value: Any) -> Any:
    if isinstance(value, list):
        items = [_scalar(key, item) for item in value]
        if (size := sum(len(str(item)) for item in items)) > MAX_VALUE_CHARS:
            raise ServiceError(
                f"property {key!r} is a list of {size} characters in all; put long text in the observation "
                "instead"
            )
        return items
    return _scalar(key, value)


def _scalar(key: str, value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ServiceError(f"property {key!r} must be a finite number")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            raise ServiceError(
                f"property {key!r} is {len(value)} characters; put long text in the observation instead"
            )
        return value
    raise ServiceError(
        f"property {key!r} must be text, a number, true/false or a list of those; "
        "flatten nested objects into separate properties"
    )
