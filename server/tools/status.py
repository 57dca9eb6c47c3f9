"""`engrama_status`: what the memory holds and which subsystems are on."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict

from server.status import build_status
from server.tools.common import READ_ONLY, runtime, structured, tool_errors


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")  # subsystems may report more than this schema names


class Backend(_Open):
    name: str
    ok: bool
    node_count: int
    db_path: str


class Outbox(_Open):
    """Writes made through a server without the vault's lease, waiting for the lease holder to write them."""

    waiting: int
    oldest_age_seconds: int | None = None
    failing: int | None = None
    error: str | None = None


class ConflictCopyNote(_Open):
    path: str
    what_to_do: str


class VaultAttention(_Open):
    """What the syncs found that the person should look at (absent when nothing)."""

    archive_held_back: int | None = None
    archive_hint: str | None = None
    conflict_copies: list[ConflictCopyNote] | None = None
    conflict_copies_total: int | None = None
    not_downloaded: int | None = None
    not_downloaded_examples: list[str] | None = None


class Vault(_Open):
    configured: bool
    path: str | None = None
    note_count: int | None = None
    watching: bool | None = None
    polling_seconds: float | None = None  # how often the vault is walked for changes, when it is
    last_reconcile_at: str | None = None
    pending: int | None = None
    attention: VaultAttention | None = None
    outbox: Outbox | None = None


class Embedder(_Open):
    configured: bool | None = None
    provider: str | None = None
    model: str | None = None
    dimensions: int | None = None


class Search(_Open):
    mode: str
    degraded: bool | None = None
    reason: str | None = None


class ProfileInfo(_Open):
    name: str
    modules: list[str]


class Status(_Open):
    """engrama-vault's status; a key is absent (not null) when its subsystem is off."""

    version: str
    backend: Backend
    vault: Vault
    embedder: Embedder | None = None
    search: Search
    profile: ProfileInfo


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=READ_ONLY)
    async def engrama_status(ctx: Context) -> Annotated[CallToolResult, Status]:
        """The state of the memory: entities in the graph, the vault and whether it is watched, writes
        waiting to reach it (outbox), search mode (hybrid or full text) and the schema profile. Call it when
        memory tools behave unexpectedly or the person asks what is set up."""
        with tool_errors():
            return structured(await build_status(runtime(ctx)))
