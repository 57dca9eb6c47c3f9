"""`engrama_ingest`: hand the agent a source to read, guidance on what to extract with the active profile,
and the existing entities it most likely mentions, so it remembers into them instead of duplicating.

Ingest itself writes nothing: the agent extracts, then calls engrama_remember / engrama_relate.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass

from server.runtime import Runtime
from server.services.errors import NoteNotFound, ServiceError
from server.services.guidance import extraction_guidance
from server.services.reading import note_path
from server.store import Node
from vault_sync.frontmatter import decode_note
from vault_sync.wikilinks import extract_wikilinks
from vault_sync.writer import read_note

SOURCE_TYPES = ("note", "text", "conversation")
MAX_CONTENT_CHARS = 200_000
MAX_EXISTING = 15
MAX_NAME_PROBES = 40
QUERY_TERMS = 30
# Capitalised words and runs of them ("Maya Lindqvist", "SQLite", "C++"): the likeliest entity names.
_NAME_LIKE = re.compile(r"\b[A-Z][\w+#.-]*[\w+#](?:[ \t]+[A-Z][\w+#.-]*[\w+#])*|\b[A-Z]\b")


@dataclass(frozen=True)
class ExistingEntity:
    id: str
    label: str
    name: str
    path: str | None
    score: float  # 1.0 for an exact name match; below that, relative text similarity


@dataclass(frozen=True)
class Ingested:
    content: str
    guidance: str
    existing: list[ExistingEntity]
    truncated: bool


async def ingest(
    rt: Runtime, source: str, source_type: str = "note", context_hint: str | None = None
) -> Ingested:
    """The content of a note (vault path) or of raw text, with extraction guidance and likely duplicates."""
    if source_type not in SOURCE_TYPES:
        raise ServiceError(f"source_type must be one of {', '.join(SOURCE_TYPES)}, not {source_type!r}")
    if not source.strip():
        raise ServiceError("source is empty: give a vault path (source_type note) or the text to ingest")
    note_node: Node | None = None
    if source_type == "note":
        content, note_node = await _read_vault_note(rt, source.strip())
    else:
        content = source
    truncated = len(content) > MAX_CONTENT_CHARS
    content = content[:MAX_CONTENT_CHARS]
    existing = await _existing(rt, content, context_hint, note_node)
    guidance = extraction_guidance(rt.profile, source_type, note_node, context_hint, truncated)
    return Ingested(content=content, guidance=guidance, existing=existing, truncated=truncated)


async def _read_vault_note(rt: Runtime, rel: str) -> tuple[str, Node | None]:
    """The text of the note at `rel` and its node. What `engrama_read_note` refuses is refused (a path out of the
    vault, `.obsidian`'s settings, which may hold a plugin's keys, the trash, a conflict copy), before anything
    is opened; the path is named as the graph knows it ("P\\N.md" is "P/N.md")."""
    root = rt.vault
    rel = note_path(rt, rel)
    try:
        data, _ = await asyncio.to_thread(read_note, root, rel)
    except FileNotFoundError:
        raise NoteNotFound(
            f"there is no note at {rel!r}; give a vault-relative path such as Projects/Engrama.md, or pass "
            "the text itself with source_type 'text'"
        ) from None
    text = decode_note(data, source=rel)
    state = await rt.store.file_state(rel)
    node = await rt.store.get_node(state.node_id) if state and state.node_id else None
    return text, node


def name_candidates(content: str) -> list[str]:
    """Likely entity names in `content`: wikilink targets first, then capitalised phrases by frequency."""
    linked = extract_wikilinks(content)
    counts = Counter(m.group(0) for m in _NAME_LIKE.finditer(content))
    phrases = [p for p, _ in counts.most_common() if len(p) > 1]
    seen: set[str] = set()
    names: list[str] = []
    for name in [*linked, *phrases]:
        if name.casefold() not in seen:
            seen.add(name.casefold())
            names.append(name)
    return names


async def _existing(
    rt: Runtime, content: str, hint: str | None, note_node: Node | None
) -> list[ExistingEntity]:
    """Exact name matches (score 1.0), then the best full-text/semantic matches (scaled below 1.0)."""
    found: dict[str, ExistingEntity] = {}
    names = name_candidates(content)
    for name in names[:MAX_NAME_PROBES]:
        for node in await rt.store.find_nodes(name):
            if node.id not in found and (note_node is None or node.id != note_node.id):
                found[node.id] = ExistingEntity(node.id, node.label, node.name, node.path, 1.0)
    query = " ".join([hint or "", *names[:QUERY_TERMS]]).strip()
    for hit in await _similar(rt, query):
        if hit.id not in found and (note_node is None or hit.id != note_node.id):
            found[hit.id] = hit
    return list(found.values())[:MAX_EXISTING]


async def _similar(rt: Runtime, query: str) -> list[ExistingEntity]:
    """Search-service matches for `query`; none when the search service is not installed."""
    try:
        from server.search.service import search
    except ModuleNotFoundError as exc:
        if exc.name != "server.search.service":
            raise
        return []
    if not query:
        return []
    response = await search(rt, query[:1000], limit=MAX_EXISTING)
    top = max((r.score for r in response.results), default=0.0) or 1.0
    return [
        ExistingEntity(r.id, r.label, r.name, r.path, round(0.9 * max(r.score, 0.0) / top, 3))
        for r in response.results
    ]
