"""Writing an approved insight into notes: a marked section appended to each note it concerns.

The section goes into the notes of the insight's entities (or into one `target_note`), through the safe
writer: a pure edit function, compare-and-swap, re-run on the new bytes when the note changed meanwhile. A note
that already carries the section is left byte-identical, so writing twice changes nothing. After each write
the note is re-synced, so the graph records the new checksum (and the watcher sees no change of its own).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from server.reflect import render
from server.reflect.errors import InsightWriteError
from server.reflect.records import entity_links, record_approval, writable_sync
from server.runtime import Runtime
from server.store import insights_sql, outbox_sql
from server.store.clock import utc_now
from server.store.insights_sql import InsightRow
from vault_sync.errors import PathOutsideVault, VaultError
from vault_sync.frontmatter import decode_note, read_frontmatter
from vault_sync.insight_section import append_section
from vault_sync.locate import locate_note
from vault_sync.outbox import InsightWrite
from vault_sync.paths import classify, vault_path
from vault_sync.reconcile import VaultSync
from vault_sync.report import SyncError
from vault_sync.templates import rules as template_rules
from vault_sync.writer import edit_note_aside

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteBack:
    written: list[str]  # the vault paths that carry the section after the call, sorted
    skipped: list[SyncError]  # the entities' notes it could not go into, and why (fix, then write again)
    queued: str | None = None  # another process holds the vault: it writes the section (what to expect)
    waiting: tuple[str, ...] = ()  # of `skipped`, the notes that may take it later (busy, malformed, ...)


QUEUED_WRITE = (
    "queued: another engrama-vault process (another MCP client's server) holds this vault's lease and writes "
    "the insight into the notes within about a second"
)


async def queue_write_back(rt: Runtime, row: InsightRow, target_note: str | None) -> WriteBack:
    """`write_back` asked of a process without the vault's lease (a second MCP client's server): checked as far
    as the graph can tell now, then queued for the holder, which writes it into the notes as it finds them."""
    sync = rt.require_sync()
    target = _checked_target(sync, target_note) if target_note is not None else None
    if target is not None and not await asyncio.to_thread((sync.root / target).is_file):
        raise InsightWriteError(_missing_target_message(target))  # as the holder would say (review 23b)
    if target is None and not any(e.path for e in await entity_links(rt, row.entities)):
        raise InsightWriteError(_no_note_message(row))
    await rt.store.write(outbox_sql.enqueue, InsightWrite(row.id, target), utc_now())
    return WriteBack([], [], QUEUED_WRITE)


async def write_back(
    rt: Runtime, row: InsightRow, target_note: str | None, *, leave: Sequence[str] = ()
) -> WriteBack:
    """Append the insight's section to its entities' notes (or `target_note`); also make sure the insight has
    its own note. `written`: the vault paths that carry the section after the call, sorted, the same on every
    call whether this call wrote them or an earlier one did; `skipped`: the entities' notes it could not go
    into, with why. An entity's note renamed or moved since the graph saw it is found by its id and written
    there. The notes of `leave` (a queued write tried again: the ones it went into already) are not written
    again, but still count as written."""
    sync = _require_vault(rt)
    entities = await _entities_where_they_are(rt, sync, row)
    skipped: list[SyncError] = []
    if target_note is not None:
        targets = [_checked_target(sync, target_note)]
    else:
        targets = sorted({e.path for e in entities if e.path})
        # An entity whose note was deleted or put in the trash has none to take the section: said, not left
        # out without a word (review 23b).
        skipped = [SyncError(path, _gone_message(name)) for name, path in await _gone_notes(rt, sync, row)]
        if not targets:
            raise InsightWriteError(_no_note_message(row))
    owners = {e.path: e.id for e in entities if e.path}
    holding: list[str] = []
    waiting: list[str] = []
    for rel in targets:
        owner = owners.get(rel) if target_note is None else None
        if rel in leave:
            holding.append(rel)
            continue
        try:
            holding.append(await _append_following(rt, sync, rel, owner, row, entities))
        except FileNotFoundError:
            if target_note is not None:
                raise InsightWriteError(_missing_target_message(rel)) from None
            log.warning("insight %s: %s is gone from the vault; skipped", row.id, rel)
            name = next((e.name for e in entities if e.path == rel), rel)
            skipped.append(SyncError(rel, _gone_message(name)))
        except VaultError as exc:  # malformed, unreadable, kept changing, read-only, or a symlink out
            if target_note is not None:
                raise InsightWriteError(f"cannot write into {rel}: {exc}") from None
            log.warning("insight %s: not written into %s: %s", row.id, rel, exc)
            skipped.append(SyncError(rel, str(exc)))
            waiting.append(rel)
    if not await rt.store.read(outbox_sql.insight_recorded, row.id):
        await record_approval(rt, row)  # once on record, a record the person deleted is not written again
    await rt.store.write(insights_sql.record_written, row.id, holding)
    return WriteBack(sorted(set(holding)), skipped, waiting=tuple(waiting))


async def _entities_where_they_are(rt: Runtime, sync: VaultSync, row: InsightRow) -> list[render.EntityLink]:
    """The insight's entities with the paths their notes have now. A note renamed or moved since the graph
    saw it is found by its id (and synced there) before any section is rendered: every section links to
    where the notes are, and a note's own section does not link to itself (review 23b: the one moved note
    was found, but all the sections were rendered with its old path)."""
    entities = await entity_links(rt, row.entities)
    moved = False
    for entity in entities:
        if entity.path and not await asyncio.to_thread((sync.root / entity.path).exists):
            moved = await _moved_to(rt, entity.id) is not None or moved
    return await entity_links(rt, row.entities) if moved else entities


async def _gone_notes(rt: Runtime, sync: VaultSync, row: InsightRow) -> list[tuple[str, str]]:
    """(name, last path) of the insight's entities archived because their note was deleted or moved to the
    trash (an entity archived by engrama_forget keeps its note, and is left out as before)."""
    nodes = await rt.store.read(insights_sql.entity_nodes, list(row.entities))
    archived = [n for n in (nodes.get(i) for i in row.entities) if n is not None and n.status == "archived"]
    return [
        (n.name, n.path)
        for n in archived
        if n.path and not await asyncio.to_thread((sync.root / n.path).exists)
    ]


def _gone_message(name: str) -> str:
    return (
        f"the note of {name} is gone from the vault (deleted, or moved to its trash); restore it and write the "
        "insight again, or pass target_note to write it into another note"
    )


def _missing_target_message(rel: str) -> str:
    return (
        f"{rel} does not exist; create the note first, or leave target_note out to write the insight into "
        "the notes of its entities"
    )


async def _append_following(
    rt: Runtime,
    sync: VaultSync,
    rel: str,
    owner: str | None,
    row: InsightRow,
    entities: Sequence[render.EntityLink],
) -> str:
    """`_append_to` the note at `rel`; when it is gone from there and it is the note of entity `owner`, to
    where that note is now (found by its id). FileNotFoundError when it is nowhere in the vault."""
    try:
        return await _append_to(rt, sync, rel, row, entities)
    except FileNotFoundError:
        moved = await _moved_to(rt, owner) if owner is not None else None
        if moved is None:
            raise
    return await _append_to(rt, sync, moved, row, entities)


async def _moved_to(rt: Runtime, node_id: str) -> str | None:
    """Where the note holding `node_id` is now in the vault (renamed or moved since the graph saw it), synced
    there; None when it is not in the vault (gone, or in the trash)."""
    known = await rt.store.file_states()
    found = await asyncio.to_thread(locate_note, rt.require_sync().root, node_id, known)
    if found is None or found.in_trash:
        return None
    await rt.require_sync().sync_path(found.path)
    return found.path


def _no_note_message(row: InsightRow) -> str:
    return (
        f"none of the entities of insight {row.id} has a note in the vault; pass target_note "
        "(a vault-relative path such as Notes/Ideas.md) to write it there"
    )


def _require_vault(rt: Runtime) -> VaultSync:
    if rt.sync is None:
        raise InsightWriteError(
            "no vault configured: start engrama-vault with --vault PATH (or ENGRAMA_VAULT) to write insights"
        )
    sync = writable_sync(rt)
    if sync is None:
        raise InsightWriteError(
            "another engrama-vault process holds this vault and does the writing; try again from it, or once "
            "it has exited"
        )
    return sync


def _checked_target(sync: VaultSync, target_note: str) -> str:
    """`target_note` as a normalised vault path of a note; refuses paths that leave the vault."""
    rel = target_note.strip()
    if not rel.lower().endswith(".md"):
        rel += ".md"
    try:
        rel = vault_path(sync.root, rel)
    except PathOutsideVault as exc:
        raise InsightWriteError(str(exc)) from None
    if classify(rel) != "note":
        raise InsightWriteError(
            f"{target_note!r} is not a note engrama may write (hidden folders such as .obsidian are off "
            "limits); give a path like Notes/Ideas.md"
        )
    if template_rules(sync.root).holds(rel):
        raise InsightWriteError(
            f"{target_note!r} is one of the vault's note templates, which engrama never writes into; give a "
            "path outside the templates folder, like Notes/Ideas.md"
        )
    return rel


async def _append_to(
    rt: Runtime, sync: VaultSync, rel: str, row: InsightRow, entities: Sequence[render.EntityLink]
) -> str:
    """Append the section to one note (no-op when present); returns the path of the file that holds it."""
    markdown = render.section_markdown(row, entities, rel)

    def edit(data: bytes) -> bytes:
        decode_note(data, source=rel)
        read_frontmatter(data, source=rel)  # a note that does not parse is reported, never edited
        return append_section(data, row.key, markdown)

    expected = await rt.store.read(insights_sql.node_checksum, rel)
    quiet = await rt.quiet_rule(rel)
    result = await edit_note_aside(sync.root, rel, edit, expected_checksum=expected, quiet=quiet)
    if result.changed:
        await sync.sync_path(result.path)
    return result.path
