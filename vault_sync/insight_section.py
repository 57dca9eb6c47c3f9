"""Insight sections in people's notes, and the list of dismissed insights: pure `bytes -> bytes` edits.

An approved insight is written into a note as a marked section appended at the end:

    <!-- engrama:insight KEY -->
    ...the insight, as Markdown...
    <!-- /engrama:insight -->

The markers are HTML comments, which Obsidian hides in reading view, and they carry the insight's key, so a
second write finds the section and changes nothing. Only bytes are appended: every byte the person wrote stays
where it was (BOM, CRLF, a missing final newline — the appended text follows the file's newline style).
Once a section exists it belongs to the person: engrama never rewrites or removes it.

The dismissed list is a plain Markdown list whose lines end in the insight's key in backticks; appending a
line for a key already listed changes nothing either.
"""

from __future__ import annotations

import re

from vault_sync.frontmatter import file_newline
from vault_sync.open_blocks import require_closed

START = "<!-- engrama:insight {key} -->"
END = "<!-- /engrama:insight -->"
# A key must not be able to end the HTML comment ("--", ">") or span lines.
_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./]*$")
_START_LINE = re.compile(
    rb"^[ \t]*<!-- engrama:insight ([A-Za-z0-9_][A-Za-z0-9_./]*) -->[ \t]*\r?$", re.MULTILINE
)
_END_LINE = re.compile(rb"^[ \t]*<!-- /engrama:insight -->[ \t]*\r?$", re.MULTILINE)
_LISTED = re.compile(rb"`([A-Za-z0-9_][A-Za-z0-9_./]*)`[ \t]*\r?$", re.MULTILINE)


def check_key(key: str) -> str:
    """`key` if it can sit inside the markers; ValueError otherwise."""
    if not _KEY.match(key):
        raise ValueError(f"{key!r} cannot be an insight key: use letters, digits, '_', '.' and '/'")
    return key


# The same start marker line, in decoded text, and the end marker wherever it is (`outside_sections`).
_START_TEXT = re.compile(_START_LINE.pattern.decode("ascii"), re.MULTILINE)
_END_TEXT = re.compile(re.escape(END))
# The callout engrama writes inside a section: its lines all begin with ">" (reflect.render.section_markdown).
_CALLOUT = re.compile(r"(?:[ \t]*>[^\n]*(?:\n|$))*")


def outside_sections(text: str) -> str:
    """`text` without what engrama wrote in its insight sections, markers included. What engrama wrote there is
    not the person's statement: its links are not read into the graph, so reflect never finds a pattern that
    only its own write-back supports (review 18a). What the person wrote is: a section ends at its end marker,
    and what follows the marker on its line stays; a section whose end marker the person deleted (or that
    another section's start comes before) ends where engrama's callout ends, its run of `>` lines (review 21b:
    the person's links after it were lost to the graph)."""
    if "<!-- engrama:insight " not in text:
        return text
    kept, at = [], 0
    starts = list(_START_TEXT.finditer(text))
    for i, start in enumerate(starts):
        if start.start() < at:
            continue  # inside a section already cut
        kept.append(text[at : start.start()])
        body = start.end() + 1 if text.startswith("\n", start.end()) else start.end()
        following = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        end = _END_TEXT.search(text, body, following)
        if end is not None:
            at = end.end()
        else:
            callout = _CALLOUT.match(text, body)
            at = callout.end() if callout is not None else body
    kept.append(text[at:])
    return "".join(kept)


def keys_in(text: str) -> list[str]:
    """The keys of the insight sections in a note's decoded text, in order, each once."""
    return list(dict.fromkeys(m.group(1) for m in _START_TEXT.finditer(text)))


def section_keys(data: bytes) -> list[str]:
    """The keys of the insight sections in a note, in order."""
    return [m.group(1).decode("ascii") for m in _START_LINE.finditer(data)]


def find_section(data: bytes, key: str) -> tuple[int, int] | None:
    """Byte span of the section for `key`, markers included; None when the note has none.

    A start marker whose end marker the person deleted still counts (the span then runs to the end of the
    note), so engrama never appends a second copy of an insight the person has edited.
    """
    check_key(key)
    for match in _START_LINE.finditer(data):
        if match.group(1).decode("ascii") == key:
            end = _END_LINE.search(data, match.end())
            return match.start(), end.end() if end else len(data)
    return None


def append_section(data: bytes, key: str, markdown: str) -> bytes:
    """The note with the section for `key` appended, or `data` unchanged when it already has one.

    `markdown` is the section's content with `\\n` line breaks; it is written in the note's newline style,
    after a blank line.
    """
    if find_section(data, key) is not None:
        return data
    lines = [START.format(key=key), *markdown.strip("\n").split("\n"), END]
    return _append_block(data, lines, blank_line=True)


def listed_keys(data: bytes) -> set[str]:
    """Keys named in backticks at the end of a line (the dismissed list's format)."""
    return {m.group(1).decode("ascii") for m in _LISTED.finditer(data)}


def append_list_item(data: bytes, key: str, text: str) -> bytes:
    """The note with `- text · `key`` appended as a list item, or `data` unchanged when `key` is listed."""
    check_key(key)
    if key in listed_keys(data):
        return data
    item = f"- {' '.join(text.split())} · `{key}`"
    return _append_block(data, [item], blank_line=False)


def _append_block(data: bytes, lines: list[str], *, blank_line: bool) -> bytes:
    """Append whole lines after the note's last line, in its newline style, optionally after a blank line;
    refused when the note ends inside a code block or a comment (`open_blocks`)."""
    require_closed(data)
    newline = file_newline(data)
    text = newline.join(line.encode("utf-8") for line in lines) + newline
    if not data.strip():
        return data + text if not data or data.endswith(b"\n") else data + newline + text
    joint = b"" if data.endswith(b"\n") else newline
    if blank_line and not data.endswith(newline * 2):
        joint += newline
    return data + joint + text
