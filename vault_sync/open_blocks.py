"""What a note's Markdown leaves open at its end: text appended there would show as part of it.

engrama appends observations, insight sections and list items after the last line of a note. When the person's
text ends inside a fenced code block whose closing fence is not written yet (or an HTML comment `<!--`, or an
Obsidian comment `%%`), Obsidian shows everything after it as part of that block: the appended bullet as code,
an insight's links dead. Closing the block would mean adding bytes to the person's text, so the append is
refused instead, saying what is open (`require_closed`).

Fences follow CommonMark: a line of three or more backticks or tildes indented at most three spaces opens a
block, which a fence of the same character, at least as long and with nothing after it, closes. Comment marks
inside a code block, or inside inline code, do not count.
"""

from __future__ import annotations

import re

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import read_frontmatter

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(`+).*?\1")


def open_block(body: str) -> str | None:
    """What `body` (Markdown) leaves open at its end, said for a person; None when nothing is."""
    fence: str | None = None  # the opening fence's run of backticks or tildes
    comment = obsidian = False  # inside <!-- ... -->, inside %% ... %%
    for line in body.splitlines():
        if fence is not None:
            found = _FENCE.match(line)
            if found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence):
                fence = None if not found.group(2).strip() else fence
            continue
        if not comment and not obsidian:
            found = _FENCE.match(line)
            if found and not (
                found.group(1)[0] == "`" and "`" in found.group(2)
            ):  # ``` info strings hold no `
                fence = found.group(1)
                continue
            line = _CODE_SPAN.sub("", line)
        at = 0
        while True:
            if comment or obsidian:
                close = "-->" if comment else "%%"
                end = line.find(close, at)
                if end < 0:
                    break
                comment = obsidian = False
                at = end + len(close)
                continue
            html, obs = line.find("<!--", at), line.find("%%", at)
            if html < 0 and obs < 0:
                break
            if obs < 0 or 0 <= html < obs:
                comment, at = True, html + 4
            else:
                obsidian, at = True, obs + 2
    if fence is not None:
        return f"a code block (its {fence} line has no closing {fence} line)"
    if comment:
        return "an HTML comment (a <!-- with no -->)"
    if obsidian:
        return "an Obsidian comment (a %% with no closing %%)"
    return None


def require_closed(data: bytes) -> None:
    """Raise MalformedNote when the note's body ends inside a block (`open_block`): nothing may be appended."""
    span, _ = read_frontmatter(data)
    body = data[span.end if span else 0 :].decode("utf-8", errors="replace")
    if (what := open_block(body)) is not None:
        raise MalformedNote(
            f"the note ends inside {what}, so anything appended would show as part of it; engrama wrote "
            "nothing. Close it in the note, then try again"
        )
