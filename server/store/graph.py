"""`GraphStore`: the async face of the graph. It satisfies `vault_sync.protocol.GraphPort`.

Every method is one unit of work run on the database thread; SQL lives in the `*_sql` modules beside this one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from server.store import nodes_sql, rekey_sql, sync_sql
from server.store.clock import utc_now
from server.store.database import Database
from server.store.nodes_sql import Node
from vault_sync.model import Chunk, FileState, NodeRef, NoteUpdate, ParsedNote

T = TypeVar("T")


class GraphStore:
    """The graph in one SQLite file. Open with `await GraphStore.open(path)`; close with `await store.close()`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open(cls, path: Path, *, load_vec: bool = True, vec_extension: str | None = None) -> GraphStore:
        return cls(await Database.open(path, load_vec=load_vec, vec_extension=vec_extension))

    @property
    def path(self) -> Path:
        return self.db.path

    def trouble(self, *, caught_up: bool = False) -> str | None:
        """Why the database refuses writes now (its disk is full, ...) and what to do; None when it takes them
        (`Database.trouble`)."""
        return self.db.trouble(caught_up=caught_up)

    async def close(self) -> None:
        await self.db.close()

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a read-only unit `fn(conn, *args)` (WAL gives it a consistent snapshot)."""
        return await self.db.run(fn, *args)

    def read_aside(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Start the read-only unit `fn(conn, *args)` on the second connection, in parallel with the database
        thread; returns its future (see `Database.aside`)."""
        return self.db.aside(fn, *args)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a writing unit `fn(conn, *args)` in one immediate transaction."""
        return await self.db.transaction(fn, *args)

    # --- GraphPort -----------------------------------------------------------------------------------------

    async def replace_text(self, node_id: str, chunks: Sequence[Chunk]) -> bool:
        return await self.write(sync_sql.replace_text, node_id, chunks)

    async def file_states(self, paths: Sequence[str] | None = None) -> dict[str, FileState]:
        return await self.read(sync_sql.file_states, paths)

    async def file_state(self, path: str) -> FileState | None:
        return await self.read(sync_sql.file_state, path)

    async def files_with_inode(self, ino: int) -> list[FileState]:
        return await self.read(sync_sql.files_with_inode, ino)

    async def nodes_by_ids(self, node_ids: Sequence[str]) -> dict[str, NodeRef]:
        return await self.read(sync_sql.nodes_by_ids, node_ids) if node_ids else {}

    async def apply_note(
        self, note: ParsedNote, node_id: str, chunks: Sequence[Chunk], state: FileState
    ) -> bool:
        return await self.write(sync_sql.apply_note, note, node_id, chunks, state, utc_now())

    async def apply_notes(self, updates: Sequence[NoteUpdate]) -> list[bool]:
        return await self.write(sync_sql.apply_notes, updates, utc_now())

    async def archive_path(self, path: str) -> str | None:
        return await self.write(sync_sql.archive_path, path, utc_now())

    async def rekey_node(self, old: str, new: str) -> bool:
        return await self.write(rekey_sql.rekey_node, old, new, utc_now())

    async def record_file_state(self, state: FileState) -> None:
        await self.write(sync_sql.record_file_state, state)

    async def record_inodes(self, inodes: Sequence[tuple[str, int]]) -> None:
        await self.write(sync_sql.record_inodes, inodes)

    # --- reading the graph ---------------------------------------------------------------------------------

    async def get_node(self, node_id: str) -> Node | None:
        return await self.read(nodes_sql.get_node, node_id)

    async def find_nodes(
        self, name: str, label: str | None = None, *, include_archived: bool = False
    ) -> list[Node]:
        return await self.read(nodes_sql.find_nodes, name, label, include_archived)

    async def merge_entity(self, label: str, name: str, properties: dict[str, Any]) -> tuple[str, bool]:
        """MERGE a node by label + name in the graph only (no note); returns (id, created)."""
        return await self.write(nodes_sql.merge_entity, label, name, properties, utc_now())

    async def counts(self) -> dict[str, int]:
        return await self.read(nodes_sql.counts)

    async def get_meta(self, key: str) -> str | None:
        return await self.read(nodes_sql.get_meta, key)

    async def claim_meta(self, key: str, value: str) -> str:
        return await self.write(nodes_sql.claim_meta, key, value)

    async def set_meta(self, key: str, value: str) -> None:
        await self.write(nodes_sql.set_meta, key, value)
