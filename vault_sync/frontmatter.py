"""Find a note's frontmatter at the byte level and read its YAML.

Obsidian recognises frontmatter only when the very first line of the file (after an optional UTF-8 BOM) is
`---`; the block ends at the next line that is `---` (or YAML's `...`). Both delimiter lines may carry
trailing spaces. Working on byte offsets lets the editors (`identify`, `relations_block`, `notes`) splice
new bytes in while every other byte of the file stays where it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from vault_sync.errors import MalformedNote, UnreadableNote

try:  # the C loader is ~10x faster; fall back when PyYAML was built without libyaml
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Base = yaml.SafeLoader


class _Loader(_Base):
    """The safe loader, reading a date that is no date (`0000-00-00`, `2024-02-30`: a template's placeholder, a
    typo) as the text it is, as Obsidian shows it, instead of failing the whole note: the note was then neither
    indexed nor searchable until the person changed their convention (YAML 1.2, which Obsidian follows, has no
    timestamps at all)."""


def _timestamp_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)

BOM = b"\xef\xbb\xbf"
_OPENING = re.compile(rb"---[ \t]*(\r?\n|\Z)")
_CLOSING = re.compile(rb"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
_FIX_HINT = "fix it in Obsidian and it will re-sync"


@dataclass(frozen=True)
class FrontmatterSpan:
    """Byte offsets of a frontmatter block inside a note's bytes.

    `data[start:end]` is the whole block including both delimiter lines; `data[yaml_start:yaml_end]` is the
    YAML text; the closing line starts at `close_start` (== `yaml_end`).
    """

    start: int  # offset of the opening `---` (3 after a BOM, else 0)
    yaml_start: int
    close_start: int
    end: int  # first byte after the closing line and its line break (or len(data))
    newline: bytes  # b"\n" or b"\r\n", as the opening line ends

    @property
    def yaml_end(self) -> int:
        return self.close_start


def bom_length(data: bytes) -> int:
    """3 when `data` starts with a UTF-8 byte order mark, else 0."""
    return len(BOM) if data.startswith(BOM) else 0


def file_newline(data: bytes) -> bytes:
    """The newline style of a file: CRLF when its first line ends in CRLF, else LF (also for one-line files)."""
    first = data.find(b"\n")
    return b"\r\n" if first > 0 and data[first - 1 : first] == b"\r" else b"\n"


def locate_frontmatter(data: bytes, *, source: str = "note") -> FrontmatterSpan | None:
    """Where the frontmatter block is, or None when the file does not open with a `---` line.

    Raises MalformedNote when the opening `---` has no closing line. A `---` horizontal rule later in the
    body never matters: only the first line can open a block, and the first delimiter after it closes it.
    """
    start = bom_length(data)
    opening = _OPENING.match(data, start)
    if opening is None:
        return None
    newline = opening.group(1) or b"\n"
    yaml_start = opening.end()
    closing = _CLOSING.search(data, yaml_start) if opening.group(1) else None
    if closing is None:
        raise MalformedNote(
            f"{source} has unterminated frontmatter: the first line is '---' but no closing '---' line "
            "follows; add a closing '---' line in Obsidian and it will re-sync"
        )
    end = closing.end()
    if data[end : end + 1] == b"\n":
        end += 1
    return FrontmatterSpan(start, yaml_start, closing.start(), end, newline)


def decode_note(data: bytes, *, source: str = "note") -> str:
    """The note's text (BOM removed), or UnreadableNote when it is binary or not UTF-8."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UnreadableNote(f"{source} is UTF-16 text, not UTF-8; re-save it as UTF-8 to have it synced")
    if b"\x00" in data:
        raise UnreadableNote(f"{source} contains NUL bytes: it looks like a binary file, not a Markdown note")
    try:
        return data[bom_length(data) :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableNote(
            f"{source} is not UTF-8 text (invalid byte at offset {exc.start}); re-save it as UTF-8 "
            "to have it synced"
        ) from None


def load_yaml(text: str, *, first_line: int = 2, source: str = "note") -> dict[str, Any]:
    """Parse frontmatter YAML text into a mapping ({} when empty).

    `first_line` is the file line (1-based) the text starts on, so errors name the line the person sees
    in their editor. Raises MalformedNote for invalid YAML and for anything that is not a mapping.
    """
    try:
        value = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as exc:
        # Constructors raise plain ValueError, e.g. for a date like 2024-02-30.
        where = describe_yaml_error(exc, text, first_line)
        raise MalformedNote(f"{source} has invalid YAML in its frontmatter{where}; {_FIX_HINT}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else f"a {type(value).__name__}"
        raise MalformedNote(
            f"{source} has frontmatter that is {kind}, not a set of 'key: value' properties; {_FIX_HINT}"
        )
    return value


def describe_yaml_error(exc: Exception, text: str, first_line: int) -> str:
    """` at line N (what is wrong)`, with N counted from the top of the file."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark, context_mark = exc.problem_mark or exc.context_mark, exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is None:
            return f" ({problem})"
        if exc.problem and exc.context and context_mark is not None and context_mark.line != mark.line:
            # e.g. an unclosed `[`: the problem shows at the end, the person needs the line it opened on
            problem += f", {exc.context} that starts at line {first_line + context_mark.line}"
        return f" at line {first_line + mark.line} ({problem})"
    if isinstance(exc, yaml.reader.ReaderError):
        line = first_line + text.count("\n", 0, max(exc.position, 0))
        return f" at line {line} ({exc.reason})"
    return f" ({exc})"


def yaml_text(data: bytes, span: FrontmatterSpan) -> str:
    """The decoded YAML text of a located block."""
    try:
        return data[span.yaml_start : span.yaml_end].decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableNote("the frontmatter is not UTF-8 text; re-save the note as UTF-8") from None


def read_frontmatter(data: bytes, *, source: str = "note") -> tuple[FrontmatterSpan | None, dict[str, Any]]:
    """Locate and parse a note's frontmatter: (span, mapping), or (None, {}) when there is none."""
    span = locate_frontmatter(data, source=source)
    if span is None:
        return None, {}
    first_line = data.count(b"\n", 0, span.yaml_start) + 1
    return span, load_yaml(yaml_text(data, span), first_line=first_line, source=source)
