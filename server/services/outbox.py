"""The lease holder applies the writes other processes queued (the outbox): follower writes reach the vault.

A process without the vault's lease (a second MCP client's server) changes the graph and, in the same
transaction, queues what the vault must still receive (`outbox_sql`, payloads in `vault_sync.outbox`). The
holder's live sync calls `drain` every second and at once when it takes the lease. Each row goes through the
holder's own paths — `write_entity` for remember and relate, the forget service's note edit, the insight
records — which re-plan it against the note's current text, write through the safe writer and reconcile the
note. A row is deleted only once its change is in the vault; a crash before that replays it, and replaying
changes nothing (properties are set, not added; a relation or an observation already there is not written
twice). A row that cannot be applied now (a malformed note, a note being changed) keeps its last error, shows
in `engrama_status` and is tried again on the next drain; later rows about the same entity wait behind it,
so changes to one note land in the order they were made.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from server.reflect.errors import InsightError, InsightWriteError
from server.reflect.records import record_approval, record_dismissal, restore_decisions
from server.reflect.writeback import write_back
from server.runtime import Runtime
from server.services.entities import (
    NOTE_FIELDS,
    PlannedRelation,
    note_fields,
    note_holder,
    still_wanted,
    write_entity,
    writes_notes,
)
from server.services.errors import ServiceError
from server.services.forget import apply_queued_archive, apply_queued_trash
from server.store import Node, insights_sql, memory_sql, outbox_sql
from server.store.clock import utc_now
from server.store.outbox_sql import QueuedRow
from vault_sync.errors import VaultError
from vault_sync.notes import update_note
from vault_sync.outbox import (
    ArchiveChange,
    Change,
    EntityChange,
    InsightRecord,
    InsightWrite,
    QueuedRelation,
    TrashChange,
    decode,
)
from vault_sync.writer import edit_note_aside

log = logging.getLogger(__name__)

PAGE = 100  # rows read per query; a long backlog (a holder that was down) is drained page by page
# What a row's application may raise when the note cannot take the change now; anything else is a bug, logged
# with its traceback, and the row is kept all the same.
RETRYABLE = (ServiceError, VaultError, InsightError, OSError, ValueError)


@dataclass(frozen=True)
class Drained:
    applied: int
    failed: int


async def drain(rt: Runtime, subjects: Collection[str] | None = None) -> Drained:
    """Apply every queued write this process can (only those about `subjects`, when given); returns how many
    were applied and how many must wait.

    Does nothing unless this process may write the vault (it holds the lease)."""
    if not await any_waiting(rt):
        return Drained(0, 0)
    # One drain at a time: the upkeep's, or the one a tool call runs first (`in_order`).
    async with rt.outbox_lock:
        return await _drain(rt, None if subjects is None else set(subjects))


async def any_waiting(rt: Runtime) -> bool:
    """Whether this process writes the vault and writes are queued for it: what `in_order` is worth looking up
    subjects for (one read; with one client, never)."""
    return writes_notes(rt) and await rt.store.read(outbox_sql.has_waiting)


async def in_order(rt: Runtime, *subjects: Node | None) -> None:
    """Before this process writes for a tool call about `subjects` (the entity written, and those its relations
    reach, which the write may bring back from the archive), the writes another client's server queued earlier
    about them land first: applied after, an older queued write would undo the newer one (review 20b: a
    follower's `status: paused`, then the holder's own `status: shipped`, ended as `paused`; review 20e: a
    forget queued, then a relation that brought its entity back, ended archived). Only theirs: a row waiting
    for a note someone is typing in must not hold up writes to every other note (review 20d)."""
    wanted = {node.id for node in subjects if node is not None}
    if wanted:
        await drain(rt, wanted)


async def _drain(rt: Runtime, subjects: set[str] | None) -> Drained:
    applied = failed = 0
    blocked: set[str] = set()  # subjects with a row that failed: their later rows wait behind it
    after = 0
    while rows := await rt.store.read(outbox_sql.waiting, after, PAGE):
        for row in rows:
            after = row.id
            if row.subject in blocked or (subjects is not None and row.subject not in subjects):
                continue
            if await _apply_row(rt, row):
                applied += 1
            else:
                failed += 1
                blocked.add(row.subject)
    if applied:
        log.info("wrote %d queued change(s) into the vault; %d still waiting", applied, failed)
    return Drained(applied, failed)


async def _apply_row(rt: Runtime, row: QueuedRow) -> bool:
    """Apply one row and drop it, or keep it with the reason it failed; True when applied."""
    try:
        node_id = await _apply(rt, decode(row.kind, row.payload), again=row.last_error is not None)
    except RETRYABLE as exc:
        error = str(exc) or type(exc).__name__
        if _gist(error) != _gist(row.last_error):  # say it once, not every second
            log.warning("a queued write (%s %s) waits: %s", row.kind, row.subject, error)
    except Exception as exc:  # the outermost handler of one row: keep the row, log the bug, go on
        error = f"{type(exc).__name__}: {exc}"
        if _gist(error) != _gist(row.last_error):
            log.exception("a queued write (%s %s) failed unexpectedly", row.kind, row.subject)
    else:
        await rt.store.write(outbox_sql.applied, row.id, node_id, utc_now())
        return True
    await rt.store.write(outbox_sql.failed, row.id, error, utc_now())
    return False


def _gist(error: str | None) -> str | None:
    """An error without its figures: "changed 1.2 s ago" and "changed 2.3 s ago" are one reason, logged once."""
    return None if error is None else re.sub(r"\d+(?:\.\d+)?", "#", error)


async def _apply(rt: Runtime, change: Change, *, again: bool = False) -> str | None:
    """Write one change into the vault; returns the node whose note now states it (None when no note).
    `again`: an earlier attempt at this row failed (and may have done part of it)."""
    if isinstance(change, EntityChange):
        return await _apply_entity(rt, change)
    if isinstance(change, ArchiveChange):
        await apply_queued_archive(rt, change)
        return change.node_id
    if isinstance(change, TrashChange):
        await apply_queued_trash(rt, change)
        return None
    if isinstance(change, InsightWrite):
        await _apply_insight_write(rt, change, again=again)
        return None
    await _apply_insight(rt, change)
    return None


async def _apply_entity(rt: Runtime, change: EntityChange) -> str:
    """Remember / relate through `write_entity` into the node's note (created when it has none yet).

    The observation keeps the day it was made: a change drained on a later day (the holder was down) is
    dated as the person made it, and a replay finds the same bullet and adds nothing."""
    queued = await rt.store.get_node(change.node_id)  # None: purged or re-keyed since; merged by label + name
    node = await note_holder(rt, queued)  # its note deleted for good since, and its name has a live note
    relations = [await _planned(rt, r) for r in change.relations]
    same_day = change.day == date.today().isoformat()
    properties, remove = dict(change.properties), change.remove
    if queued is not None and node is queued and change.base is not None:
        if queued.path is not None:  # what the note says now, not what the graph last read: an edit made
            # while no server ran is read by the pass that follows the drain (review 20d)
            await _read_now(rt, queued.path)
            queued = node = await rt.store.get_node(change.node_id) or queued
        held = dict(queued.properties)
        if queued.path is not None and (
            fields := NOTE_FIELDS.intersection((*change.properties, *change.remove))
        ):
            # Kept apart from the properties: the note says what they hold now.
            held |= {key: None for key in fields} | await note_fields(rt, queued.path, fields)
        properties, remove, left = _still_wanted(change, held)
        if left:
            log.info(
                "a queued write to %s leaves %s as it is: changed since the write was queued (by the person, or "
                "a later write)",
                queued.name,
                ", ".join(left),
            )
            if not (properties or remove or change.observation or relations):
                return queued.id
    written = await write_entity(
        rt,
        node.label if node is not None else change.label,
        node.name if node is not None else change.name,
        properties,
        change.observation if same_day else None,
        relations,
        target=node,
        remove=remove if node is queued else (),  # keys planned for the queued node, not this one
        reason=change.reason,
        # Judged again on the bytes the write edits: the person may set a value while it waits for quiet.
        base=change.base if node is queued else None,
    )
    if queued is not None and node is not queued:
        await rt.store.write(memory_sql.fold_graph_only_node, queued.id, written.id, utc_now())
    if not same_day and change.observation and written.path is not None:
        await _append_observation(rt, written.path, change.observation, change.day)
    return written.id


# Each note (its full path) a drain reconciled, with its size and modification time then: a row waiting on a
# note that cannot be read (broken YAML) reconciled it, and logged why, at every drain (each second).
_READ_AT: dict[str, tuple[int, int]] = {}


async def _read_now(rt: Runtime, rel: str) -> None:
    """Reconcile the note at `rel`, unless its file is as the last drain found it (then the graph has it)."""
    path = str(rt.vault / rel)
    try:
        st = await asyncio.to_thread(os.stat, path)
    except OSError:
        seen = None
    else:
        seen = (st.st_size, st.st_mtime_ns)
    if seen is not None and _READ_AT.get(path) == seen:
        return
    await rt.require_sync().sync_path(rel)
    if seen is not None:
        _READ_AT[path] = seen


def _still_wanted(
    change: EntityChange, held: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...], list[str]]:
    """The keys of `change` still to write into a node that holds `held` now: (properties, keys to take out,
    keys left alone) (`entities.still_wanted`; the write checks again on the bytes it edits)."""
    properties, remove = still_wanted(change.properties, change.remove, change.base, held)
    left = [k for k in change.properties if k not in properties] + [
        k for k in change.remove if k not in remove
    ]
    return properties, remove, left


async def _planned(rt: Runtime, relation: QueuedRelation) -> PlannedRelation:
    """The relation as `write_entity` takes it; a target gone since (purged) comes back as a stub, as the
    link in the note would bring it back anyway."""
    target = await rt.store.get_node(relation.target_id)
    if target is None:
        target, _ = await rt.store.write(memory_sql.ensure_target, relation.target_name, None, utc_now())
    return PlannedRelation(relation.rel_type, target)


async def _append_observation(rt: Runtime, rel: str, observation: str, day: str) -> None:
    def edit(data: bytes) -> bytes:
        return update_note(data, properties={}, observation=observation, today=day)

    await edit_note_aside(rt.vault, rel, edit, quiet=await rt.quiet_rule(rel))
    await rt.require_sync().sync_path(rel)


async def _apply_insight_write(rt: Runtime, change: InsightWrite, *, again: bool = False) -> None:
    """A follower's `engrama_write_insight_to_vault`: the section written as the holder finds the notes now. An
    insight no longer approved (retracted meanwhile) is not written; one that can no longer be written at all
    (its entities' notes gone) is said in the log and dropped, as the call itself would have said. Tried
    `again` (a note could not take it before), only the notes still without it are written: a section the
    person took out of a note that had it is theirs to remove (review 23g)."""
    await restore_decisions(rt)
    row = await rt.store.read(insights_sql.get_insight, change.insight_id)
    if row is None or row.status != insights_sql.APPROVED:
        log.info("insight %s is no longer approved; its queued write-back is dropped", change.insight_id)
        return
    try:
        done = await write_back(rt, row, change.target_note, leave=row.written_paths if again else ())
    except InsightWriteError as exc:
        log.warning("insight %s: the queued write-back cannot be done: %s", row.id, exc)
        return
    for skip in done.skipped:
        log.warning("insight %s: not written into %s: %s", row.id, skip.path, skip.error)
    if done.waiting:
        # A note being edited, or malformed for now: the row stays, says why in engrama_status, and is tried
        # again (the notes that have the section already are left as they are). Review 23b: it was dropped.
        reasons = {skip.path: skip.error for skip in done.skipped}
        raise ServiceError(
            "the insight is not in "
            + "; ".join(f"{rel} yet ({reasons.get(rel, 'not written')})" for rel in done.waiting)
            + "; it is written there once the note can take it"
        )


async def _apply_insight(rt: Runtime, change: InsightRecord) -> None:
    if await rt.store.read(outbox_sql.insight_recorded, change.insight_id):
        return  # recorded already (by an earlier attempt, or by a reflect)
    row = await rt.store.read(insights_sql.get_insight, change.insight_id)
    if row is None:
        return
    await (record_approval(rt, row) if row.status == insights_sql.APPROVED else record_dismissal(rt, row))
