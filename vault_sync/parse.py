"""Turn a note's bytes into a `ParsedNote`: identity, label, name, aliases, tags, properties and links.

The rules are DESIGN.md section 3. Parsing never rejects a note for its content (an unknown `type` becomes
a property and the label `Note`); only bytes that are not UTF-8 text or frontmatter that is not valid YAML
are refused, and the caller reports those and leaves the file alone.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, time
from typing import Any

from vault_sync.began import frontmatter_began
from vault_sync.frontmatter import decode_note, load_yaml, locate_frontmatter
from vault_sync.insight_section import keys_in, outside_sections
from vault_sync.model import WIKILINK_REL, Link, ParsedNote
from vault_sync.names import canonical, fold
from vault_sync.wikilinks import extract_wikilinks, relation_targets

DEFAULT_LABEL = "Note"
# Keys that parse_note turns into fields of ParsedNote; every other key becomes a property.
_FIELD_KEYS = frozenset({"engrama_id", "name", "aliases", "alias", "tags", "tag", "relations"})
_REL_SEPARATORS = re.compile(r"[\s\-]+")


def parse_note(
    path: str,
    data: bytes,
    *,
    folder_labels: Mapping[str, str],
    canonical_label: Callable[[str], str | None],
) -> ParsedNote:
    """Parse one note. `path` is vault-relative with POSIX separators.

    `canonical_label` maps a `type:` value to a profile label (None when the profile does not know it);
    `folder_labels` maps a top-level folder name to the label of notes without a `type:`.
    Raises UnreadableNote (binary, not UTF-8) or MalformedNote (frontmatter is not a valid YAML mapping).
    """
    text = decode_note(data, source=path)
    span = locate_frontmatter(data, source=path)
    if span is None:
        meta: dict[str, Any] = {}
        body = text
    else:
        yaml_text = data[span.yaml_start : span.yaml_end].decode("utf-8")
        meta = load_yaml(yaml_text, first_line=data.count(b"\n", 0, span.yaml_start) + 1, source=path)
        body = data[span.end :].decode("utf-8")
    label, type_is_field = _label(meta.get("type"), path, folder_labels, canonical_label)
    name, name_key = _name(meta, path)
    skip = _FIELD_KEYS | ({"type"} if type_is_field else set()) | ({name_key} if name_key else set())
    properties = {str(k): json_value(v) for k, v in meta.items() if k not in skip}
    temporal = _temporal(properties)
    relations = meta.get("relations")
    if relations is not None and not isinstance(relations, dict):
        properties["relations"] = json_value(relations)  # not a REL_TYPE map: keep it, do not guess
    links = _relation_links(relations) if isinstance(relations, dict) else []
    links += [Link(WIKILINK_REL, target, "wikilink") for target in extract_wikilinks(outside_sections(body))]
    return ParsedNote(
        path=path,
        engrama_id=_engrama_id(meta.get("engrama_id")),
        label=label,
        name=name,
        aliases=tuple(_strings(meta.get("aliases", meta.get("alias")))),
        tags=tuple(_tags(meta.get("tags", meta.get("tag")))),
        insight_keys=tuple(keys_in(body)) if "<!-- engrama:insight " in body else (),
        properties=properties,
        links=tuple(links),
        body=body,
        has_frontmatter=span is not None,
        valid_from=temporal.get("valid_from"),
        valid_to=temporal.get("valid_to"),
        confidence=temporal.get("confidence"),
        began=frontmatter_began(properties),
    )


def _temporal(properties: dict[str, Any]) -> dict[str, Any]:
    """Take `valid_from`, `valid_to` and `confidence` out of `properties` when their values are usable.

    Dates become `YYYY-MM-DD` (date-times `YYYY-MM-DDTHH:MM:SSZ`, in UTC when they say their zone); a
    value that is neither, or a confidence that is not a number from 0 to 1, stays a plain property so
    nothing the person wrote is lost."""
    found: dict[str, Any] = {}
    for key in ("valid_from", "valid_to"):
        if key in properties and (when := iso_moment(properties[key])) is not None:
            found[key] = when
            del properties[key]
    value = properties.get("confidence")
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        found["confidence"] = float(value)
        del properties["confidence"]
    return found


def iso_moment(value: Any) -> str | None:
    """An ISO date or date-time (as YAML or JSON gives it) in the store's form, or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return date.fromisoformat(text).isoformat()
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _engrama_id(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _label(
    value: Any, path: str, folder_labels: Mapping[str, str], canonical_label: Callable[[str], str | None]
) -> tuple[str, bool]:
    """(label, whether `type` was consumed as the label rather than kept as a property)."""
    if isinstance(value, str) and value.strip():
        label = canonical_label(value.strip())
        return (label, True) if label else (DEFAULT_LABEL, False)
    if value is not None and value != "":
        return DEFAULT_LABEL, False  # a list or number: keep it as a property
    folder, slash, _ = path.partition("/")
    if slash and folder_labels:
        wanted = fold(folder)  # any case, either Unicode form (macOS spells names decomposed)
        for name, label in folder_labels.items():
            if fold(name) == wanted:
                return label, True
    return DEFAULT_LABEL, True


def _name(meta: Mapping[str, Any], path: str) -> tuple[str, str | None]:
    """(name, the key it came from) from `name`, else `title`, else the file name without `.md`."""
    for key in ("name", "title"):
        value = meta.get(key)
        if value is not None and str(value).strip():
            return canonical(str(value)), key
    stem = path.rsplit("/", 1)[-1]
    return canonical(stem[:-3] if stem.lower().endswith(".md") else stem), None


def _strings(value: Any) -> list[str]:
    """A string or a list of strings as a list of non-empty, trimmed strings."""
    items: Iterable[Any] = [value] if isinstance(value, str | int | float) else value or []
    if not isinstance(items, list | tuple):
        return []
    return [str(item).strip() for item in items if item is not None and str(item).strip()]


def _tags(value: Any) -> list[str]:
    """Tags without their leading `#`; a string may hold several, separated by commas or spaces."""
    raw = re.split(r"[,\s]+", value) if isinstance(value, str) else _strings(value)
    tags = (tag.strip().lstrip("#") for tag in raw)
    return list(dict.fromkeys(tag for tag in tags if tag))


def rel_type_of(key: Any) -> str:
    """A relations key as a relation type: `depends on` / `depends-on` -> `DEPENDS_ON`."""
    return _REL_SEPARATORS.sub("_", str(key).strip()).upper()


def relation_values(value: Any) -> list[str]:
    """Targets of one relations entry: a value or a list of values (`[[X]]` unquoted is a nested list)."""
    items = value if isinstance(value, list) else [value]
    targets: list[str] = []
    for item in items:
        if isinstance(item, list) and len(item) == 1 and not isinstance(item[0], list | dict):
            item = f"[[{item[0]}]]"  # YAML reads an unquoted [[X]] as a list holding a list
        if item is not None and not isinstance(item, list | dict):
            targets += relation_targets(str(item))
    return targets


def _relation_links(relations: Mapping[Any, Any]) -> list[Link]:
    links: list[Link] = []
    seen: set[tuple[str, str]] = set()
    for key, value in relations.items():
        rel_type = rel_type_of(key)
        for target in relation_values(value):
            if rel_type and (rel_type, target.casefold()) not in seen:
                seen.add((rel_type, target.casefold()))
                links.append(Link(rel_type, target, "frontmatter"))
    return links


def json_value(value: Any) -> Any:
    """A YAML value as JSON-able data: dates become ISO strings, sets and tuples lists, the rest str."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((json_value(v) for v in value), key=str)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")  # YAML !!binary
    return str(value)
