"""Split a note body into passages for full-text and vector search (DESIGN.md section 7).

A passage is a window of *lines* that sit under the same heading path. Lines are the unit because in Obsidian a
single newline is a visible line break: people write one thought, one list item or one chat turn per line, and
prose paragraphs are usually one long line. So:

- a heading (ATX, outside code fences) closes the current section; passages never straddle headings;
- within a section, windows take at most `max_lines` lines and at most `max_chars` characters, except that a
  window of tiny lines keeps growing until it holds `min_chars` (a shopping list should not become 2-word chunks);
- consecutive windows share trailing lines, up to `overlap` characters and at most half the window. A note of
  one short line per turn (a chat log) thus becomes overlapping windows of a few turns, which found the
  evidence turn better than single turns or disjoint windows on LoCoMo (shared/FACTS.md);
- a line longer than `max_chars` is cut into sentences, which then pack like lines (counting as no line at all,
  so prose fills up to `max_chars` and overlaps by its last sentence);
- a fenced code block is one unit (cut at line ends when too long), so a `# comment` in it is not a heading.

The function is pure and deterministic; frontmatter is not part of the body (the caller strips it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vault_sync.model import Chunk

DEFAULT_MAX_CHARS = 1000  # ~250 word-pieces: what small embedding models (256-token limit) actually read
DEFAULT_OVERLAP = 300  # about two chat turns, or one short sentence of prose
DEFAULT_MAX_LINES = 5  # ~600 chars of chat: best session MRR on LoCoMo among 1-8 (bench/_explore_locomo.py)
DEFAULT_MIN_CHARS = 200
HEADING_SEPARATOR = " > "

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
# A sentence ends at . ! ? (or their CJK forms) followed by space, or right after the CJK forms.
# A sentence ends at . ! ? … followed by white space, or right after CJK full stops. Matched forward and cut
# with finditer: the equivalent split on lookbehinds was twice as slow on long prose lines.
_SENTENCE_END = re.compile(r"[.!?…]\s+|[。！？]")


def _sentences(text: str) -> list[str]:
    """`text` cut after each sentence end; the punctuation stays, the white space after it goes."""
    pieces, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        pieces.append(text[start : end.start() + 1])
        start = end.end()
    pieces.append(text[start:])
    return pieces


@dataclass(frozen=True, slots=True)
class _Unit:
    """One line (or a piece of a long line) waiting to be packed into a passage."""

    text: str
    lines: int  # how much it counts toward max_lines: 1 for a line, 0 for a sentence piece
    glued: bool = False  # continues the previous unit's line, so it joins with a space, not a newline


def chunk_body(
    body: str,
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    overlap: int = DEFAULT_OVERLAP,
    max_lines: int = DEFAULT_MAX_LINES,
    min_chars: int = DEFAULT_MIN_CHARS,
) -> list[Chunk]:
    """Split `body` into passages under their heading paths (see the module docstring for the rules).

    `heading` of each chunk is the heading path, e.g. `"Plan > Risks"`, and `""` before the first heading.
    Ordinals count from 0 in body order. An empty or whitespace-only body gives no chunks.
    """
    if max_chars < 1 or max_lines < 1 or overlap < 0:
        raise ValueError("max_chars and max_lines must be positive and overlap not negative")
    chunks: list[Chunk] = []
    for heading, lines in _sections(body):
        units = _units(lines, max_chars)
        for text, repeats in _windows(units, max_chars, overlap, max_lines, min_chars):
            chunks.append(Chunk(ordinal=len(chunks), heading=heading, text=text, repeats=repeats))
    return chunks


def _sections(body: str) -> list[tuple[str, list[str]]]:
    """Group the body's lines under heading paths; headings themselves are not passage text."""
    sections: list[tuple[str, list[str]]] = []
    path: list[tuple[int, str]] = []  # (level, title) of the open headings
    current: list[str] = []
    fence: str | None = None  # the opening fence while inside a code block
    for line in body.splitlines():
        fence_match = _FENCE.match(line)
        if fence is not None:
            if (
                fence_match
                and fence_match.group(1)[0] == fence[0]
                and len(fence_match.group(1)) >= len(fence)
            ):
                fence = None
        elif fence_match:
            fence = fence_match.group(1)
        elif line.startswith("#") and (heading := _HEADING.match(line)):
            sections.append((_path_text(path), current))
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, heading.group(2).strip()))
            current = []
            continue
        current.append(line)
    sections.append((_path_text(path), current))
    return [(heading, lines) for heading, lines in sections if any(line.strip() for line in lines)]


def _path_text(path: list[tuple[int, str]]) -> str:
    return HEADING_SEPARATOR.join(title for _, title in path if title)


def _units(lines: list[str], max_chars: int) -> list[_Unit]:
    """Turn a section's lines into packable units: lines, code blocks, and sentence pieces of long lines."""
    units: list[_Unit] = []
    block: list[str] | None = None  # lines of an open code block
    fence = ""
    for raw in lines:
        line = raw.rstrip()
        if block is not None:
            block.append(line)
            closing = _FENCE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                units.extend(_code_units(block, max_chars))
                block = None
            continue
        opening = _FENCE.match(line)
        if opening:
            block, fence = [line], opening.group(1)
            continue
        text = line.strip()
        if not text or _RULE.match(text):
            continue  # blank lines and horizontal rules carry no words
        if len(text) <= max_chars:
            units.append(_Unit(text, 1))
        else:
            pieces = _split_long(text, max_chars)
            units.extend(_Unit(piece, 0, glued=i > 0) for i, piece in enumerate(pieces))
    if block is not None:  # an unclosed fence runs to the end of the section, as Obsidian renders it
        units.extend(_code_units(block, max_chars))
    return units


def _code_units(block: list[str], max_chars: int) -> list[_Unit]:
    """A code block is one unit; a long one is cut at line ends into pieces of at most max_chars."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in block:
        for part in _split_long(line, max_chars) if len(line) > max_chars else [line]:
            if current and size + 1 + len(part) > max_chars:
                pieces.append("\n".join(current))
                current, size = [], 0
            current.append(part)
            size += len(part) + (1 if size else 0)
    if current:
        pieces.append("\n".join(current))
    return [_Unit(piece, 1) for piece in pieces if piece.strip()]


def _split_long(text: str, max_chars: int) -> list[str]:
    """Cut one long line into sentences; a sentence still over max_chars is cut at spaces (or hard)."""
    pieces: list[str] = []
    for sentence in _sentences(text):
        sentence = sentence.strip()
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", max_chars // 2, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            pieces.append(sentence[:cut].rstrip())
            sentence = sentence[cut:].lstrip()
        if sentence:
            pieces.append(sentence)
    return pieces


def _windows(
    units: list[_Unit], max_chars: int, overlap: int, max_lines: int, min_chars: int
) -> list[tuple[str, int]]:
    """Pack units into windows and slide forward, repeating trailing units up to `overlap` characters.
    Returns (text, repeats) per window: `text[repeats:]` is what the window adds to the one before."""
    windows: list[tuple[str, int]] = []
    start, before = 0, 0  # `before`: where the previous window ended (its units repeat up to there)
    while start < len(units):
        end, size, lines = start, 0, 0
        while end < len(units):
            unit = units[end]
            grown = size + len(unit.text) + (1 if end > start else 0)
            if end > start and (grown > max_chars or (lines + unit.lines > max_lines and size >= min_chars)):
                break
            end, size, lines = end + 1, grown, lines + unit.lines
        text = _join(units[start:end])
        windows.append((text, _repeated(units, start, end, before, text)))
        if end == len(units):
            break
        start, before = _next_start(units, start, end, overlap), end
    return windows


def _repeated(units: list[_Unit], start: int, end: int, before: int, text: str) -> int:
    """How many characters at the start of `text` (the window units[start:end]) the previous window, which
    ended at unit `before`, already held: its repeated units and the separator after them."""
    if before <= start:
        return 0
    if before >= end:
        return len(text)  # nothing new (a unit too long to join the repeated ones came next)
    return len(_join(units[start:before])) + 1


def repeated_prefix(previous: str, text: str) -> int:
    """`Chunk.repeats` of `text` recovered from the texts alone, for passages stored before it was recorded: the
    longest end of `previous` that starts after a line or sentence break, that `text` begins with, and that
    `text` continues past with a break (or is all of `text`). Equal to what `chunk_body` records, except where
    a note repeats itself word for word across the break (`tests/test_chunking.py`).

    Such an end begins with `text`'s first word, so only the places where that word occurs are tried (a
    search in C, not a loop over every character: a migration runs this on every stored passage)."""
    breaks = [i for i in (text.find("\n"), text.find(" ")) if i >= 0]
    first_word = text[: min(breaks, default=len(text))]
    start = previous.find(first_word, max(1, len(previous) - len(text)))
    while start != -1:
        size = len(previous) - start
        if previous[start - 1] in "\n " and text.startswith(previous[start:]):
            if size == len(text):
                return size
            if text[size] in "\n ":
                return size + 1
        start = previous.find(first_word, start + 1)
    return 0


def _join(units: list[_Unit]) -> str:
    parts = [units[0].text]
    for unit in units[1:]:
        parts.append((" " if unit.glued else "\n") + unit.text)
    return "".join(parts)


def _next_start(units: list[_Unit], start: int, end: int, overlap: int) -> int:
    """The first unit of the next window: repeat trailing units worth at most `overlap` characters and at
    most half the window, so a window always moves on by at least half its length."""
    back, repeated = end, 0
    while (end - back + 1) * 2 <= end - start and repeated + len(units[back - 1].text) <= overlap:
        back -= 1
        repeated += len(units[back].text) + 1
    return back
