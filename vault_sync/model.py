"""Frozen values that travel between the vault side and the graph side.

These are the words of the contract in DESIGN.md sections 2-3: a note read from disk becomes a `ParsedNote`,
its body becomes `Chunk`s, its frontmatter relations and wikilinks become `Link`s. The store (in `server`)
consumes them through `vault_sync.protocol.GraphPort`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WIKILINK_REL = "LINKS_TO"


@dataclass(frozen=True)
class Link:
    """An outgoing edge as the note states it.

    `target` is the link target with brackets, alias (`|...`), heading (`#...`) and block (`#^...`) removed,
    e.g. `[[Projects/Engrama#Plan|the plan]]` -> `Projects/Engrama`. Resolution to a node happens in the store.
    """

    rel_type: str
    target: str
    origin: str  # "frontmatter" | "wikilink" | "tool"


@dataclass(frozen=True)
class Chunk:
    """One passage of a note body, as indexed for full text and vectors."""

    ordinal: int
    heading: str  # the heading path the passage sits under ("" before the first heading)
    text: str  # passage text, without the note-level context line
    # How many characters at the start of `text` repeat the end of the previous passage (windows overlap),
    # with the separator after them: `text[repeats:]` is what this passage adds. The whole-note index holds
    # each line once (`server.store.passages_sql.note_text`).
    repeats: int = 0


@dataclass(frozen=True)
class ParsedNote:
    """Everything the graph needs from one note file."""

    path: str  # vault-relative, POSIX separators, e.g. "Projects/Engrama.md"
    engrama_id: str | None  # None when the note has no engrama_id line yet
    label: str  # validated node label ("Note" when unknown)
    name: str
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)  # JSON-able; includes an unknown `type` if any
    links: tuple[Link, ...] = ()
    body: str = ""
    has_frontmatter: bool = False
    # Temporal keys the note may set (issue #8); a value that is not a date, or a confidence outside 0-1,
    # stays a plain property instead.
    valid_from: str | None = None  # ISO date or UTC date-time
    valid_to: str | None = None  # set: the fact no longer holds (superseded); its confidence is halved
    confidence: float | None = None  # 0-1; the graph's default is 1.0
    # When the note began, if `valid_from:` does not say (issue 12, `vault_sync/began.py`): the earliest date
    # among its `date:` / `created:` keys (they stay properties too), and the earliest time its file vouches
    # for (creation or modification time; set by the reader, which has the file's stat, None otherwise).
    began: str | None = None  # ISO date or UTC date-time
    file_began: str | None = None  # UTC date-time
    # The keys of the insight sections engrama wrote into the note (an approved insight it carries): the
    # approval stays in the vault with them, even when the person deleted the insight's own note.
    insight_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileState:
    """What the sync remembers about one file on disk."""

    path: str
    size: int
    mtime_ns: int
    checksum: str  # sha256 hex of the bytes
    node_id: str | None
    ino: int | None = None  # the file's inode number when read: a rename keeps it, a copy has another
    # When the person last changed the file, when that is not `mtime_ns`: engrama's own id line moves the
    # modification time without anyone touching the note (`NoteReader.write_id` keeps the time from before it).
    touched_ns: int | None = None


@dataclass(frozen=True)
class NodeRef:
    """A node as the vault side needs to see it."""

    id: str
    label: str
    name: str
    path: str | None
    status: str  # "active" | "archived" | "stub"
    ino: int | None = None  # the inode of the file at `path` when last read (None: unknown)


@dataclass(frozen=True)
class NoteUpdate:
    """One note to apply to the graph: its parsed content, the node id it belongs to, passages, file state."""

    note: ParsedNote
    node_id: str
    chunks: tuple[Chunk, ...]
    state: FileState
