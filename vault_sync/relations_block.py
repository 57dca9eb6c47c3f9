"""Mirror typed relations into a note's `relations:` block, the one block of frontmatter engrama-vault owns.

Edits are as small as the layout allows: a new item line under a block list, `, "[[X]]"` inside a flow
list, a scalar turned into a flow list, a new key or a new `relations:` block before the closing `---`.
When the precise edit does not verify (an odd layout), the `relations:` entry alone is re-rendered; if
that does not verify either, MalformedNote is raised and the note is left alone. Nothing outside the
`relations:` entry ever changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import yaml

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import FrontmatterSpan, decode_note, read_frontmatter, yaml_text
from vault_sync.names import fold
from vault_sync.parse import rel_type_of, relation_values
from vault_sync.wikilinks import relation_target
from vault_sync.yaml_edit import (
    Entry,
    comments_in,
    content_end,
    line_after,
    mapping_indent,
    prepend_block,
    render_entry,
    splice,
    top_level_entries,
    verify,
)

RELATIONS_KEY = "relations"
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_FLOW_UNSAFE = re.compile(r"[,\[\]{}]|: | #")
LINK_BREAKING = frozenset("#^|[]")


def add_relation(data: bytes, rel_type: str, target: str, same: Iterable[str] = ()) -> bytes:
    """The note's bytes with `target` added under `rel_type` in `relations:`, written as `"[[target]]"` (as a
    plain value when no wikilink can carry it: `relation_item`).

    Returns `data` unchanged when the relation is already there (any spelling of the key, any link form,
    case-insensitive), under `target` or one of the `same` other link texts that lead to the same note.
    Raises MalformedNote when the frontmatter cannot be read or edited safely.
    """
    rel_type, key, item = _checked(rel_type, target)
    decode_note(data)
    span, old = read_frontmatter(data)
    if span is None:
        lines = f"{RELATIONS_KEY}:\n  {key}:\n    - {_quoted(item)}\n"
        return verify(prepend_block(data, lines), {RELATIONS_KEY: {rel_type: [item]}}, "adding a relation")
    relations = old.get(RELATIONS_KEY)
    if relations is not None and not isinstance(relations, dict):
        raise MalformedNote(
            "the note's 'relations:' is not a map of RELATION_TYPE: targets; fix it in Obsidian"
        )
    relations = relations or {}
    wanted = {_meaning(each) for each in (target, *same)}
    for existing, value in relations.items():
        if rel_type_of(existing) == rel_type_of(rel_type) and wanted & set(_folded(value)):
            return data
    text = yaml_text(data, span)
    entry = next((e for e in reversed(top_level_entries(text)) if e.key == RELATIONS_KEY), None)
    existing, expected_relations = _grown(relations, rel_type, item)
    edit = _precise_edit(text, span, entry, existing, relations.get(existing), key, item)
    expected = {**old, RELATIONS_KEY: expected_relations}
    if edit is not None:
        try:
            return verify(splice(data, span, text, *edit), expected, "adding a relation")
        except MalformedNote:
            if entry is None:
                raise
    assert entry is not None  # only an existing entry lacks a precise edit
    _keeps_comments(text, entry, "add the relation")
    rendered = render_entry(RELATIONS_KEY, expected_relations, indent=mapping_indent(text), newline=_nl(span))
    return verify(splice(data, span, text, entry.start, entry.end, rendered), expected, "adding a relation")


def _keeps_comments(text: str, entry: Entry, doing: str) -> None:
    """Refuse to write `relations:` anew when the person wrote comments on its lines: the parsed value does not
    hold them, so rendering it again would lose them (review 23a; as `yaml_edit.entry_edit` refuses for a
    property)."""
    comments = comments_in(text, entry)
    if comments:
        raise MalformedNote(
            f"`{RELATIONS_KEY}:` in the frontmatter holds a comment ({comments[0]!r}) that writing it anew to "
            f"{doing} would lose; the note was left alone. Edit it by hand, or move the comment to a line of "
            "its own (above `relations:`), then try again"
        )


def remove_relation(data: bytes, rel_type: str, target: str) -> bytes:
    """The note's bytes without `target` under `rel_type` (any key spelling, any link form); `data`
    unchanged when it is not there. Emptied keys, and an emptied `relations:`, are removed too. Only the
    `relations:` entry is rewritten."""
    rel_type = _checked(rel_type, target)[0]
    decode_note(data)
    span, old = read_frontmatter(data)
    relations = old.get(RELATIONS_KEY)
    if span is None or not isinstance(relations, dict):
        return data
    wanted = _meaning(target)
    kept: dict[Any, Any] = {}
    for key, value in relations.items():
        if rel_type_of(key) != rel_type_of(rel_type) or wanted not in _folded(value):
            kept[key] = value
            continue
        items = [v for v in (value if isinstance(value, list) else [value]) if wanted not in _folded(v)]
        if items:
            kept[key] = items
    if kept == relations:
        return data
    text = yaml_text(data, span)
    entry = next(e for e in reversed(top_level_entries(text)) if e.key == RELATIONS_KEY)
    _keeps_comments(text, entry, "take the relation out")
    rendered = (
        render_entry(RELATIONS_KEY, kept, indent=mapping_indent(text), newline=_nl(span)) if kept else ""
    )
    expected = {k: v for k, v in old.items() if k != RELATIONS_KEY} | ({RELATIONS_KEY: kept} if kept else {})
    return verify(splice(data, span, text, entry.start, entry.end, rendered), expected, "removing a relation")


def link_safe(target: str) -> bool:
    """Whether `[[target]]` links to `target`: a link stops at `#` (a heading) and `|` (an alias), `[` and `]`
    end it, and Obsidian does not link names holding `^` either."""
    return not any(c in LINK_BREAKING for c in target)


def relation_item(target: str) -> str:
    """The value a relation to `target` is written as: the wikilink `[[target]]`, or, for a name or path no
    wikilink can carry (`C#`, a note in a folder `[2024] Work`), the plain value, which the sync takes as
    written (`wikilinks.relation_targets`). `[[C#]]` would be read as note `C`, heading `#`, and lead there."""
    target = target.strip()
    return f"[[{target}]]" if link_safe(target) else target


def _checked(rel_type: str, target: str) -> tuple[str, str, str]:
    """(rel type, its YAML key text, the item value `relation_item(target)`); ValueError for unusable ones."""
    rel_type = rel_type.strip()
    if not rel_type.strip() or any(c in rel_type for c in "\r\n"):
        raise ValueError(f"a relation type must be a non-empty single line: {rel_type!r}")
    if not target.strip() or any(c in target for c in "\r\n") or "[[" in target or "]]" in target:
        raise ValueError(f"a relation target must be a note name or path on one line, not a link: {target!r}")
    key = rel_type if _PLAIN_KEY.fullmatch(rel_type) else json.dumps(rel_type, ensure_ascii=False)
    if yaml.safe_load(f"{key}: 0") != {rel_type: 0}:  # e.g. ON or NO, which YAML 1.1 reads as booleans
        key = json.dumps(rel_type, ensure_ascii=False)
    return rel_type, key, relation_item(target)


def _meaning(target: str) -> str:
    """The note a relation written for `target` names, as `_folded` compares them."""
    return _folded_target(relation_target(relation_item(target)) or "")


def _folded_target(target: str) -> str:
    return fold(target[:-3] if target.lower().endswith(".md") else target)


def _quoted(item: str) -> str:
    return json.dumps(item, ensure_ascii=False)  # JSON strings are valid YAML double-quoted scalars


def _nl(span: FrontmatterSpan) -> str:
    return span.newline.decode()


def _folded(value: Any) -> set[str]:
    """The notes a relations value names, folded (`relation_values` has read each link or plain value)."""
    return {_folded_target(t) for t in relation_values(value)}


def _grown(relations: dict, rel_type: str, item: str) -> tuple[Any, dict]:
    """(the existing key the item goes under, or None for a new key; the relations with the item added).

    Decided on the parsed mapping alone, so the expectation we verify against never depends on layout.
    """
    matching = [k for k in relations if rel_type_of(k) == rel_type_of(rel_type)]
    if not matching:
        return None, {**relations, rel_type: [item]}
    key = matching[-1]
    old = relations[key]
    grown = [*old, item] if isinstance(old, list) else [item] if old is None else [old, item]
    return key, {**relations, key: grown}


def _precise_edit(
    text: str, span: FrontmatterSpan, entry: Entry | None, existing: Any, old: Any, key: str, item: str
) -> tuple[int, int, str] | None:
    """The smallest edit adding the item, as (start, end, new text) in `text`; None when the layout has
    no precise edit (the caller then re-renders the `relations:` entry)."""
    nl, quoted = _nl(span), _quoted(item)
    if entry is None:
        at, indent = len(text), mapping_indent(text)
        return at, at, f"{indent}{RELATIONS_KEY}:{nl}{indent}  {key}:{nl}{indent}    - {quoted}{nl}"
    node = entry.node
    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        return None  # `relations:` with no value, `{}` or a flow map
    if existing is None:
        at = line_after(text, content_end(node))
        pad = " " * node.value[0][0].start_mark.column
        return at, at, f"{pad}{key}:{nl}{pad}  - {quoted}{nl}"
    pairs = [v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == existing]
    return _grow_value(text, pairs[-1], old, quoted, nl) if pairs else None


def _grow_value(text: str, node: yaml.Node, old: Any, quoted: str, nl: str) -> tuple[int, int, str] | None:
    """The edit that appends one item to an existing relation value, in the value's own style."""
    start, end = node.start_mark.index, node.end_mark.index
    if isinstance(node, yaml.SequenceNode) and not node.flow_style:
        at = line_after(text, content_end(node))
        return at, at, f"{' ' * node.start_mark.column}- {quoted}{nl}"
    if isinstance(node, yaml.SequenceNode):
        close = end - 1  # the `]`
        before = text[start + 1 : close].rstrip()
        separator = "" if not before or before.endswith(",") else ", "
        return close, close, separator + quoted
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
        return start, end, (" " if start == end else "") + f"[{quoted}]"
    written = text[start:end]
    if isinstance(node, yaml.ScalarNode) and node.style in (None, "'", '"') and "\n" not in written:
        if node.style is None and _FLOW_UNSAFE.search(written):
            written = _quoted(str(old))  # `a, b` is one plain scalar in block context, two in a flow list
        return start, end, f"[{written}, {quoted}]"
    return None  # a block scalar or a map: the fallback re-renders the entry
