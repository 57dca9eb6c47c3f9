"""Reading whole notes: the bytes of one note (MCP resources), a page of its text (`engrama_read_note`), and the
list of the vault's notes.

A note is what search indexes: a `.md` file in the vault outside every dot-folder (`vault_sync.paths.classify`).
Paths outside the vault (`..`, absolute, a symlink leading out) are refused by `resolve_in_vault`; Obsidian's
`.trash`, `.obsidian` and other dot-folders, files that are not Markdown, and a sync tool's conflict copies are
refused here, each with what to do instead. Every read goes to the disk, so the answer is the note as it is now,
not as the graph last saw it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from server.runtime import Runtime
from server.services.errors import EntityNotFound, NoteNotFound, ServiceError
from server.services.schema import require_name
from server.store import Node, memory_sql
from vault_sync.errors import PathOutsideVault
from vault_sync.frontmatter import bom_length
from vault_sync.paths import classify, conflict_original, vault_path
from vault_sync.scan import scan_vault
from vault_sync.writer import read_note as read_note_file

DEFAULT_PAGE_CHARS = 20_000  # about 5,000 tokens: a long note is read in pages the model asks for
MAX_PAGE_CHARS = 200_000
MAX_LINKS = 100  # outgoing links listed with a note; a hub note says how many more there are


@dataclass(frozen=True)
class NoteFile:
    path: str  # vault-relative, POSIX
    size: int  # bytes


@dataclass(frozen=True)
class Link:
    name: str
    label: str
    rel_type: str  # LINKS_TO for a wikilink in the body; the relation type for a `relations:` entry
    path: str | None  # the linked note; None for a link to a note that does not exist yet


@dataclass(frozen=True)
class NotePage:
    path: str
    id: str | None  # the note's engrama_id; None while the graph has not read the note yet
    label: str | None
    name: str | None
    text: str  # this page of the note's text (a BOM removed; line endings as in the file)
    offset: int  # where this page starts, in characters of the whole text
    total_chars: int
    next_offset: int | None  # where the next page starts; None when this page reaches the end
    links: list[Link]
    links_total: int  # outgoing links and relations in the graph (more than `links` when that was capped)
    backlinks: int  # notes and entities that link to this one
    replaced_bytes: bool  # the file is not valid UTF-8: undecodable bytes are shown as U+FFFD


def note_path(rt: Runtime, rel: str) -> str:
    """The normalised vault path of the note `rel` names; refuses what search would not index, saying why."""
    if not rel or not rel.strip():
        raise ServiceError("path is empty; give a vault-relative note path such as Projects/Engrama.md")
    root = rt.vault
    path = vault_path(root, rel.strip())
    kind = classify(path)
    if kind == "trash":
        raise PathOutsideVault(f"{path!r} is in Obsidian's trash: a deleted note, not part of the memory")
    if kind == "conflict":
        raise ServiceError(
            f"{path!r} is a sync tool's conflict copy of {conflict_original(path)!r}; merge the two in "
            "Obsidian, then read the note"
        )
    if kind != "note":
        raise PathOutsideVault(
            f"{path!r} is not a note: only Markdown (.md) files outside dot-folders such as .obsidian and "
            ".trash are read, as search indexes them"
        )
    return path


async def note_bytes(rt: Runtime, rel: str) -> tuple[str, bytes]:
    """The note's vault path and its exact bytes, read from the disk now."""
    path = note_path(rt, rel)
    try:
        data, _ = await asyncio.to_thread(read_note_file, rt.vault, path)
    except FileNotFoundError:
        raise NoteNotFound(
            f"there is no note at {path!r}; paths are relative to the vault and case-sensitive "
            "(engrama_search shows each note's path)"
        ) from None
    return path, data


async def list_notes(rt: Runtime) -> list[NoteFile]:
    """Every note in the vault, sorted by path (one walk: a stat per note)."""
    scan = await asyncio.to_thread(scan_vault, rt.vault)
    return [NoteFile(entry.rel_path, entry.size) for entry in scan.notes]


async def read_note(
    rt: Runtime,
    *,
    path: str | None = None,
    name: str | None = None,
    offset: int = 0,
    max_chars: int = DEFAULT_PAGE_CHARS,
) -> NotePage:
    """A page of one note's text, found by vault path or by entity name, with its identity and links."""
    if path is None and name is None:
        raise ServiceError("give the note's path (e.g. Projects/Engrama.md) or its name (e.g. Engrama)")
    if path is not None and name is not None:
        raise ServiceError("give either path (e.g. Projects/Engrama.md) or name (e.g. Engrama), not both")
    if offset < 0 or not 1 <= max_chars <= MAX_PAGE_CHARS:
        raise ServiceError(f"offset must be 0 or more and max_chars between 1 and {MAX_PAGE_CHARS:,}")
    node = None
    if name is not None:
        node = await _node_with_note(rt, require_name(name))
        path = node.path
    assert path is not None
    path, data = await note_bytes(rt, path)
    if node is None:
        state = await rt.store.file_state(path)
        node = await rt.store.get_node(state.node_id) if state and state.node_id else None
    body = data[bom_length(data) :]
    try:
        text, replaced = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, replaced = body.decode("utf-8", errors="replace"), True
    if offset > len(text):
        raise ServiceError(f"offset {offset:,} is past the end of {path!r} ({len(text):,} characters)")
    end = min(offset + max_chars, len(text))
    links, total, backlinks = await _links(rt, node)
    return NotePage(
        path=path,
        id=node.id if node else None,
        label=node.label if node else None,
        name=node.name if node else None,
        text=text[offset:end],
        offset=offset,
        total_chars=len(text),
        next_offset=end if end < len(text) else None,
        links=links,
        links_total=total,
        backlinks=backlinks,
        replaced_bytes=replaced,
    )


async def _node_with_note(rt: Runtime, name: str) -> Node:
    """The entity called `name` (case-insensitive; aliases, file names and paths count, as Obsidian resolves a
    link) that has a note."""
    nodes = await rt.store.find_nodes(name)
    with_note = [n for n in nodes if n.path]
    namesakes = [n for n in with_note if n.name.casefold() == with_note[0].name.casefold()]
    if len(namesakes) > 1:  # People/Mercury.md and Technologies/Mercury.md: which one is not for us to guess
        listed = ", ".join(f"{n.path} ({n.label})" for n in namesakes[:5])
        raise ServiceError(
            f"{len(namesakes)} notes are called {with_note[0].name!r}: {listed}; give the one meant as path"
        )
    if with_note:
        return with_note[0]
    archived = [
        n for n in await rt.store.find_nodes(name, include_archived=True) if n.path and n.status == "archived"
    ]
    for node in archived:  # archived by its note's `status:` line: the note is there to read
        if node.path and await rt.store.file_state(node.path) is not None:
            return node
    if archived:  # its note was deleted since: "no note yet" would send the assistant looking for one
        raise NoteNotFound(
            f"the note of {archived[0].name!r} ({archived[0].path}) was deleted, and the entity is archived; "
            "engrama_context and engrama_search with include_archived=true show what was known about it"
        )
    if nodes:
        raise NoteNotFound(
            f"{nodes[0].name!r} has no note yet (it is only named by links or kept in the graph); "
            "engrama_context shows what is known about it"
        )
    raise EntityNotFound(f"nothing is called {name!r}; engrama_search finds notes by their words")


async def _links(rt: Runtime, node: Node | None) -> tuple[list[Link], int, int]:
    if node is None:
        return [], 0, 0
    rows, _ = await rt.store.read(memory_sql.neighbourhood, node.id, 1, 10_000)
    outgoing = [Link(n.name, n.label, rel, n.path) for n, rel, direction, _, _ in rows if direction == "out"]
    backlinks = len({n.id for n, _, direction, _, _ in rows if direction == "in"})
    return outgoing[:MAX_LINKS], len(outgoing), backlinks
