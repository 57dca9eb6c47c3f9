"""The brief as Markdown within a token budget: wikilinks, token estimates, and cutting from the least important.

Token estimate (`estimate_tokens`): ASCII characters / `CHARS_PER_TOKEN` + non-ASCII UTF-8 bytes / 2, rounded
up. The only tokenizer this package ships is MiniLM's WordPiece (server/embeddings/minilm/tokenizer.json, used
with the [local] extra). Measured with it, in characters per token: the example vault's notes 2.5-3.3, the
docs 2.8-3.3, briefs of the example vault 3.3; made-up words are the worst case: vaultgen's notes 2.4-2.5,
its briefs 2.0-2.4, the lowest (2.03) a first brief that is nothing but new notes' made-up names; a UUID
line 1.3 (briefs carry none). Chat models' tokenizers cannot be run offline here; on English they spend fewer
tokens than WordPiece. So 1.8 characters per token keeps the estimate at least 13% above MiniLM's count on
every brief measured, at the price of filling about 60% of the budget with English text. A non-ASCII
character counts one token per two UTF-8 bytes (accented letters one, CJK 1.5, emoji two).
bench/brief_bench.py prints the estimate beside MiniLM's count for every brief size it reports, and
tests/test_brief.py checks the estimate stays above MiniLM's count on the example vault's notes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

CHARS_PER_TOKEN = 1.8
MAX_ITEM_CHARS = 320  # one item never takes more than about 180 tokens of the budget
# When over budget, sections lose items from the least important up, first down to this many each, then to
# one, then whole sections go: every kind of news keeps a line as long as the budget allows.
FLOORS = (3, 1, 0)


def estimate_tokens(text: str) -> int:
    """A conservative token count for `text` (see the module docstring for how it was chosen)."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    other_bytes = len(text.encode("utf-8")) - ascii_chars
    return math.ceil(ascii_chars / CHARS_PER_TOKEN + other_bytes / 2)


@dataclass(frozen=True)
class Item:
    """One line of a section: Markdown text, and the note it is about (for the JSON form)."""

    text: str
    name: str | None = None
    path: str | None = None
    covers: int = 1  # how many notes or changes the line names


@dataclass(frozen=True)
class Section:
    """A part of the brief; `items` are ranked, `total` is how many there were before the budget cut."""

    key: str
    title: str
    items: tuple[Item, ...]
    total: int

    def heading(self, shown: int) -> str:
        covered = sum(item.covers for item in self.items[:shown])
        counted = f" ({covered} of {self.total})" if covered < self.total else ""
        return f"## {self.title}{counted}"

    def lines(self, shown: int) -> list[str]:
        """The heading and the first `shown` items; nothing when `shown` is 0."""
        return [self.heading(shown)] + [f"- {item.text}" for item in self.items[:shown]] if shown else []


def one_line(text: str, limit: int = MAX_ITEM_CHARS, *, links: bool = True) -> str:
    """`text` on one line, cut at a word to at most `limit` characters (with an ellipsis when cut); with `links`
    (text holding links) never inside a link: one cut open breaks the line in Obsidian (review 21d)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0] if " " in flat[: limit - 1] else flat[: limit - 1]
    return (_whole_links(cut).rstrip(" ,;:") if links else cut) + "…"


def _whole_links(text: str) -> str:
    """`text` without a link left open at its end (`[[...`, `[text` or `[text](path`), cut before it."""
    opened = text.rfind("[")
    if opened != -1 and text.find("]", opened) == -1:
        return _whole_links(text[:opened].rstrip("["))
    target = text.rfind("](")
    if target != -1 and text.find(")", target) == -1 and (start := text.rfind("[", 0, target)) != -1:
        return _whole_links(text[:start])
    return text


def show_value(value: Any, limit: int = 60) -> str:
    """A property value as a reader sees it: strings quoted, lists bracketed, long values cut."""
    if value is None:
        return "(unset)"
    if isinstance(value, str):
        return '"' + one_line(value, limit, links=False) + '"'
    if isinstance(value, list):
        return one_line("[" + ", ".join(show_value(v, limit) for v in value) + "]", limit, links=False)
    return one_line(str(value), limit, links=False)


_LINK_UNSAFE = re.compile(r"[\[\]|#^]")


def wikilink(name: str, path: str | None, ambiguous: set[str]) -> str:
    """The Obsidian link to an entity's note: `[[stem]]`, or `[[stem|Name]]` when the name differs from the
    file name, or `[[folder/stem|Name]]` when another note has the same file name (Obsidian would then open
    whichever it finds first). An entity without a note is named in bold."""
    shown = " ".join(_LINK_UNSAFE.sub(" ", name).split())
    if not path:
        return f"**{shown}**"
    target = path[:-3] if path.lower().endswith(".md") else path
    if _LINK_UNSAFE.search(target):
        # `[[C# notes]]` opens a heading of note "C", `[[Plan | v2]]` note "Plan " (review 21d): a file name
        # made outside Obsidian may hold what a wikilink cannot; a Markdown link to its vault path opens it.
        return f"[{' '.join(re.sub(r'[][]', ' ', name).split())}]({quote(path)})"
    stem = PurePosixPath(target).name
    if stem.casefold() not in ambiguous:
        target = stem
    return f"[[{target}]]" if target == name else f"[[{target}|{shown}]]"


def fit(header: Sequence[str], sections: Sequence[Section], budget: int) -> tuple[str, list[Section]]:
    """The Markdown of `header` and as much of `sections` (most important first) as fits `budget` tokens,
    and the sections as shown (items cut to what is shown; `total` kept)."""
    shown = [len(s.items) for s in sections]
    cost = [_cost(s.lines(n)) for s, n in zip(sections, shown, strict=True)]
    fixed = _cost(header)
    for floor in FLOORS:
        for i in reversed(range(len(sections))):
            while fixed + sum(cost) > budget and shown[i] > floor:
                shown[i] -= 1
                cost[i] = _cost(sections[i].lines(shown[i]))
    lines = list(header)
    for section, n in zip(sections, shown, strict=True):
        lines += section.lines(n)
    text = "\n".join(lines) + "\n"
    while estimate_tokens(text) > budget and lines:  # only a header larger than the budget gets here
        lines[-1] = one_line(lines[-1], max(0, len(lines[-1]) // 2 - 1))
        if len(lines[-1]) < 8:
            lines.pop()
        text = "\n".join(lines) + "\n"
    kept = [replace(s, items=s.items[:n]) for s, n in zip(sections, shown, strict=True) if n]
    return text, kept


def _cost(lines: Sequence[str]) -> int:
    # Each line costs at least what it costs alone, so the sum bounds the whole text's estimate from above.
    return sum(estimate_tokens(line + "\n") for line in lines)
