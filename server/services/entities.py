"""Writing one entity and its relations: into its note when this process may write the vault, else into
the graph only. Shared by `remember` and `relate`.

The note is the truth (DESIGN §2): a vault write edits or creates the file through the safe writer, then
reconciles that one path (`VaultSync.sync_path`), so the graph and the recorded checksum describe exactly
the bytes on disk and the watcher later sees "unchanged". Relations are written as `"[[Target]]"` items in
the note's `relations:` block; the reconcile turns them into edges.

An entity's note may have left its recorded path a moment before a tool writes (moved, renamed, trashed, or
deleted, before the watcher reconciled it). `write_entity` then finds where the note's id lives now
(`vault_sync.locate`) and writes there, so the entity keeps one note and one identity; see its docstring.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

import anyio

from server.runtime import Runtime
from server.services.errors import RelationNotAllowed, ServiceError
from server.services.revival import Revival, plan_revival
from server.services.schema import (
    optional_label,
    require_allowed,
    require_name,
    require_relation,
    single_label,
)
from server.store import Node, history_sql, memory_sql, nodes_sql, outbox_sql, sync_sql
from server.store.clock import utc_now
from vault_sync import identify
from vault_sync.errors import MalformedNote, VaultError
from vault_sync.frontmatter import read_frontmatter
from vault_sync.locate import Located, locate_note, unseen_notes_named
from vault_sync.model import FileState
from vault_sync.names import fold
from vault_sync.notes import note_filename, render_new_note, update_note
from vault_sync.outbox import QueuedRelation
from vault_sync.paths import links_to_note
from vault_sync.readers import OWED_ID
from vault_sync.relations_block import add_relation
from vault_sync.report import FAILED
from vault_sync.scan import root_problem
from vault_sync.writer import (
    NoteExists,
    create_note,
    edit_note_aside,
    read_note,
    restore_from_trash,
)

MAX_NAME_SUFFIX = 20  # `Name 2.md` ... when another entity's note already has the plain file name


class NotItsNote(ServiceError):
    """The file at an entity's recorded path is not known to be its note: it holds another engrama_id, or
    none and the graph has not read it as this entity's (a new note the person made where the entity's note
    was, before the watcher or the start-up catch-up reconciled it). Nothing was written."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class RelationSpec:
    """A relation as a caller states it: type, target name and, optionally, the target's label."""

    rel_type: str
    target: str
    target_label: str | None = None


@dataclass(frozen=True)
class PlannedRelation:
    """A checked relation whose target node exists (its link's text is decided when it is written)."""

    rel_type: str
    target: Node
    revived: str | None = None  # what the target was ("archived") when planning made it current again


@dataclass(frozen=True)
class EntityWrite:
    id: str
    created: bool
    label: str
    name: str
    path: str | None  # the note written; None when only the graph was written
    relations_created: int
    message: str


@asynccontextmanager
async def relations_planned(
    rt: Runtime,
    source_label: str,
    source_name: str,
    specs: Sequence[RelationSpec],
    source_id: str | None = None,
) -> AsyncIterator[list[PlannedRelation]]:
    """`plan_relations` for a write made inside the block: when planning or the write fails, the placeholder
    nodes planning created are taken out again (unless something came to point at them meanwhile), so a
    failed call leaves no name in the graph that a rebuild from the vault would not have."""
    made: list[str] = []
    try:
        yield await plan_relations(rt, source_label, source_name, specs, source_id, made)
    except BaseException:  # a client cancelling the call too: the clean-up is shielded from that cancellation
        if made:
            with anyio.CancelScope(shield=True):
                await rt.store.write(memory_sql.drop_unused_stubs, made)
        raise
    finally:
        memory_sql.RUNNING_STUBS.difference_update(made)


async def plan_relations(
    rt: Runtime,
    source_label: str,
    source_name: str,
    specs: Sequence[RelationSpec],
    source_id: str | None = None,
    made: list[str] | None = None,
) -> list[PlannedRelation]:
    """Check every relation against the profile, then make sure each target node exists.

    All checks run before anything is created, so one bad relation leaves the graph untouched. A target
    that is archived (forgotten, or its note deleted) is made current again, as remembering it would.
    `source_id` is the source's node when it exists: a target name that leads to it (the file name of its
    note, an alias) is refused like its own name. The ids of placeholder nodes created are added to `made`."""
    checked: list[tuple[str, str, str | None]] = []
    for spec in specs:
        rel = require_relation(rt.profile, spec.rel_type)
        target = require_name(spec.target, "relation target")
        if target.casefold() == source_name.casefold():
            raise ServiceError(f"{target!r} cannot relate to itself; name another entity as the target")
        wanted = optional_label(rt.profile, spec.target_label) or single_label(
            rt.profile.relations[rel].targets
        )
        node, label = await rt.store.read(memory_sql.preview_target, target, wanted)
        if node is not None and node.id == source_id:
            raise ServiceError(_itself(target, node))
        if node is not None and node.status != "stub" and not rt.profile.allows(rel, source_label, label):
            where = f" ({node.path})" if node.path else ""
            raise RelationNotAllowed(
                f"{node.name!r} is a {label}{where}, and {rel} cannot go from a {source_label} to a {label}; "
                f"set its `type:` in the note, or use another relation type (RELATED_TO connects any two)"
            )
        require_allowed(rt.profile, rel, source_label, label)
        checked.append((rel, target, wanted))
    planned: list[PlannedRelation] = []
    for rel, target, wanted in checked:
        node, created = await _ensure_target(rt, target, wanted)
        if created and made is not None:
            made.append(node.id)
        elif created:
            memory_sql.RUNNING_STUBS.discard(node.id)
        if node.id == source_id:  # the graph changed since the check (a note renamed meanwhile)
            raise ServiceError(_itself(target, node))
        was = None
        if node.status == "archived":
            node, revival = await revive_entity(rt, node, "made current again by a relation to it")
            was = revival.was if revival is not None else None
        planned.append(PlannedRelation(rel, node, was))
    return planned


async def _ensure_target(rt: Runtime, target: str, label: str | None) -> tuple[Node, bool]:
    """`memory_sql.ensure_target`, shielded from cancellation: a cancelled await would leave a stub committed on
    the database thread that its caller never heard of (and so could not take out again). A stub it makes is
    in `memory_sql.RUNNING_STUBS` until the caller (`relations_planned`) is done with it."""
    new_id = str(uuid.uuid4())
    memory_sql.RUNNING_STUBS.add(new_id)
    created = False
    try:
        with anyio.CancelScope(shield=True):
            node, created = await rt.store.write(memory_sql.ensure_target, target, label, utc_now(), new_id)
    finally:
        if not created:
            memory_sql.RUNNING_STUBS.discard(new_id)
    return node, created


def _itself(target: str, node: Node) -> str:
    where = f" (the note {node.path})" if node.path else ""
    return (
        f"{target!r} is {node.name!r} itself{where}, and an entity cannot relate to itself; "
        "name another entity as the target"
    )


async def revive_entity(rt: Runtime, node: Node, reason: str) -> tuple[Node, Revival | None]:
    """Make the archived entity `node` current again by itself (a relation reaches it); returns the
    entity as it is now and the revival (None when none happened, see `write_reviving`)."""
    written, revival = await write_reviving(rt, node.label, node.name, {}, None, (), node, reason)
    now = await rt.store.get_node(written.id)
    if now is None:
        raise ServiceError(
            f"{node.name!r} could not be made current again; call engrama_sync_vault and retry"
        )
    return now, revival


async def write_reviving(
    rt: Runtime,
    label: str,
    name: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    target: Node | None,
    reason: str,
    *,
    superseded_too: bool = True,
) -> tuple[EntityWrite, Revival | None]:
    """`write_entity` into `target`, making it current again when it is archived (or superseded, unless
    `superseded_too` is False) in the same write; `reason` goes into the history of what changed.

    Returns the write and the revival, which is None when there was none to make, and also when the
    entity's note was deleted for good: then a new entity was written and the old one stays archived."""
    gone = target
    target = await note_holder(rt, target)
    if target is not gone and target is not None:
        label, name = target.label, target.name
    revival = None
    if target is not None and target.status != "stub" and (superseded_too or target.status == "archived"):
        revival = await plan_revival(rt, target, properties)
    write, remove = dict(properties), ()
    if revival is not None:
        write, remove = {**revival.set, **write}, revival.remove
    since = utc_now()
    if revival is not None and target is not None and not writes_notes(rt):
        await rt.store.write(memory_sql.revive_in_graph, target.id, since)
    written = await write_entity(
        rt, label, name, write, observation, relations, target=target, remove=remove, reason=reason
    )
    if written.path is not None:  # the reconcile recorded the replaced values: say why they changed
        await rt.store.write(history_sql.annotate, written.id, [*write, *remove], since, reason)
    if target is not None and written.id != target.id:
        revival = None
    if gone is not None and gone is not target:  # its relations move to the entity written; it stays a record
        await rt.store.write(memory_sql.fold_graph_only_node, gone.id, written.id, utc_now())
    return written, revival


def spelled_in_vault(root: Path, folder: str) -> str:
    """`folder` as the vault already spells it at its top level: a person's `projects/`, or `Réunions` as macOS
    saves it (decomposed). Notes there are read as the label's (`Profile.label_for_path` matches any case and
    either form), so a new note joins them rather than starting a second folder that differs only in case,
    which a sync client on a Mac or Windows computer would then have to merge (review 19a)."""
    wanted = fold(folder)
    try:
        with os.scandir(root) as entries:
            names = sorted(
                e.name for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
            )
    except OSError:
        return folder
    if folder in names:
        return folder
    # As listed, not as asked: on macOS and Windows `Projects` opens a folder listed as `projects`, and a note
    # stored under the asked spelling would not be at the path the walk lists.
    return next((name for name in names if fold(name) == wanted), folder)


async def note_holder(rt: Runtime, node: Node | None) -> Node | None:
    """The entity a write for `node` goes to: `node` itself, unless its note is gone for good (no path) and
    another live entity of its label and name has a note. That one is the entity of the name now; writing a new
    note for `node` would make two (soak seed 3141592: two live Projects named Lumen)."""
    if node is None or node.status == "stub" or node.path is not None:
        return node
    return await rt.store.read(memory_sql.live_namesake, node.label, node.name, node.id) or node


async def _link_text(rt: Runtime, node: Node) -> tuple[str, tuple[str, ...]]:
    """How a relation's link names `node`: by its note's path (`[[Projects/Atlas]]`, Obsidian's "absolute path
    in vault" form; a note at the vault's root is its bare file name), which no note made later can take.
    A bare name could: `[[Iris]]` for a note `Borealis.md` named "Iris" went to an `Iris.md` the person made
    later (and Obsidian never opened it there: it resolves links by file name), and `[[Borealis]]` went to a
    `Borealis.md` made later in another folder (soak seeds 77001, 5151: relations the assistant made were not
    in the rebuilt graph). A link by path still finds the note by its file name once it has moved. An entity
    with no note yet is named by its name.

    With it, the other link texts that mean `node` in a relations block already (its file name and its name,
    each while it leads to it alone: how earlier versions wrote it), so the same relation is not added twice.

    A path no wikilink can carry (a folder `[2024] Work` or `C# Notes`: a link stops at `#`) is written as a
    plain value, which the sync takes as written and resolves by path like a link, by file name once the note
    has moved (`relations_block.relation_item`; review 19a: `[[C# Notes/Atlas]]` was read as a link to note
    `C`). Not the bare file name, though it would make a link Obsidian can follow: a note of that name made
    later would take the relation over (review 19c)."""
    if not node.path:
        return node.name, ()
    path = node.path[:-3] if node.path.lower().endswith(".md") else node.path
    stem = path.rsplit("/", 1)[-1]
    same = [
        bare
        for bare in dict.fromkeys((stem, node.name))
        if bare != path and await rt.store.read(sync_sql.bare_name_is_unique, bare, node.id)
    ]
    return path, tuple(same)


async def _links(rt: Runtime, relations: Sequence[PlannedRelation]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(relation type, link text, other texts meaning the same note) of each relation, decided from the graph
    as it is just before the write: a relation planned by a follower (queued) or before waiting for the
    person's editor may meet other notes of its target's name, or its target at another path."""
    links: list[tuple[str, str, tuple[str, ...]]] = []
    for relation in relations:
        target = await rt.store.get_node(relation.target.id) or relation.target
        if target.status == "active" and target.path is None and writes_notes(rt):
            target = await _given_its_note(rt, target)
        link, same = await _link_text(rt, target)
        links.append((relation.rel_type, link, same))
    return links


async def _given_its_note(rt: Runtime, target: Node) -> Node:
    """`target`, an entity made in the graph alone (a second client's write whose note is still queued), with
    its note written now, so that a link can name that note. A bare `[[Name]]` written before the note exists
    can lead to another note of that name (soak seed 4711), and a link that leads elsewhere is a relation the
    vault does not hold. The queued write then finds the note and adds to it. When another entity of its label
    and name already has a note, that note is the one meant (`note_holder`)."""
    holder = await note_holder(rt, target)
    if holder is not None and holder is not target:
        return holder
    written = await write_entity(rt, target.label, target.name, {}, None, (), target=target)
    return await rt.store.get_node(written.id) or target


# Frontmatter keys the graph keeps apart from the properties (as the note's tags and its names): a remember
# setting one is planned against what the note holds, or it replaced the person's tags without a word
# (review 20d).
NOTE_FIELDS = frozenset({"tags", "tag", "aliases", "alias"})


async def note_fields(rt: Runtime, rel: str, keys: Collection[str]) -> dict[str, Any]:
    """What the note at `rel` holds under `keys` now (nothing when it cannot be read: the write says why)."""
    try:
        data, _ = await asyncio.to_thread(read_note, rt.vault, rel)
        _, mapping = read_frontmatter(data)
    except (OSError, VaultError):
        return {}
    return {key: mapping[key] for key in keys if mapping.get(key) is not None}


def writes_notes(rt: Runtime) -> bool:
    """True when this process may write the vault (a vault is configured and we hold its lease)."""
    return rt.sync is not None and rt.sync.writable


async def _now_a_link(rt: Runtime, rel: str) -> bool:
    """Whether the entity's note at `rel` has been replaced by a symlink to another note of the vault: that is
    the other note under a second name, so the entity's own note is gone (review 22b: its id was looked for
    there forever, and the advice to sync the path could not help)."""
    return await asyncio.to_thread(links_to_note, rt.vault, rt.vault / rel)


async def write_entity(
    rt: Runtime,
    label: str,
    name: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    *,
    target: Node | None = None,
    remove: tuple[str, ...] = (),
    reason: str = "",
    base: Mapping[str, Any] | None = None,
) -> EntityWrite:
    """MERGE the entity by label + name and write it: into its note when we may, else the graph only.

    `target` is the node to write into when the caller already chose it (an archived one, to revive it);
    `remove` names frontmatter keys to take out; `reason` is why replaced values changed (graph-only
    writes record it in the history themselves; a note write's history comes from the reconcile).

    When the entity's note is no longer at its recorded path, the vault is searched for its id first
    (`vault_sync.locate`), because the watcher may not have seen the change yet:
    - found elsewhere in the vault (moved or renamed): that path is reconciled (a move, since the old file
      is gone) and written; the entity keeps its note and its id;
    - found in `.trash/`: the entity is archived, and a write makes it current again (README), so the note
      is moved back to its recorded path (or `Name 2.md` beside it when that path is taken; nothing is
      overwritten), reconciled and written, and the result says so;
    - found nowhere (deleted for good): the old node stays archived and a new note is created with a FRESH
      id. Reusing the old id would give two files one id as soon as the deleted one came back (from git, a
      sync tool, a backup), and the person's file would then lose its identity as a "copy".

    A file at the recorded path is written only when it is the entity's note: it holds the entity's id, or
    none and is exactly what the graph last read there as the entity's note. Anything else (a new note the
    person started at that path after renaming the old one, another note's file moved there) is not
    touched: the id is looked for elsewhere as above, and when it is nowhere the path is reconciled first and
    the write decided again on what the person wrote there (`NotItsNote`)."""
    if not writes_notes(rt):
        return await _write_graph_only(rt, label, name, properties, observation, relations, reason, remove)

    async def into_namesake(namesake: Node) -> EntityWrite:  # the live entity of the name takes the write
        return await write_entity(
            rt, label, namesake.name, properties, observation, relations, target=namesake, reason=reason
        )

    async def into_the_vault(target: Node | None) -> EntityWrite:
        """Raises `NotItsNote` when the file at the entity's recorded path is not known to be its note and
        its id is nowhere else in the vault."""
        existing = target or await rt.store.read(memory_sql.find_merge_target, label, name)
        if target is None and (existing is None or existing.status == "stub") and await _caught_up(rt, name):
            existing = await rt.store.read(memory_sql.find_merge_target, label, name)
        if target is not None and await _made_in_graph_only(rt, target) and await _caught_up(rt, target.name):
            # A follower's write for an entity it saw no note for: the person may have made that note since,
            # in a folder of their choosing, before this process read it. It is the entity's note then.
            namesake = await rt.store.read(memory_sql.live_namesake, target.label, target.name, target.id)
            if namesake is not None:
                done = await into_namesake(namesake)
                await rt.store.write(memory_sql.fold_graph_only_node, target.id, done.id, utc_now())
                return done
        if existing is not None and existing.path and existing.status != "stub":
            not_its_note: NotItsNote | None = None
            try:
                added = await _update(
                    rt,
                    existing.path,
                    properties,
                    observation,
                    relations,
                    remove,
                    node_id=existing.id,
                    base=base,
                )
                return await _settled(rt, existing.path, existing.id, label, existing.name, False, added)
            except FileNotFoundError:
                pass
            except NotItsNote as exc:
                not_its_note = exc
            found = await locate_entity_note(rt, existing)
            linked = not_its_note is not None and await _now_a_link(rt, existing.path)
            if found is None and not_its_note is not None and not linked:
                raise not_its_note
            if found is not None:
                return await _write_found(rt, existing, found, properties, observation, relations, remove)
            # Deleted for good, unless the vault is not all there (a drive unplugged, an empty mount point).
            if (problem := await asyncio.to_thread(root_problem, rt.vault, holds_notes=True)) is not None:
                raise VaultError(f"{existing.path} cannot be written: {problem}")
            gone_check = await rt.require_sync().sync_path(existing.path)  # the old node is archived
            if gone_check.action == FAILED:
                raise VaultError(f"{existing.path} cannot be written: {gone_check.error}")
            namesake = await rt.store.read(memory_sql.live_namesake, label, existing.name, existing.id)
            if namesake is not None:  # the name has a live note since: that is the entity now (`note_holder`)
                return await into_namesake(namesake)
            fresh = identify.new_engrama_id()
            done = await _create(rt, fresh, label, existing.name, properties, observation, relations, True)
            gone = (
                f"{existing.path} is now a link to another note"
                if linked
                else f"{existing.path} was deleted (it is neither in the vault nor in its trash)"
            ) + ", so this is a new note with a new id; the old entity stays archived"
            return replace(done, message=f"{done.message}; {gone}")
        if (
            existing is not None
            and existing.status != "stub"
            and await rt.store.read(nodes_sql.had_note, existing.id)
        ):
            # The entity had a note, but its path was taken by another note (the person deleted or trashed it
            # and made a new one there) and a write made it current again in the graph only.
            return await _write_without_path(rt, existing, label, properties, observation, relations, remove)
        created = existing is None or existing.status == "stub"
        node_id = existing.id if existing is not None else identify.new_engrama_id()
        called = existing.name if existing is not None else name
        return await _create(rt, node_id, label, called, properties, observation, relations, created)

    try:
        return await into_the_vault(target)
    except NotItsNote as exc:
        # The graph has not read what is at the entity's path now (and the entity's id is not elsewhere in
        # the vault): read it, then decide again on the graph as it is.
        await rt.require_sync().sync_path(exc.path)
        try:
            again = await rt.store.get_node(target.id) if target is not None else None
            return await into_the_vault(again or target)
        except NotItsNote as still:
            raise ServiceError(str(still)) from None


async def _write_without_path(
    rt: Runtime,
    existing: Node,
    label: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    remove: tuple[str, ...],
) -> EntityWrite:
    """Write an entity that had a note and has no path now: into that note when it is still somewhere (the
    trash: restored beside its label's folder's name; moved: where it is), else into a new note with a FRESH
    id, the old node folded into it and archived. Writing the old id into a new note would give two files one
    id as soon as the old one came back, and the person's file would lose its id as a "copy"."""
    found = await locate_entity_note(rt, existing)
    if found is not None:
        home = f"{rt.profile.folder_for(label)}/{note_filename(existing.name)}"
        return await _write_found(
            rt, replace(existing, path=home), found, properties, observation, relations, remove
        )
    fresh = identify.new_engrama_id()
    done = await _create(rt, fresh, label, existing.name, properties, observation, relations, True)
    await rt.store.write(memory_sql.fold_graph_only_node, existing.id, done.id, utc_now())
    gone = "its earlier note is neither in the vault nor in its trash, so this is a new note with a new id"
    return replace(done, message=f"{done.message}; {gone}")


async def _made_in_graph_only(rt: Runtime, node: Node) -> bool:
    """A live node no note ever stood for (a tool's write in a process that could not write the vault)."""
    return (
        node.status == "active" and node.path is None and not await rt.store.read(nodes_sql.had_note, node.id)
    )


async def _caught_up(rt: Runtime, name: str) -> bool:
    """Reconcile the notes named like `name` that the graph has not read yet (the person may have just made
    the entity's note); True when there were any. Keeps a tool from creating a second note for it."""
    known = await rt.store.file_states()
    stems = {name, note_filename(name)[:-3]}
    try:
        paths = await asyncio.to_thread(unseen_notes_named, rt.vault, stems, known)
    except VaultError:
        return False  # the vault cannot be walked now: the create below reports what is wrong
    for rel in paths:
        await rt.require_sync().sync_path(rel)
    return bool(paths)


async def locate_entity_note(rt: Runtime, node: Node) -> Located | None:
    """Where the note holding `node.id` is now, when it is no longer at `node.path` (one walk of the
    vault, a few reads): moved or renamed in the vault, in `.trash/`, or None when it is gone."""
    known = await rt.store.file_states()
    try:
        return await asyncio.to_thread(locate_note, rt.vault, node.id, known)
    except VaultError as exc:
        raise ServiceError(
            f"{node.name!r} is no longer at {node.path}, and the vault could not be searched for it: {exc}; "
            "nothing was written. Fix that, then try again"
        ) from exc


async def _write_found(
    rt: Runtime,
    node: Node,
    found: Located,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    remove: tuple[str, ...],
) -> EntityWrite:
    """Write the entity into its note where `locate_note` found it, restoring it from the trash first."""
    assert node.path is not None
    rel, how = found.path, f"its note had moved from {node.path}"
    if found.in_trash:
        try:
            rel = await asyncio.to_thread(restore_from_trash, rt.vault, found.path, node.path)
        except (OSError, VaultError) as exc:
            raise ServiceError(
                f"{node.name!r} is in the trash ({found.path}) and could not be restored: {exc}; nothing "
                "was written. Restore it in Obsidian, then try again"
            ) from exc
        how = f"its note was in the trash ({found.path}) and is back at {rel}"
    node = await reconcile_moved(rt, node, rel)
    added = await _update(rt, rel, properties, observation, relations, remove, node_id=node.id)
    done = await _settled(rt, rel, node.id, node.label, node.name, False, added)
    return replace(done, message=f"{done.message}; {how}")


async def reconcile_moved(rt: Runtime, node: Node, rel: str) -> Node:
    """Reconcile the note of `node` found at `rel` (a move, since its old file is gone); the node now."""
    outcome = await rt.require_sync().sync_path(rel)
    moved = await rt.store.get_node(node.id) if outcome.id == node.id else None
    if outcome.action == FAILED or moved is None:
        raise ServiceError(
            f"{node.name!r} now lives at {rel}, but that note could not be reconciled "
            f"({outcome.error or outcome.action}); nothing was written. Call engrama_sync_note with this path"
        )
    return moved


async def _update(
    rt: Runtime,
    rel: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    remove: tuple[str, ...] = (),
    *,
    node_id: str | None = None,
    base: Mapping[str, Any] | None = None,
) -> int:
    """Edit the note's own keys, observation and relations; returns how many relations were new.

    A note still owed its id line (indexed under `node_id` while it was blank or just changed) gets it in the
    same write: the tool replaces the file anyway, so the line adds no new race with the person's editor.
    `base` (a queued write's): what its keys held when it was queued; a key the note now holds another value
    for was changed since, by the person or a later write, and is left as it is, judged on the very bytes the
    write edits (review 22i: judged before the wait for quiet, a value typed during the wait was overwritten)."""
    today = date.today().isoformat()
    counted: dict[str, int] = {}
    links = await _links(rt, relations)
    recorded = await rt.store.file_state(rel) if node_id is not None else None

    def its_note(data: bytes, read: FileState) -> None:  # what the edit is based on is the entity's note
        if node_id is not None:
            require_note_of(data, read, node_id, rel, recorded)

    def edit(data: bytes) -> bytes:  # pure: the writer re-runs it when the note changed meanwhile
        wanted, taken_out = still_wanted(properties, remove, base, frontmatter_of(data))
        data = update_note(data, properties=wanted, observation=observation, today=today, remove=taken_out)
        data, counted["added"] = _with_relations(data, links)
        if node_id is not None and identify.read_id(data) is None:
            data = identify.insert_id(data, node_id)
        return data

    try:
        await edit_note_aside(rt.vault, rel, edit, quiet=await rt.quiet_rule(rel), check=its_note)
    except MalformedNote as exc:
        raise ServiceError(f"{rel} was left alone: {exc}") from exc
    return counted.get("added", 0)


def still_wanted(
    properties: Mapping[str, Any],
    remove: tuple[str, ...],
    base: Mapping[str, Any] | None,
    held: Mapping[str, Any],
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The keys of a write still to write into a note holding `held` now: (properties, keys to take out). A key
    holding neither what it held when the write was queued (`base`) nor what the write sets was changed since,
    and an older write must not undo that. Values compare by their JSON form (a note's `3` and a tool's `3`)."""
    if base is None:
        return dict(properties), remove

    def changed_since(key: str, wanted: Any) -> bool:
        now = _plain(held.get(key))
        return key in base and now != _plain(base[key]) and now != _plain(wanted)

    return (
        {k: v for k, v in properties.items() if not changed_since(k, v)},
        tuple(k for k in remove if not changed_since(k, None)),
    )


def _plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def frontmatter_of(data: bytes) -> dict[str, Any]:
    """The note's frontmatter mapping ({} when it has none or it does not parse: the edit then says why)."""
    try:
        return read_frontmatter(data)[1]
    except MalformedNote:
        return {}


def require_note_of(data: bytes, read: FileState, node_id: str, rel: str, recorded: FileState | None) -> None:
    """Raise `NotItsNote` unless `data` (read as `read`) is the note of `node_id`: it holds that id, or no id
    and is what the graph last read at `rel` as that node's note (`recorded`; a note indexed while still owed
    its id line is recorded without its checksum, so its size and modification time must be the recorded
    ones)."""
    held = identify.read_id(data)
    if held == node_id or (held is None and not _parses(data)):
        return  # a note whose frontmatter does not parse: the edit refuses it, saying why
    if held is None and recorded is not None and recorded.node_id == node_id:
        same_stat = (read.size, read.mtime_ns) == (recorded.size, recorded.mtime_ns)
        if read.checksum == recorded.checksum or (recorded.checksum == OWED_ID and same_stat):
            return
    what = "another note's engrama_id" if held is not None else "no engrama_id, and changed since it was read"
    raise NotItsNote(
        f"{rel} holds {what}, so it is not known to be this entity's note; nothing was written. Call "
        "engrama_sync_note with this path, then try again",
        rel,
    )


def _parses(data: bytes) -> bool:
    try:
        read_frontmatter(data)
    except VaultError:
        return False
    return True


def _with_relations(data: bytes, links: Sequence[tuple[str, str, tuple[str, ...]]]) -> tuple[bytes, int]:
    added = 0
    for rel_type, link, same in links:
        edited = add_relation(data, rel_type, link, same)
        added += edited != data
        data = edited
    return data, added


async def _create(
    rt: Runtime,
    node_id: str,
    label: str,
    name: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    created: bool,
) -> EntityWrite:
    """Create the entity's note in its label's folder; a clash with another note's file name gets `Name 2`.
    Never while the vault is not all there (`root_problem`): the note would be written where the person's
    vault is not, and hidden when it comes back."""
    holds_notes = await rt.store.read(sync_sql.knows_files)
    if (problem := await asyncio.to_thread(root_problem, rt.vault, holds_notes=holds_notes)) is not None:
        raise VaultError(f"{name} was not written: {problem}")
    data = render_new_note(
        engrama_id=node_id, label=label, name=name, properties=properties, observation=observation
    )
    links = await _links(rt, relations)
    data, added = _with_relations(data, links)
    folder = await asyncio.to_thread(spelled_in_vault, rt.vault, rt.profile.folder_for(label))
    stem = note_filename(name)[:-3]
    for n in range(1, MAX_NAME_SUFFIX + 1):
        rel = f"{folder}/{stem}{'' if n == 1 else f' {n}'}.md"
        try:
            result = await asyncio.to_thread(create_note, rt.vault, rel, data)
        except NoteExists:
            same = await _note_is_entity(rt, rel, label, name)
            if same is not None:  # the entity's own note, not synced yet: merge into it
                added = await _update(rt, rel, properties, observation, relations, node_id=same)
                done = await _settled(rt, rel, same, label, name, False, added)
                # A node made in the graph only for this entity (a follower's queued write) is the same one.
                await rt.store.write(memory_sql.fold_graph_only_node, node_id, same, utc_now())
                return done
            continue
        return await _settled(rt, result.path, node_id, label, name, created, added)
    raise ServiceError(
        f"{folder}/ already holds {MAX_NAME_SUFFIX} notes named like {stem!r}; remember it under a more "
        "specific name"
    )


async def _note_is_entity(rt: Runtime, rel: str, label: str, name: str) -> str | None:
    """The node id of the note at `rel` when it is the entity `label` + `name`, else None. A note whose entity
    was purged from the graph (the note kept) is read again: the name remembered anew is that note (review
    21c: it got a second note, `Name 2.md`, beside the person's)."""
    outcome = await rt.require_sync().sync_path(rel)
    if outcome.action == FAILED:
        # It may well be the entity's note, with a typo in its frontmatter or bytes that are not UTF-8: a note
        # `Name 2.md` beside it would split the entity in two once it is fixed (review 23a).
        raise ServiceError(
            f"{name} was not written: {rel} is already there and cannot be read ({outcome.error}); it may be "
            f"the note of {name}. Fix it (or rename it if it is another note), then try again"
        )
    if (
        outcome.id
        and await rt.store.get_node(outcome.id) is None
        and await rt.store.write(sync_sql.unpurged, rel)
    ):
        outcome = await rt.require_sync().sync_path(rel)
    node = await rt.store.get_node(outcome.id) if outcome.id else None
    if node is not None and node.label == label and node.name.casefold() == name.casefold():
        return node.id
    return None


async def _settled(
    rt: Runtime, rel: str, node_id: str, label: str, name: str, created: bool, added: int
) -> EntityWrite:
    """Reconcile the note just written, so the graph and the recorded checksum match the file."""
    outcome = await rt.require_sync().sync_path(rel)
    if outcome.action == FAILED:
        raise ServiceError(f"{rel} was written but could not be read back: {outcome.error}")
    verb = "created" if created else "updated"
    return EntityWrite(
        id=outcome.id or node_id,
        created=created,
        label=label,
        name=name,
        path=rel,
        relations_created=added,
        message=f"{verb} the note {rel}",
    )


async def _write_graph_only(
    rt: Runtime,
    label: str,
    name: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    reason: str,
    remove: tuple[str, ...],
) -> EntityWrite:
    """Write the graph; when a vault exists (another process holds its lease), queue the note write for the
    lease holder in the same transaction (the outbox, `server.services.outbox`), so it reaches the vault."""
    queue = rt.sync is not None
    queued = [QueuedRelation(r.rel_type, r.target.id, r.target.name) for r in relations]
    # What the note holds under the keys the graph keeps apart (tags, aliases): the base a queued write of them
    # is applied against (`outbox._still_wanted`), since the graph cannot tell (review 20e).
    note_base: dict[str, Any] = {}
    if queue and (fields := NOTE_FIELDS.intersection((*properties, *remove))):
        held = await rt.store.read(memory_sql.find_merge_target, label, name)
        if held is not None and held.path:
            note_base = {key: None for key in fields} | await note_fields(rt, held.path, fields)
    node_id, created, added = await rt.store.write(
        outbox_sql.remember_and_queue,
        label,
        name,
        dict(properties),
        observation,
        utc_now(),
        reason,
        remove,
        queued,
        date.today().isoformat() if queue else None,
        note_base,
    )
    if not queue:
        message = "saved in the graph only (no vault is configured); no note was written"
    else:
        node = await rt.store.get_node(node_id)
        where = (
            f"the note {node.path}"
            if node is not None and node.path
            else f"a new note in {rt.profile.folder_for(label)}/"
        )
        message = (
            "saved in the graph and queued for the vault: another engrama-vault process (another MCP "
            f"client's server) holds this vault's lease, and it writes {where} within about a second. "
            "engrama_status shows writes still waiting"
        )
    return EntityWrite(
        id=node_id,
        created=created,
        label=label,
        name=name,
        path=None,
        relations_created=added,
        message=message,
    )
