"""What a note's Markdown leaves open at its end: text appended there would show as part of it.

engrama appends observations, insight sections and list items after the last line of a note. When the person's
text ends inside a fenced code block whose closing fence is not written yet, an HTML comment or `<pre>` block,
or an Obsidian `%%` comment block, Obsidian shows everything after it as part of that block: the appended
bullet as code, an insight's links dead. Closing the block would mean adding bytes to the person's text, so the
append is refused instead, saying what is open (`require_closed`).

Only blocks that begin at the top level can hold what is appended at the top level: a fence inside a list item
or a blockquote (a callout) ends with its container, and so does anything indented as code. So the scan looks
at top-level block starts only (indented at most three spaces, as CommonMark's block starts are), and never
at what is written inside a code block or a comment: `%%` in a Jupyter magic or a batch file, `<!--` in an HTML
example. A refusal the person cannot make sense of costs more than an append inside an unusual block, so a
comment mark in the middle of a line (inline) is left to the renderer.

- Fences follow CommonMark: three or more backticks or tildes open a block, which a fence of the same character,
  at least as long and with nothing after it, closes.
- An HTML comment block starts with `<!--` and ends at a line holding `-->` (`<!-->` and `<!--->` are whole
  comments); `<pre>`, `<script>`, `<style>` and `<textarea>` end at their closing tag.
- An Obsidian comment block starts with `%%` and ends at the next `%%`.
"""

from __future__ import annotations

import re

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import read_frontmatter

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_RAW = re.compile(r"^ {0,3}<(pre|script|style|textarea)(?=[\s>]|$)", re.IGNORECASE)


def open_block(body: str) -> str | None:
    """What `body` (Markdown) leaves open at its end, said for a person; None when nothing is."""
    fence: str | None = None  # the opening fence's run of backticks or tildes
    raw: str | None = None  # the tag of an open <pre>-like block
    comment: str | None = None  # "<!--" or "%%" while inside such a comment block
    for line in body.splitlines():
        if fence is not None:
            found = _FENCE.match(line)
            if found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence):
                fence = None if not found.group(2).strip() else fence
            continue
        if raw is not None:
            raw = None if f"</{raw}>" in line.lower() else raw
            continue
        if comment is not None:
            comment = None if ("-->" if comment == "<!--" else "%%") in line else comment
            continue
        if found := _FENCE.match(line):
            if not (found.group(1)[0] == "`" and "`" in found.group(2)):  # a ``` info string holds no `
                fence = found.group(1)
            continue
        if found := _RAW.match(line):
            tag = found.group(1).lower()
            raw = None if f"</{tag}>" in line.lower() else tag
            continue
        start = line.lstrip(" ")
        if len(line) - len(start) > 3:
            continue  # indented code, or a list item's continuation
        if start.startswith("<!--") and start.find("-->", 2) < 0:
            comment = "<!--"
        elif start.startswith("%%") and start.find("%%", 2) < 0:
            comment = "%%"
    if fence is not None:
        return f"a code block (its {fence} line has no closing {fence} line)"
    if raw is not None:
        return f"a <{raw}> block (it has no </{raw}>)"
    if comment == "<!--":
        return "an HTML comment (a <!-- with no -->)"
    if comment == "%%":
        return "an Obsidian comment (a %% with no closing %%)"
    return None


def require_closed(data: bytes, body: str | None = None) -> None:
    """Raise MalformedNote when the note's body ends inside a block (`open_block`): nothing may be appended.
    `body`: the note's body when the caller has it already."""
    if body is None:
        span, _ = read_frontmatter(data)
        body = data[span.end if span else 0 :].decode("utf-8", errors="replace")
    if (what := open_block(body)) is not None:
        raise MalformedNote(
            f"the note ends inside {what}, so anything appended would show as part of it; engrama wrote "
            "nothing. Close it in the note, then try again"
        )
