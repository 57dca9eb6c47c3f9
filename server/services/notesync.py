"""`engrama_sync_note` and `engrama_sync_vault`: reconcile on request what the watcher does on its own."""

from __future__ import annotations

import os
from dataclasses import dataclass

from server.runtime import Runtime
from server.services.errors import NoteNotFound, ServiceError
from vault_sync.paths import conflict_original, links_to_note, to_rel
from vault_sync.reconcile import Progress
from vault_sync.report import FAILED, IGNORED, UNCHANGED, SyncReport


@dataclass(frozen=True)
class NoteSynced:
    path: str
    action: str  # created / updated / unchanged / archived
    id: str | None
    inject_id: bool
    moved_from: str | None


async def sync_note(rt: Runtime, path: str, *, dry_run: bool = False) -> NoteSynced:
    """Reconcile one vault-relative note now; errors say why the note could not be synced."""
    outcome = await rt.require_sync().sync_path(path, dry_run=dry_run)
    if outcome.action == FAILED:
        raise ServiceError(f"{path} could not be synced: {outcome.error}")
    if outcome.action == IGNORED and (original := conflict_original(path.replace("\\", "/"))):
        raise ServiceError(
            f"{path!r} is a sync tool's conflict copy of {original!r}; engrama does not sync it as a note of its "
            f"own. Merge it into {original!r} in Obsidian and delete it"
        )
    if outcome.action == IGNORED and (target := _linked_note(rt, outcome.path)) is not None:
        raise ServiceError(
            f"{path!r} is a link to the note {target!r}, which engrama syncs at its own path; sync {target!r}"
        )
    if outcome.action == IGNORED:
        raise ServiceError(
            f"{path!r} is not a note: only .md files outside dot-folders (.obsidian, .trash, ...) are synced"
        )
    if outcome.action == UNCHANGED and outcome.id is None:
        raise NoteNotFound(
            f"there is no note at {path!r}; give the vault-relative path of an existing note, "
            "e.g. Projects/Engrama.md (engrama_search shows the paths of notes)"
        )
    return NoteSynced(outcome.path, outcome.action, outcome.id, outcome.inject_id, outcome.moved_from)


def _linked_note(rt: Runtime, rel: str) -> str | None:
    """The vault path of the note that `rel` is a symlink to (review 22b), else None."""
    link = rt.vault / rel
    if not links_to_note(rt.vault, link):
        return None
    return to_rel(rt.vault, os.path.realpath(link))


async def sync_vault(
    rt: Runtime,
    folder: str | None = None,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    confirm_archive: bool = False,
) -> SyncReport:
    """Reconcile every note under `folder` (the whole vault by default); gone notes are archived, unless a
    large share of the vault is gone at once and `confirm_archive` is false (then the report holds them back)."""
    return await rt.require_sync().sync_vault(
        folder or None, dry_run=dry_run, progress=progress, confirm_archive=confirm_archive
    )
