"""How insights are worded: names joined into readable lists, counts with their nouns."""

from __future__ import annotations

from collections.abc import Sequence

MAX_LISTED = 8  # beyond this a list says "and N more": a title or a chat line must stay readable


def join_names(names: Sequence[str]) -> str:
    """`A`, `A and B`, `A, B and C`, `A, B, ... and 4 more`."""
    items = list(names)
    if len(items) > MAX_LISTED:
        rest = len(items) - (MAX_LISTED - 1)
        items = [*items[: MAX_LISTED - 1], f"{rest} more"]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 entity`, `3 entities`."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
