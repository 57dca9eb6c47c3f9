"""Obsidian wikilinks: find them in a note body and reduce each to the note it points at.

Every form resolves to its target note: `[[X]]`, `[[X|alias]]`, `[[X#Heading]]`, `[[X#^block]]`,
`![[X]]` (embed), `[[folder/X]]`, `[[X.md]]`. Links inside fenced code blocks and inline code spans are
skipped because Obsidian does not link there, and `[[#Heading]]` points into the note itself.
"""

from __future__ import annotations

import re

from vault_sync.names import fold

# Obsidian forbids `[` and `]` in note names, so a link's inner text never contains them. An embed's `!`
# needs no matching: it points at the same note. (A pattern opening with a literal scans much faster.)
_LINK = re.compile(r"\[\[([^\[\]\r\n]+)\]\]")
_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})(.*)")
_TICKS = re.compile(r"`+")


def link_target(inner: str) -> str:
    """The note a link's inner text points at: `folder/X#Heading|alias` -> `folder/X` ("" for self links)."""
    target = inner.split("|", 1)[0].split("#", 1)[0]
    # Inside a table the alias pipe is escaped (`[[X\\|alias]]`), leaving a backslash behind.
    target = target.rstrip("\\").strip()
    if target[-3:].lower() == ".md":
        target = target[:-3].rstrip()
    return target


def _outside_fences(body: str) -> list[str]:
    """The parts of `body` that are not inside fenced code blocks (an unclosed fence runs to the end)."""
    if "```" not in body and "~~~" not in body:
        return [body]
    parts: list[str] = []
    kept: list[str] = []
    fence: str | None = None
    for line in body.splitlines(keepends=True):
        opening = _FENCE.match(line)
        if fence is None:
            # A backtick fence's info string may not contain backticks (CommonMark).
            if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
                fence = opening.group(1)
                parts.append("".join(kept))
                kept = []
            else:
                kept.append(line)
        elif (
            opening
            and opening.group(1)[0] == fence[0]
            and len(opening.group(1)) >= len(fence)
            and not opening.group(2).strip()
        ):
            fence = None  # a closing fence: same character, at least as long, nothing after it
    parts.append("".join(kept))
    return parts


def _without_code_spans(text: str) -> str:
    """`text` with inline code spans blanked: a run of N backticks opens a span that only the next run of
    exactly N backticks closes; a run with no partner is literal text."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    kept: list[str] = []
    pos = i = 0
    while i < len(runs):
        start, end = runs[i]
        partner = next((j for j in range(i + 1, len(runs)) if runs[j][1] - runs[j][0] == end - start), None)
        if partner is None:
            i += 1
            continue
        kept += [text[pos:start], " "]
        pos = runs[partner][1]
        i = partner + 1
    kept.append(text[pos:])
    return "".join(kept)


def extract_wikilinks(body: str) -> list[str]:
    """Link targets of a note body in order of first appearance, de-duplicated case-insensitively."""
    if "[[" not in body:
        return []
    targets: list[str] = []
    seen: set[str] = set()
    for part in _outside_fences(body):
        if "`" in part:
            part = _without_code_spans(part)
        for inner in _LINK.findall(part):
            target = link_target(inner)
            folded = fold(target)
            if target and folded not in seen:
                seen.add(folded)
                targets.append(target)
    return targets


def relation_targets(value: str) -> list[str]:
    """The targets named by one relation value: `"[[X]]"`, `[[X|a]]` or a plain name `X` -> ["X"].

    A value holding several links (`"[[A]], [[B]]"`) names each of them. A plain name is taken as written
    (only trimmed): `C#` is a name there, not a heading link.
    """
    value = value.strip()
    if "[[" not in value:
        return [value] if value else []
    return [t for t in (link_target(inner) for inner in _LINK.findall(value)) if t]


def relation_target(value: str) -> str | None:
    """The first target named by one relation value, or None when it names none."""
    targets = relation_targets(value)
    return targets[0] if targets else None
