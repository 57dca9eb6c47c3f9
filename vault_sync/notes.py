"""Notes written for `engrama_remember`: a file name for a new entity, its first bytes, and later updates.

`update_note` follows the same rule as every other write into a person's note (DESIGN.md section 4): only
the lines of the keys it sets change, the observation is appended at the very end, and the result is
verified by parsing it before anything is returned.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Mapping
from datetime import date
from typing import Any

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import decode_note, file_newline, read_frontmatter, yaml_text
from vault_sync.open_blocks import open_block, require_closed
from vault_sync.yaml_edit import (
    comments_in,
    entry_edit,
    mapping_indent,
    plain_value,
    prepend_block,
    render_entry,
    same_data,
    splice,
    top_level_entries,
    verify,
)

MAX_NAME_BYTES = 180  # file systems allow 255 bytes; leave room for ".md" and a " 2" de-duplicating suffix
RESERVED_KEYS = ("engrama_id", "type", "name")
# Characters Obsidian refuses in note names (`# ^ [ ] |` break links; the rest break some file system).
_FORBIDDEN = re.compile(r'[*"\\/<>:|?#^\[\]\x00-\x1f\x7f]')
_WINDOWS_RESERVED = re.compile(r"(CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])(\..*)?", re.IGNORECASE)


def note_filename(name: str) -> str:
    """A safe file name (with `.md`) for a note called `name`: forbidden characters removed, spaces
    collapsed, at most MAX_NAME_BYTES bytes of UTF-8, never empty and never hidden (leading `.`)."""
    cleaned = _FORBIDDEN.sub(" ", unicodedata.normalize("NFC", name))
    cleaned = " ".join(cleaned.split()).lstrip(". ")  # dots and spaces together (review 23h: ". .NET")
    encoded = cleaned.encode("utf-8")[:MAX_NAME_BYTES]
    cleaned = encoded.decode("utf-8", errors="ignore").rstrip(". ")  # Windows drops trailing dots/spaces
    if not cleaned:
        cleaned = "Untitled"
    if _WINDOWS_RESERVED.fullmatch(cleaned):
        cleaned += "_"
    return f"{cleaned}.md"


def observation_line(observation: str, day: str) -> str:
    """An observation as one dated bullet (`- 2026-11-21: text`); further lines are indented under it. One
    whose first line opens a block (a code fence, `%%`, `<!--`, `<pre>`) starts under the bullet: after the
    date, its opening line would be text, and the closing line, indented under the item, would open the block
    the rest of the note then sat in (review 20d)."""
    lines = [line.rstrip() for line in observation.strip().splitlines() if line.strip()]
    if not lines:
        raise ValueError("an observation must not be empty")
    if open_block(lines[0]) is not None:
        return "\n".join([f"- {day}:", *(f"  {line}" for line in lines)]) + "\n"
    return "\n".join([f"- {day}: {lines[0]}", *(f"  {line}" for line in lines[1:])]) + "\n"


def render_new_note(
    *,
    engrama_id: str,
    label: str,
    name: str,
    properties: Mapping[str, Any],
    observation: str | None,
    newline: str = "\n",
    today: str | None = None,
) -> bytes:
    """The bytes of a new entity note: frontmatter (engrama_id, type, name, then `properties` one key per
    line), a `# name` heading and, when given, the observation as a bullet dated `today` (default: today).

    Keys of `properties` named engrama_id, type or name are ignored: the explicit arguments win.
    """
    fields: dict[str, Any] = {"engrama_id": engrama_id, "type": label, "name": name}
    fields |= {k: plain_value(v) for k, v in properties.items() if k not in RESERVED_KEYS}
    yaml_lines = "".join(render_entry(key, value) for key, value in fields.items())
    body = f"# {' '.join(name.split())}\n"
    if observation is not None and observation.strip():
        body += "\n" + observation_line(observation, today or date.today().isoformat())
    text = f"---\n{yaml_lines}---\n{body}".replace("\n", newline)
    return verify(text.encode("utf-8"), fields, "writing the new note")


def update_note(
    data: bytes,
    *,
    properties: Mapping[str, Any],
    observation: str | None,
    today: str,
    remove: Collection[str] = (),
) -> bytes:
    """The note's bytes with `properties` set, the keys in `remove` taken out, and the observation appended
    as a bullet dated `today`.

    A key already holding its value is left as it is. Otherwise its whole entry (continuation lines included)
    is replaced by its new rendering, or deleted, unless the person wrote comments on its lines: then a value
    on the key's own line is replaced in place, and anything else is refused (`yaml_edit.entry_edit`).
    Missing keys are added before the closing `---` (a frontmatter block is created when there is none); every
    other key's lines stay byte-identical. The observation goes at the very end of the body, unless an
    identical bullet for the same day is already there. Raises MalformedNote when the result would not verify.
    """
    decode_note(data)
    span, old = read_frontmatter(data)
    # A value the note already holds needs no byte changed (and its entry's comments need no rewriting).
    updates = {k: v for k, v in ((k, plain_value(v)) for k, v in properties.items()) if not _holds(old, k, v)}
    dropped = {k for k in remove if k in old and k not in properties}
    if not updates and not dropped:
        edited = data
    elif span is None:
        edited = prepend_block(data, "".join(render_entry(k, v) for k, v in updates.items()))
    else:
        edited = _set_keys(data, updates, dropped)
    expected = {k: v for k, v in {**old, **updates}.items() if k not in dropped}
    try:
        edited = verify(edited, expected, "updating the note's properties")
    except MalformedNote:
        if span is None or not dropped:
            raise
        # Taking a key out can leave the blank lines after it against a keep-chomped block scalar above
        # (`key: |+`), which would absorb them into its value; then those blank lines go with the key.
        edited = _set_keys(data, updates, dropped, with_blank_lines=True)
        try:
            edited = verify(edited, expected, "updating the note's properties")
        except MalformedNote:
            # Indented comment lines under the key would join a block scalar above it: they are the
            # person's, so they stay, and the key with them (said as any comment on the key is).
            if kept := _comments_under(data, dropped):
                raise MalformedNote(
                    f"`{kept[0]}:` in the frontmatter has a comment under it ({kept[1]!r}) that the value above "
                    "would take in if the key went; the note was left alone. Remove the key by hand, or move "
                    "the comment, then try again"
                ) from None
            raise
    if observation is not None and observation.strip():
        edited = _append_observation(edited, observation_line(observation, today))
    return edited


def _holds(mapping: Mapping[Any, Any], key: Any, value: Any) -> bool:
    return key in mapping and same_data(mapping[key], value)


def _set_keys(
    data: bytes, updates: Mapping[str, Any], dropped: Collection[str] = (), *, with_blank_lines: bool = False
) -> bytes:
    """Replace or add the top-level entries of `updates` and delete those of `dropped` (with the blank lines
    that follow them when `with_blank_lines`); all other characters of the YAML text stay."""
    span, _ = read_frontmatter(data)
    assert span is not None
    text = yaml_text(data, span)
    newline, indent = span.newline.decode(), mapping_indent(text)
    entries = {entry.key: entry for entry in top_level_entries(text)}  # a duplicated key: YAML keeps the last
    added = "".join(
        render_entry(k, v, indent=indent, newline=newline) for k, v in updates.items() if k not in entries
    )
    edits = [(len(text), len(text), added)]
    for k, v in updates.items():
        if (e := entries.get(k)) is not None:
            edits.append(entry_edit(text, e, v, render_entry(k, v, indent=indent, newline=newline)))
    for k in dropped:
        if (e := entries.get(k)) is not None:
            if comments := comments_in(text, e):
                raise MalformedNote(
                    f"`{k}:` in the frontmatter holds a comment ({comments[0]!r}) that removing it would lose; "
                    "the note was left alone. Remove the key by hand, or move the comment to a line of its "
                    "own, then try again"
                )
            edits.append((e.start, _past_blank_lines(text, e.end) if with_blank_lines else e.end, ""))
    new_text = text
    for start, end, new in sorted(edits, reverse=True):  # from the end, so earlier offsets stay valid
        new_text = new_text[:start] + new + new_text[end:]
    return splice(data, span, text, 0, len(text), new_text)


def _comments_under(data: bytes, dropped: Collection[str]) -> tuple[str, str] | None:
    """(key, comment) for the first indented comment line right under a key of `dropped`, if any."""
    span, _ = read_frontmatter(data)
    assert span is not None
    text = yaml_text(data, span)
    for entry in top_level_entries(text):
        if entry.key in dropped:
            after = text[_past_blank_lines(text, entry.end) :].split("\n", 1)[0]
            if after[:1] in (" ", "\t") and after.strip().startswith("#"):
                return entry.key, after.strip()
    return None


def _past_blank_lines(text: str, at: int) -> int:
    """The offset after the whitespace-only lines that start at `at` in `text`."""
    while at < len(text):
        end = text.find("\n", at)
        line_end = len(text) if end < 0 else end + 1
        if text[at:line_end].strip():
            break
        at = line_end
    return at


def _append_observation(data: bytes, bullet: str) -> bytes:
    """`data` with `bullet` appended at the end, in the file's newline style, unless the body has it.

    So writing the same observation again on the same day changes nothing: the lease holder replays a queued
    write after a crash between the note write and the end of the queue entry (`server.services.outbox`)."""
    span, _ = read_frontmatter(data)
    body = data[span.end if span else 0 :].decode("utf-8").replace("\r\n", "\n")
    if _has_item(body, bullet):
        return data
    require_closed(data, body)
    newline = file_newline(data)
    prefix = b"" if not data or data.endswith(b"\n") else newline
    return data + prefix + bullet.replace("\n", newline.decode()).encode("utf-8")


def _has_item(body: str, bullet: str) -> bool:
    """True when the list item `bullet` (its continuation lines included) is in `body` as a whole item, not
    as the first lines of a longer one (`- day: a` is not in `- day: a` + `  b`)."""
    text = "\n" + body + ("" if body.endswith("\n") else "\n")
    at = text.find("\n" + bullet)
    while at >= 0:
        if text[at + 1 + len(bullet) : at + 2 + len(bullet)] not in (" ", "\t"):
            return True
        at = text.find("\n" + bullet, at + 1)
    return False
