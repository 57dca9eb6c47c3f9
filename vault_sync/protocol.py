"""The small protocol through which `vault_sync` talks to the graph.

The graph store in `server.store` satisfies it; `vault_sync` never imports `server`.
Every method is one unit of work (one transaction on the store side).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from vault_sync.model import Chunk, FileState, NodeRef, NoteUpdate, ParsedNote


class GraphPort(Protocol):
    async def file_states(self, paths: Sequence[str] | None = None) -> dict[str, FileState]:
        """Every file the graph knows (or those of `paths` it knows), keyed by vault-relative path."""
        ...

    async def file_state(self, path: str) -> FileState | None: ...

    async def files_with_inode(self, ino: int) -> list[FileState]:
        """The files the graph recorded with inode `ino` (a rename keeps a file's inode)."""
        ...

    async def nodes_by_ids(self, node_ids: Sequence[str]) -> dict[str, NodeRef]:
        """The nodes of those ids that exist, keyed by id (one query for a whole batch)."""
        ...

    async def apply_note(
        self, note: ParsedNote, node_id: str, chunks: Sequence[Chunk], state: FileState
    ) -> bool:
        """Upsert the node of a note and replace its edges, chunks and file state. True when the node is new.

        The node keeps its id across renames (`state.path` may differ from the stored one); links are
        resolved to nodes by file name, path, name or alias (case-insensitive), unresolved ones become stubs.
        """
        ...

    async def apply_notes(self, updates: Sequence[NoteUpdate]) -> list[bool]:
        """`apply_note` for many notes in one transaction (how a vault sync applies a batch)."""
        ...

    async def replace_text(self, node_id: str, chunks: Sequence[Chunk]) -> bool:
        """A known note that cannot be read as a note now: its passages become `chunks` (what its text says; none
        when it cannot be read at all), all else stays as last read. True when its indexed words changed."""
        ...

    async def archive_path(self, path: str) -> str | None:
        """The note at `path` is gone: archive its node, close its outgoing edges, forget the file.

        Returns the archived node id (None when the path was unknown)."""
        ...

    async def rekey_node(self, old: str, new: str) -> bool:
        """The note of node `old` now carries the id `new` (changed on another device): give the node that id,
        keeping its properties, history, relations and passages. False when `new` is taken or `old` is gone."""
        ...

    async def record_file_state(self, state: FileState) -> None:
        """Remember the bytes now on disk (after one of our own writes)."""
        ...

    async def record_inodes(self, inodes: Sequence[tuple[str, int]]) -> None:
        """The files at these paths, unchanged by size and modification time, are now these inodes (a vault
        copied or restored with its times): [(path, inode)]."""
        ...

    async def get_meta(self, key: str) -> str | None:
        """A small value kept beside the graph (e.g. what the last sync found for the person to look at)."""
        ...

    async def set_meta(self, key: str, value: str) -> None: ...
