"""Give a note its identity: the one `engrama_id:` line engrama-vault owns in a person's note.

`insert_id` only ever inserts bytes: one line right before the closing `---`, or a new three-line block at
the top when the note has no frontmatter. Then it proves the edit by parsing the result: the mapping must be
the old one plus the id, or nothing is returned and the caller leaves the file alone.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid

from vault_sync.began import moment_ms
from vault_sync.errors import IdLineRefused, MalformedNote
from vault_sync.frontmatter import decode_note, read_frontmatter, yaml_text
from vault_sync.yaml_edit import (
    Entry,
    entry_edit,
    mapping_indent,
    prepend_block,
    render_entry,
    splice,
    top_level_entries,
    verify,
)

ID_KEY = "engrama_id"


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _id_entry(new_id: str, *, indent: str = "", newline: str = "\n") -> str:
    """The `engrama_id: <id>` line. A UUID is a plain YAML scalar as it stands, so it skips the general
    renderer (a YAML dump and re-load per line: most of the cost of identifying a vault's notes)."""
    if _UUID.fullmatch(new_id):
        return f"{indent}{ID_KEY}: {new_id}{newline}"
    return render_entry(ID_KEY, new_id, indent=indent, newline=newline)


def new_engrama_id(began: str | None = None, seed: bytes | None = None) -> str:
    """A fresh node identity: a UUIDv7 string (RFC 9562), 74 random bits and a millisecond time.

    The time is when the note began as far as engrama can tell (`began`: its file's creation or modification
    time, `vault_sync/began.py`) when that is earlier than now, else now. Writing the id line gives the file
    new times; the id keeps the old evidence, so `as_of` answers the same after the database is rebuilt.

    With `seed` (an id-less note's path and bytes, `readers.id_seed`) the 74 bits come from its hash instead:
    two machines sharing a vault through a sync tool that give the same new note its id then write the same
    line (its time is the file's carried modification time on both, `file_began`), so the sync tool sees the
    same bytes on both sides: no conflict copy, no identity replaced by the other machine's."""
    now_ms = time.time_ns() // 1_000_000
    stamped = moment_ms(began)
    ms = stamped if stamped is not None and 0 <= stamped < now_ms else now_ms
    drawn = hashlib.sha256(seed).digest()[:10] if seed is not None else os.urandom(10)
    random = int.from_bytes(drawn, "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (random >> 62 & 0xFFF) << 64 | 0b10 << 62
    return str(uuid.UUID(int=value | random & (1 << 62) - 1))


def insert_id(data: bytes, new_id: str) -> bytes:
    """The note's bytes with `engrama_id: <new_id>` added; every original byte is kept, in order.

    The line goes right before the closing `---` (in the file's newline style, at the column of the other
    keys, so a block scalar above it ends there), or a new `---`/`engrama_id`/`---` block is put at the top
    (after a BOM). An `engrama_id:` key with an empty value is filled in instead. Raises MalformedNote when
    the frontmatter is unterminated, invalid or not a mapping, already holds an id, or when the edited
    note would not parse to the old mapping plus the id.
    """
    if not new_id or new_id != new_id.strip() or any(c in new_id for c in "\r\n"):
        raise ValueError(f"an engrama_id must be one non-empty line without surrounding spaces: {new_id!r}")
    decode_note(data)  # a binary or non-UTF-8 file is never edited
    span, old = read_frontmatter(data)
    expected = {**old, ID_KEY: new_id}
    if span is None:
        edited = prepend_block(data, _id_entry(new_id))
        return _verified(edited, expected, "adding engrama_id")
    current = old.get(ID_KEY)
    if current is not None and str(current).strip():
        raise MalformedNote(f"the note already has engrama_id {current!r}; it was left alone")
    text = yaml_text(data, span)
    line = _id_entry(new_id, indent=mapping_indent(text), newline=span.newline.decode())
    # Present but empty: filled in rather than a duplicate key added (a comment on it is kept).
    if ID_KEY in old:
        entry = [e for e in top_level_entries(text) if e.key == ID_KEY][-1]
        edited = splice(data, span, text, *_id_edit(text, entry, new_id, line))
    else:
        edited = data[: span.close_start] + line.encode("utf-8") + data[span.close_start :]
    return _verified(edited, expected, "adding engrama_id")


def read_id(data: bytes) -> str | None:
    """The note's engrama_id, or None when it has none (or its frontmatter cannot be read)."""
    try:
        _, mapping = read_frontmatter(data)
    except (MalformedNote, ValueError):
        return None
    value = mapping.get(ID_KEY)
    return str(value).strip() or None if value is not None else None


def set_id(data: bytes, new_id: str) -> bytes:
    """Give the note `new_id`: insert the line when it has none, else rewrite only that line's value.

    Rewriting is for a copied note (two files, one id): the copy gets a fresh identity, and only the
    bytes of its `engrama_id:` entry change."""
    span, old = read_frontmatter(data)
    current = old.get(ID_KEY)
    if span is None or current is None or not str(current).strip():
        return insert_id(data, new_id)
    text = yaml_text(data, span)
    entry = [e for e in top_level_entries(text) if e.key == ID_KEY][-1]
    line = _id_entry(new_id, indent=mapping_indent(text), newline=span.newline.decode())
    edited = splice(data, span, text, *_id_edit(text, entry, new_id, line))
    return _verified(edited, {**old, ID_KEY: new_id}, "replacing engrama_id")


def _id_edit(text: str, entry: Entry, new_id: str, line: str) -> tuple[int, int, str]:
    """The edit giving the `engrama_id:` entry `new_id`: the whole line anew, or, when the person wrote a
    comment on it, only the value in place (`yaml_edit.entry_edit`); a layout that cannot keep the comment is
    refused, as for any property."""
    try:
        return entry_edit(text, entry, new_id, line)
    except MalformedNote as exc:
        raise IdLineRefused(str(exc)) from None


def _verified(edited: bytes, expected: dict, what: str) -> bytes:
    """`verify`, whose refusal here means the note's frontmatter cannot take the id line (`IdLineRefused`)."""
    try:
        return verify(edited, expected, what)
    except MalformedNote as exc:
        raise IdLineRefused(str(exc)) from None
