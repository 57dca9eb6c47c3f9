"""When two names are one name: whatever their case (as Obsidian matches links) and whatever Unicode form their
accents are in.

A file named on a Mac's older file system (HFS+), or synced from one, spells `Café` as `Cafe` plus a combining
accent (NFD); the same name typed anywhere else is one precomposed `é` (NFC). They look alike and are one name to
the person, but not to a byte comparison: the graph held two entities called Café, and a tool writing "Café"
created a second note beside the person's. So names are stored composed (`canonical`) and compared by `fold`.
Names are also trimmed, with inner whitespace made one space, as a tool's name is. Paths are never changed: the
file keeps the name the person's system gave it."""

from __future__ import annotations

import unicodedata


def canonical(text: str) -> str:
    """`text` composed (NFC), trimmed, its inner whitespace one space: how an entity's name is stored and written
    (a tool's name is cleaned the same way, so `Topic .md` and "Topic" are one name)."""
    return unicodedata.normalize("NFC", " ".join(text.split()))


def fold(text: str) -> str:
    """The key names are compared by: `canonical`, then case-folded, so canonically equal names get one key (the
    Unicode standard's canonical caseless match, D145)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", " ".join(text.split())).casefold())


# Characters that show as nothing (U+200C and U+200D, which scripts and emoji need, are not among them): a name
# copied from a web page or a chat often carries one (review 23h).
_INVISIBLE = dict.fromkeys(
    [0x00AD, 0x180E, 0x200B, 0x200E, 0x200F, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
)


def visible(text: str) -> str:
    """`text` without the characters that show as nothing."""
    return text.translate(_INVISIBLE)
