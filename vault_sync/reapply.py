"""A write made again on the text a note holds now, from the bytes it was made on and the bytes it left.

A tool's write is kept for a moment against an editor saving an older copy over it (`writer.kept_edit`); in
the process that made it, the write's own edit is made again. A process that takes the vault over after that one
died has only what the dead one recorded (`server.store.kept_sql`): the note before the write (`base`) and after
it (`written`). The change is then the difference between the two, made again where the same lines stand in
the note now: a three-way merge of lines, as version control does it, that refuses rather than guesses. Each
run of lines the write replaced must still be there, untouched and in one piece; a line the write inserted
needs a neighbour it stood beside. Anything else (the person changed those very lines) gives None: the
person's text is kept as it is.

The frontmatter and the body are merged apart (review 23g): a `---` the person typed right under the
frontmatter is a line like the closing fence, and a property the write added was put before that one, in the
body. And a last line without its newline is compared as the same line with it (review 23g: a note ending
without one, as Obsidian leaves many, had its last line "replaced" by the write that appended after it).
"""

from __future__ import annotations

from difflib import SequenceMatcher

_FENCES = (b"---", b"...")


def reapply(base: bytes, written: bytes, current: bytes) -> bytes | None:
    """`current` with the change from `base` to `written` made on it; None when the lines that change touched
    are not in `current` as they were in `base`. `reapply(base, written, base) == written` always."""
    if current == base:
        return written
    parts = [_split(text) for text in (base, written, current)]
    heads = [head for head, _ in parts]
    eols = (_eol(base), _eol(written), _eol(current))  # each note's own line ending
    if all(heads):  # each part on its own; the fences are the frontmatter's own lines
        body = _merge(*(body for _, body in parts), eols=eols)
        # The frontmatter's last line keeps its newline when a body follows it (review 23g: a note ending
        # with its closing fence, no newline after it, had the fence joined to the observation appended).
        head = _merge(*heads, last=not body, eols=eols)
        return None if head is None or body is None else head + body
    if bool(heads[0]) != bool(heads[2]):
        return None  # the person added or took out the frontmatter itself: nothing to line the write up with
    return _merge(base, written, current, eols=eols)


def _split(text: bytes) -> tuple[bytes, bytes]:
    """(the frontmatter up to and with its closing fence line, the rest); (b"", text) without frontmatter."""
    lines = text.splitlines(True)
    start = 1 if lines and lines[0].lstrip(b"\xef\xbb\xbf").rstrip() == b"---" else 0
    if not start:
        return b"", text
    for i in range(1, len(lines)):
        if lines[i].rstrip() in _FENCES:
            return b"".join(lines[: i + 1]), b"".join(lines[i + 1 :])
    return b"", text


def _merge(
    base: bytes,
    written: bytes,
    current: bytes,
    *,
    last: bool = True,
    eols: tuple[bytes, bytes, bytes] = (b"\n", b"\n", b"\n"),
) -> bytes | None:
    """The three-way merge of one part, a last line without its line ending compared as with it (`eols`: the
    ending each of the three notes uses); `last`: the part ends the note, so its last line keeps the ending it
    had (else every line ends with one)."""
    if current == base:
        return written if last or not written or written.endswith((b"\n", b"\r")) else written + eols[1]
    ended = [not text or text.endswith((b"\n", b"\r")) for text in (base, written, current)]
    old, new, now = (  # each padded with its note's own line ending (review 23k: a CRLF note's last line)
        (text if end else text + eol).splitlines(True)
        for text, end, eol in zip((base, written, current), ended, eols, strict=True)
    )
    merged = _lines(old, new, now)
    if merged is None:
        return None
    out = b"".join(merged)
    if not last:
        return out
    # The last line keeps the ending it had where it came from: the person's text, or the write's.
    for text, end, eol in ((current, ended[2], eols[2]), (written, ended[1], eols[1])):
        tail = text.splitlines(True)[-1:] if text else []
        if not end and tail and out.endswith(tail[0] + eol):
            return out[: -len(eol)]
    return out


def _eol(text: bytes) -> bytes:
    """The line ending `text` uses (its first), `\n` when it has none."""
    for ending in (b"\r\n", b"\n", b"\r"):
        if ending in text:
            return ending
    return b"\n"


def _lines(old: list[bytes], new: list[bytes], now: list[bytes]) -> list[bytes] | None:
    place = _places(old, now)
    edits: list[tuple[int, int, list[bytes]]] = []  # (start, end) in `now` replaced by lines of `new`
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 < i2:  # lines the write replaced or took out: all still there, one after the other
            first = place.get(i1)
            if first is None or any(place.get(i) != first + (i - i1) for i in range(i1, i2)):
                return None
            edits.append((first, first + (i2 - i1), new[j1:j2]))
            continue
        at = _insertion_point(place, i1, len(old), len(now))
        if at is None:
            return None
        edits.append((at, at, new[j1:j2]))
    merged = list(now)
    for start, end, lines in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        merged[start:end] = lines
    return merged


def _places(old: list[bytes], now: list[bytes]) -> dict[int, int]:
    """Where each line of `old` stands in `now`, for the lines the two share in order (a longest match)."""
    place: dict[int, int] = {}
    for block in SequenceMatcher(None, old, now, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            place[block.a + k] = block.b + k
    return place


def _insertion_point(place: dict[int, int], i: int, old_len: int, now_len: int) -> int | None:
    """Where lines the write put before old line `i` go in the note now: before that line when it is still
    there, else after the line before it; at the very start or end when that is where they were put."""
    if i < old_len and i in place:
        return place[i]
    if i > 0 and i - 1 in place:
        return place[i - 1] + 1
    if i == old_len:  # after the last line (into an empty part too: a write appends)
        return now_len
    if i == 0:
        return 0
    return None
