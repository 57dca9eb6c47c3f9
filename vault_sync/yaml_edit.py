"""Line-level editing of frontmatter YAML, shared by `identify`, `relations_block` and `notes`.

An edit never re-dumps the whole mapping (that reorders keys, drops comments and rewrites quoting).
Instead we compose the YAML into nodes, whose marks give the exact character span of every top-level
entry, and splice new text into just those spans. Every edit is then verified by parsing the result and
comparing it with the mapping we meant to produce.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import (
    FrontmatterSpan,
    bom_length,
    describe_yaml_error,
    file_newline,
    read_frontmatter,
)


@dataclass(frozen=True)
class Entry:
    """One top-level `key: value` of the frontmatter, as character offsets into the YAML text.

    `text[start:end]` covers the key's whole line(s): from the start of the key's line to the end of the
    line holding the value's last character (continuation lines and block scalars included).
    """

    key: Any
    start: int
    end: int
    node: yaml.Node  # the value node
    key_node: yaml.Node | None = None


class _NoteDumper(yaml.SafeDumper):
    """Writes YAML the way Obsidian does: list items indented under their key (`key:\n  - a`) and
    links double-quoted (`"[[X]]"`)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if "[[" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_NoteDumper.add_representer(str, _represent_str)


def compose(text: str) -> yaml.Node | None:
    """The node tree of YAML text. The pure-Python loader is used on purpose: its marks are character
    offsets into `text` (libyaml's are not guaranteed to be), and edits are rare enough not to need speed."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        # The frontmatter starts on the file's second line. A tab where YAML needs spaces is the usual cause
        # when the note was indexed all the same (the reader's libyaml lets `key:<TAB>value` pass): review 21c.
        where = describe_yaml_error(exc, text, first_line=2)
        fix = (
            "a tab character stands where YAML needs spaces (after a key's colon, or in the indentation): "
            "replace it with a space in Obsidian, then try again"
            if "'\\t'" in str(exc)
            else "fix it in Obsidian, then try again"
        )
        raise MalformedNote(f"the frontmatter could not be read for editing{where}; {fix}") from None


def line_start(text: str, index: int) -> int:
    """Offset of the first character of the line holding `index`."""
    return text.rfind("\n", 0, index) + 1


def line_after(text: str, index: int) -> int:
    """Offset just past the line break ending the line that holds `index - 1` (a line start stays put)."""
    if index == 0 or text[index - 1] == "\n":
        return index
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def content_end(node: yaml.Node) -> int:
    """Offset just past the last character that belongs to a value.

    A block collection's own end mark lies at the next key, past any trailing comments and blank lines;
    its last item's end is where the value really stops.
    """
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return content_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return content_end(node.value[-1])
    return node.end_mark.index


def entries_of(text: str, node: yaml.MappingNode) -> list[Entry]:
    """The entries of a block mapping node; MalformedNote when a key does not start its own line."""
    found = []
    for key_node, value_node in node.value:
        start = line_start(text, key_node.start_mark.index)
        if text[start : key_node.start_mark.index].strip(" \t"):
            raise MalformedNote(
                "the frontmatter uses a layout engrama-vault cannot edit line by line; left alone"
            )
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        found.append(Entry(key, start, line_after(text, content_end(value_node)), value_node, key_node))
    return found


def comments_in(text: str, entry: Entry) -> list[str]:
    """The comments written on `entry`'s lines (`# ...` outside every scalar): what rendering the entry anew
    would lose, since the parsed value does not hold them."""
    spans = _scalar_spans(text, entry.key_node) + _scalar_spans(text, entry.node)
    found: list[str] = []
    at = entry.start
    while (at := text.find("#", at, entry.end)) >= 0:
        if (at == 0 or text[at - 1] in " \t\n") and not any(a <= at < b for a, b in spans):
            stop = text.find("\n", at, entry.end)
            stop = entry.end if stop < 0 else stop
            found.append(text[at:stop].rstrip())
            at = stop
        else:
            at += 1
    return found


def _scalar_spans(text: str, node: yaml.Node | None) -> list[tuple[int, int]]:
    """Where the scalars of `node` are written; a block scalar's header line (`| # a note`) is not its text."""
    if isinstance(node, yaml.ScalarNode):
        start = node.start_mark.index
        if node.style in ("|", ">"):
            start = line_after(text, start + 1)
        return [(start, node.end_mark.index)]
    if isinstance(node, yaml.SequenceNode):
        return [span for item in node.value for span in _scalar_spans(text, item)]
    if isinstance(node, yaml.MappingNode):
        return [span for k, v in node.value for span in _scalar_spans(text, k) + _scalar_spans(text, v)]
    return []


def inline_value_span(entry: Entry) -> tuple[int, int] | None:
    """Where `entry`'s value is written when it is all on the key's own line (a plain or quoted scalar, a
    flow list or map), so it can be replaced alone, keeping the rest of the line (a comment after it)."""
    node, key = entry.node, entry.key_node
    if key is None or (isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")):
        return None
    if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)) and not node.flow_style:
        return None
    if not node.start_mark.line == node.end_mark.line == key.start_mark.line:
        return None
    return node.start_mark.index, node.end_mark.index


def inline_value(key: Any, value: Any) -> str | None:
    """`value` written to fit on its key's line (flow style: `[a, b]`, `{k: v}`, a plain or quoted scalar),
    for `key: value` in a note; None when it cannot be written on one line so that it reads back the same."""
    value = plain_value(value)
    for allow_unicode in (True, False):  # as `render_entry`: escaped non-ASCII only as the fallback
        dumped = _dump(key, value, allow_unicode=allow_unicode, flow=True).removesuffix("\n")
        if "\n" in dumped or any(c in dumped for c in _RAW_BREAKS):
            continue
        root = compose(dumped)
        if not isinstance(root, yaml.MappingNode):
            return None
        node = root.value[0][1]  # `{key: value}`: its one entry's value
        text = dumped[node.start_mark.index : node.end_mark.index]
        if text and same_data(yaml.safe_load(f"k: {text}"), {"k": value}):
            return text
    return None


def entry_edit(text: str, entry: Entry, value: Any, rendered: str) -> tuple[int, int, str]:
    """The edit giving `entry` its new `value` (`rendered`: the whole entry anew). When the person wrote
    comments on its lines, only a value written on the key's own line is replaced, in place and on one line
    (`status: active  # since May` keeps its comment; a list there is written `[a, b]`); anything else is
    refused: the comment is theirs, and the parsed value does not hold it."""
    comments = comments_in(text, entry)
    if not comments:
        return entry.start, entry.end, rendered
    span, inline = inline_value_span(entry), inline_value(entry.key, value)
    if span is None or inline is None:
        raise MalformedNote(
            f"`{entry.key}:` in the frontmatter holds a comment ({comments[0]!r}) that rewriting it would "
            "lose; the note was left alone. Set it by hand, or move the comment to a line of its own, then "
            "try again"
        )
    start, end = span
    return start, end, inline if end > start else f" {inline}"  # an empty value ends at its colon


def top_level_entries(text: str) -> list[Entry]:
    """The top-level entries of frontmatter YAML text ([] when it is empty or only comments)."""
    root = compose(text)
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        raise MalformedNote(
            "the frontmatter is not written as 'key: value' lines, so engrama-vault cannot edit it line by "
            "line; the note was left alone"
        )
    return entries_of(text, root)


def mapping_indent(text: str) -> str:
    """The indentation of the top-level keys (almost always ""), so inserted lines line up with them."""
    for line in text.split("\n"):
        content = line.strip()
        if content and not content.startswith("#"):
            return line[: len(line) - len(line.lstrip(" "))]
    return ""


def plain_value(value: Any) -> Any:
    """`value` with tuples and sets turned into lists, so it dumps as YAML and compares after parsing."""
    if isinstance(value, Mapping):
        return {k: plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [plain_value(v) for v in sorted(value, key=str)]
    return value


# PyYAML writes NEL and the Unicode line separators raw, where they act as line breaks and do not read back.
_RAW_BREAKS = "\x85\u2028\u2029"


def _dump(key: Any, value: Any, *, allow_unicode: bool, flow: bool = False) -> str:
    try:
        return yaml.dump(
            {key: value},
            Dumper=_NoteDumper,
            sort_keys=False,
            allow_unicode=allow_unicode,
            default_flow_style=flow,
            width=1_000_000_000,  # never fold a long value over several lines
        )
    except yaml.representer.RepresenterError as exc:
        raise ValueError(f"cannot write {key!r} to a note: {exc}") from None


def render_entry(key: Any, value: Any, *, indent: str = "", newline: str = "\n") -> str:
    """`key: value` as YAML lines (block style for lists and maps), each line ending in `newline`."""
    value = plain_value(value)
    dumped = _dump(key, value, allow_unicode=True)
    # Escaping all non-ASCII is ugly in Obsidian, so it is only the fallback.
    if any(c in dumped for c in _RAW_BREAKS) or not same_data(yaml.safe_load(dumped), {key: value}):
        dumped = _dump(key, value, allow_unicode=False)
    lines = dumped.removesuffix("\n").split("\n")
    if value is None and len(lines) == 1 and lines[0].endswith(": null"):
        lines = [lines[0].removesuffix(" null")]  # an empty value is written as Obsidian writes it: `key:`
    return "".join((indent + line if line else line) + newline for line in lines)


def same_data(a: Any, b: Any) -> bool:
    """Deep equality of parsed YAML where NaN equals NaN (so `x: .nan` does not fail verification)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_data(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) != isinstance(b, bool):  # True == 1 in Python, not in a note
        return False
    return a == b


def splice(data: bytes, span: FrontmatterSpan, text: str, start: int, end: int, new: str) -> bytes:
    """`data` with `text[start:end]` (character offsets into the block's YAML text) replaced by `new`."""
    before = text[:start].encode("utf-8")
    after = text[end:].encode("utf-8")
    return data[: span.yaml_start] + before + new.encode("utf-8") + after + data[span.yaml_end :]


def prepend_block(data: bytes, yaml_lines: str) -> bytes:
    """`data` with a new frontmatter block at the top (after a BOM) holding `yaml_lines` (LF-terminated
    lines, converted to the file's newline style)."""
    newline = file_newline(data).decode()
    block = "---\n" + yaml_lines + "---\n"
    bom = bom_length(data)
    return data[:bom] + block.replace("\n", newline).encode("utf-8") + data[bom:]


def verify(data: bytes, expected: Mapping[str, Any], what: str) -> bytes:
    """Return `data` if its frontmatter parses to exactly `expected`; else MalformedNote (nothing written)."""
    try:
        _, mapping = read_frontmatter(data)
    except MalformedNote as exc:
        raise MalformedNote(
            f"{what} was refused: the frontmatter's layout cannot be edited line by line (the result would "
            f"not parse: {exc}); the note was left alone"
        ) from None
    if not same_data(mapping, dict(expected)):
        raise MalformedNote(
            f"{what} would have changed other properties of the note; the note was left alone "
            "(check the frontmatter layout in Obsidian)"
        )
    return data
