"""How insights look in the vault: the section written into notes, an approved insight's own note, and the
note that lists dismissed insights. Pure text; the files are written by `vault_sync.writer`.

Wikilinks name a note by its vault path without `.md` and show the entity's name (`[[Projects/A|A]]`), so
they resolve to exactly that note however many notes share a name; an entity without a note (a stub) is
linked by name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from server.store.insights_sql import InsightRow

DISMISSED_NOTE_NAME = "Dismissed insights"
ABOUT_LINE = "About: "
_UNSAFE_IN_FILE_NAMES = re.compile(r'[\\/:*?"<>|#^\[\]\x00-\x1f]+')
MAX_FILE_STEM = 120


@dataclass(frozen=True)
class EntityLink:
    """An entity as an insight links to it."""

    id: str
    name: str
    path: str | None

    def wikilink(self) -> str:
        if self.path:
            target = self.path[:-3] if self.path.lower().endswith(".md") else self.path
            return f"[[{target}|{self.name}]]" if target != self.name else f"[[{target}]]"
        return f"[[{self.name}]]"


def decided_day(row: InsightRow) -> str:
    return (row.decided_at or row.updated_at)[:10]


def section_markdown(row: InsightRow, entities: Sequence[EntityLink], host_path: str | None) -> str:
    """The inside of the marked section written into the note at `host_path` (an Obsidian callout).

    The host note itself is left out of the links: a note linking to itself would make a stub of its own name.
    """
    others = [e.wikilink() for e in entities if e.path != host_path]
    lines = [f"> [!tip] Insight: {row.title}", f"> {' '.join(row.body.split())}"]
    if others:
        lines.append(f"> {ABOUT_LINE}{', '.join(others)}")
    lines.append(f"> Confidence {row.confidence:.2f} · approved {decided_day(row)}")
    return "\n".join(lines)


def insight_note(row: InsightRow, entities: Sequence[EntityLink], engrama_id: str, label: str) -> bytes:
    """The note of an approved insight: the decision in its frontmatter, ABOUT relations to its entities."""
    meta = {
        "engrama_id": engrama_id,
        "type": label,
        "name": row.title,
        "insight_key": row.key,
        "insight_status": row.status,
        "pattern": row.pattern,
        "confidence": row.confidence,
        "decided_at": row.decided_at or row.updated_at,
    }
    links = [e.wikilink() for e in entities]
    if links:
        meta["relations"] = {"ABOUT": links}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    body = [row.body.strip(), ""]
    if links:
        body += [ABOUT_LINE + ", ".join(links), ""]
    body.append(f"*Found by reflect ({row.pattern}), approved {decided_day(row)}.*")
    return ("---\n" + front + "---\n" + "\n".join(body) + "\n").encode("utf-8")


def insight_body(note_text: str) -> str:
    """The insight's own words from the body of its note (what `insight_note` put before the About line)."""
    return note_text.split("\n" + ABOUT_LINE, 1)[0].split("\n*Found by reflect", 1)[0].strip()


def dismissed_note(engrama_id: str, label: str) -> bytes:
    """A new, empty list of dismissed insights."""
    meta = {"engrama_id": engrama_id, "type": label, "name": DISMISSED_NOTE_NAME}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False)
    intro = (
        "Insights you dismissed. engrama-vault will not propose them again, and reads this list back when its "
        "database is rebuilt. Each line ends with the insight's key."
    )
    return ("---\n" + front + "---\n" + intro + "\n\n").encode("utf-8")


def dismissed_item(row: InsightRow) -> str:
    """The text of one line of the dismissed list (the key is added by `append_list_item`)."""
    return f"{decided_day(row)} · {row.title}"


def note_file_stem(title: str) -> str:
    """A file name (without .md) for an insight's note: no characters Obsidian or the OS refuse."""
    stem = " ".join(_UNSAFE_IN_FILE_NAMES.sub(" - ", title).split()).strip(" .-")
    return stem[:MAX_FILE_STEM].rstrip(" .-") or "Insight"
