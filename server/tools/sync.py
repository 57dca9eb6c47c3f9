"""`engrama_sync_note` and `engrama_sync_vault`: bring the graph in line with notes on request."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.services.notesync import sync_note, sync_vault
from server.tools.common import WRITES_IDEMPOTENT, result, runtime, tool_errors


class NoteSyncResult(BaseModel):
    action: str = Field(description="created, updated, unchanged or archived (the note is gone)")
    id: str | None = Field(description="the note's engrama_id")
    inject_id: bool = Field(description="true when an engrama_id line was (or, in a dry run, would be) added")
    moved_from: str | None = Field(None, description="the note's previous path when it was moved or renamed")


class SyncFailure(BaseModel):
    path: str
    error: str


class ConflictCopyResult(BaseModel):
    path: str
    copy_of: str = Field(description="the note it is a sync tool's conflict copy of; merge it there")


class VaultSyncResult(BaseModel):
    scanned: int
    created: int
    updated: int
    unchanged: int
    archived: int
    moved: int
    ids_injected: list[str] = Field(description="notes that got an engrama_id line")
    errors: list[SyncFailure] = Field(description="notes that could not be synced, with what to fix")
    ids_not_written: list[SyncFailure] = Field(
        default_factory=list, description="notes indexed without an id line, and why"
    )
    archive_held_back: int = Field(
        0,
        description="missing notes not archived because so many went at once; confirm_archive=true archives",
    )
    archive_hint: str | None = Field(None, description="why archiving was held back and how to confirm")
    conflict_copies: list[ConflictCopyResult] = Field(
        default_factory=list, description="conflict copies left by a sync tool: not synced; merge in Obsidian"
    )
    not_downloaded: list[str] = Field(
        default_factory=list, description="notes present only as cloud placeholders: left as they were"
    )


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_sync_note(
        ctx: Context,
        path: Annotated[str, Field(description="vault-relative note path, e.g. Projects/Engrama.md")],
        dry_run: Annotated[bool, Field(description="report what would change without writing")] = False,
    ) -> Annotated[CallToolResult, NoteSyncResult]:
        """Re-read one note into the graph now. Edits in Obsidian are picked up within a second, so call it
        only when results look stale after an edit, or to check a note that will not sync."""
        with tool_errors():
            done = await sync_note(runtime(ctx), path, dry_run=dry_run)
        return result(NoteSyncResult.model_validate(done, from_attributes=True))

    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_sync_vault(
        ctx: Context,
        folder: Annotated[str | None, Field(description="only this vault-relative folder")] = None,
        dry_run: Annotated[bool, Field(description="report what would change without writing")] = False,
        confirm_archive: Annotated[
            bool,
            Field(
                description="archive missing notes even when a large share of the vault is missing at once"
            ),
        ] = False,
    ) -> Annotated[CallToolResult, VaultSyncResult]:
        """Reconcile the whole vault (or one folder) with the graph: notes added, updated, archived. This
        already happens at start-up and on every edit: call it only when the person asks for a full re-sync. When many notes are missing at once nothing is archived
        (archive_held_back); pass confirm_archive=true only after the person confirms they deleted them."""

        last: list[tuple[int, int]] = []

        async def progress(done: int, total: int) -> None:
            last[:] = [(done, total)]
            await ctx.report_progress(done, total, f"{done} of {total} notes")

        await ctx.report_progress(0, None, "scanning the vault")
        with tool_errors():
            report = await sync_vault(
                runtime(ctx), folder, dry_run=dry_run, progress=progress, confirm_archive=confirm_archive
            )
        if last != [(report.scanned, report.scanned)]:  # unchanged notes are skipped without a tick
            await progress(report.scanned, report.scanned)
        return result(VaultSyncResult.model_validate(report.as_dict()))
