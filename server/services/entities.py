"""Writing one entity and its relations: into its note when this process may write the vault, else into
the graph only. Shared by `remember` and `relate`.

The note is the truth (DESIGN §2): a vault write edits or creates the file through the safe writer, then
reconciles that one path (`VaultSync.sync_path`), so the graph and the recorded checksum describe exactly
the bytes on disk and the watcher later sees "unchanged". Relations are written as `"[[Target]]"` items in
the note's `relations:` block; the reconcile turns them into edges.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from server.runtime import Runtime
from server.services.errors import RelationNotAllowed, ServiceError
from server.services.schema import (
    optional_label,
    require_allowed,
    require_name,
    require_relation,
    single_label,
)
from server.store import Node, memory_sql
from server.store.clock import utc_now
from vault_sync import identify
from vault_sync.errors import MalformedNote
from vault_sync.notes import note_filename, render_new_note, update_note
from vault_sync.relations_block import add_relation
from vault_sync.report import FAILED
from vault_sync.writer import NoteExists, create_note, edit_note

MAX_NAME_SUFFIX = 20  # `Name 2.md` ... when another entity's note already has the plain file name


@dataclass(frozen=True)
class RelationSpec:
    """A relation as a caller states it: type, target name and, optionally, the target's label."""

    rel_type: str
    target: str
    target_label: str | None = None


@dataclass(frozen=True)
class PlannedRelation:
    """A checked relation whose target node exists; `link` is what goes between `[[` and `]]`."""

    rel_type: str
    target: Node
    link: str


@dataclass(frozen=True)
class EntityWrite:
    id: str
    created: bool
    label: str
    name: str
    path: str | None  # the note written; None when only the graph was written
    relations_created: int
    message: str


async def plan_relations(
    rt: Runtime, source_label: str, source_name: str, specs: Sequence[RelationSpec]
) -> list[PlannedRelation]:
    """Check every relation against the profile, then make sure each target node exists.

    All checks run before anything is created, so one bad relation leaves the graph untouched."""
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
        if node is not None and node.status == "active" and not rt.profile.allows(rel, source_label, label):
            where = f" ({node.path})" if node.path else ""
            raise RelationNotAllowed(
                f"{node.name!r} is a {label}{where}, and {rel} cannot go from a {source_label} to a {label}; "
                f"set its `type:` in the note, or use another relation type (RELATED_TO connects any two)"
            )
        require_allowed(rt.profile, rel, source_label, label)
        checked.append((rel, target, wanted))
    planned: list[PlannedRelation] = []
    for rel, target, wanted in checked:
        node, _ = await rt.store.write(memory_sql.ensure_target, target, wanted, utc_now())
        planned.append(PlannedRelation(rel, node, await _link_text(rt, node)))
    return planned


async def _link_text(rt: Runtime, node: Node) -> str:
    """The node's name, or its path when the bare name would lead a wikilink to another node."""
    first = (await rt.store.find_nodes(node.name) or [node])[0]
    if first.id != node.id and node.path:
        return node.path[:-3] if node.path.lower().endswith(".md") else node.path
    return node.name


def writes_notes(rt: Runtime) -> bool:
    """True when this process may write the vault (a vault is configured and we hold its lease)."""
    return rt.sync is not None and rt.sync.writable


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
) -> EntityWrite:
    """MERGE the entity by label + name and write it: into its note when we may, else the graph only.

    `target` is the node to write into when the caller already chose it (an archived one, to revive it);
    `remove` names frontmatter keys to take out; `reason` is why replaced values changed (graph-only
    writes record it in the history themselves; a note write's history comes from the reconcile)."""
    if not writes_notes(rt):
        return await _write_graph_only(rt, label, name, properties, observation, relations, reason, remove)
    existing = target or await rt.store.read(memory_sql.find_merge_target, label, name)
    if existing is not None and existing.path and existing.status != "stub":
        try:
            added = await _update(rt, existing.path, properties, observation, relations, remove)
            return await _settled(rt, existing.path, existing.id, label, existing.name, False, added)
        except FileNotFoundError:
            await rt.require_sync().sync_path(existing.path)  # the note is gone: archive, then write anew
    created = existing is None or existing.status == "stub"
    node_id = existing.id if existing is not None else identify.new_engrama_id()
    name = existing.name if existing is not None else name
    return await _create(rt, node_id, label, name, properties, observation, relations, created)


async def _update(
    rt: Runtime,
    rel: str,
    properties: Mapping[str, Any],
    observation: str | None,
    relations: Sequence[PlannedRelation],
    remove: tuple[str, ...] = (),
) -> int:
    """Edit the note's own keys, observation and relations; returns how many relations were new."""
    today = date.today().isoformat()
    counted: dict[str, int] = {}

    def edit(data: bytes) -> bytes:  # pure: the writer re-runs it when the note changed meanwhile
        data = update_note(data, properties=properties, observation=observation, today=today, remove=remove)
        data, counted["added"] = _with_relations(data, relations)
        return data

    try:
        await asyncio.to_thread(edit_note, rt.vault, rel, edit)
    except MalformedNote as exc:
        raise ServiceError(f"{rel} was left alone: {exc}") from exc
    return counted.get("added", 0)


def _with_relations(data: bytes, relations: Sequence[PlannedRelation]) -> tuple[bytes, int]:
    added = 0
    for relation in relations:
        edited = add_relation(data, relation.rel_type, relation.link)
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
    """Create the entity's note in its label's folder; a clash with another note's file name gets `Name 2`."""
    data = render_new_note(
        engrama_id=node_id, label=label, name=name, properties=properties, observation=observation
    )
    data, added = _with_relations(data, relations)
    folder, stem = rt.profile.folder_for(label), note_filename(name)[:-3]
    for n in range(1, MAX_NAME_SUFFIX + 1):
        rel = f"{folder}/{stem}{'' if n == 1 else f' {n}'}.md"
        try:
            result = await asyncio.to_thread(create_note, rt.vault, rel, data)
        except NoteExists:
            same = await _note_is_entity(rt, rel, label, name)
            if same is not None:  # the entity's own note, not synced yet: merge into it
                added = await _update(rt, rel, properties, observation, relations)
                return await _settled(rt, rel, same, label, name, False, added)
            continue
        return await _settled(rt, result.path, node_id, label, name, created, added)
    raise ServiceError(
        f"{folder}/ already holds {MAX_NAME_SUFFIX} notes named like {stem!r}; remember it under a more "
        "specific name"
    )


async def _note_is_entity(rt: Runtime, rel: str, label: str, name: str) -> str | None:
    """The node id of the note at `rel` when it is the entity `label` + `name`, else None."""
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
    now = utc_now()
    node_id, created = await rt.store.write(
        memory_sql.remember_in_graph, label, name, dict(properties), observation, now, reason, remove
    )
    added = 0
    for relation in relations:
        added += await rt.store.write(
            memory_sql.add_tool_edge, node_id, relation.rel_type, relation.target.id, now
        )
    why = (
        "no vault is configured"
        if rt.sync is None
        else "another engrama-vault process holds this vault's lease and is the one that writes notes"
    )
    return EntityWrite(
        id=node_id,
        created=created,
        label=label,
        name=name,
        path=None,
        relations_created=added,
        message=f"saved in the graph only ({why}); no note was written",
    )
