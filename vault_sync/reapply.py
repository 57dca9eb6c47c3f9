"""A write made again on the text a note holds now, from the bytes it was made on and the bytes it left.

A tool's write is kept for a moment against an editor saving an older copy over it (`writer.kept_edit`); in
the process that made it, the write's own edit is made again. A process that takes the vault over after that one
died has only what the dead one recorded (`server.store.kept_sql`): the note before the write (`base`) and after
it (`written`). The change is then the difference between the two, made again where the same lines stand in
the note now: a three-way merge of lines, as version control does it, that refuses rather than guesses. Each
run of lines the write replaced must still be there, untouched and in one piece; a line the write inserted
needs a neighbour it stood beside. Anything else (the person changed those very lines) gives None: the
person's text is kept as it is.
"""

from __future__ import annotations

from difflib import SequenceMatcher


def reapply(base: bytes, written: bytes, current: bytes) -> bytes | None:
    """`current` with the change from `base` to `written` made on it; None when the lines that change touched
    are not in `current` as they were in `base`. `reapply(base, written, base) == written` always."""
    old, new, now = base.splitlines(True), written.splitlines(True), current.splitlines(True)
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
    return b"".join(merged)


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
    if i == 0:
        return 0
    if i == old_len:
        return now_len
    return None
