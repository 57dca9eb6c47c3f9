"""`engrama_remember`: MERGE an entity by label + name and write what was learnt into its note."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.runtime import Runtime
from server.services import reflect_hooks
from server.services.conflicts import Clarification, PropertyPlan, plan_properties, require_resolve
from server.services.entities import (
    NOTE_FIELDS,
    PlannedRelation,
    RelationSpec,
    note_fields,
    relations_planned,
    write_reviving,
)
from server.services.errors import ServiceError
from server.services.outbox import any_waiting, in_order
from server.services.revival import Revival
from server.services.schema import require_label, require_name, require_plain_text, require_properties
from server.store import brief_sql, memory_sql
from server.store.clock import utc_now
from vault_sync.names import visible
from vault_sync.notes import observation_line
from vault_sync.open_blocks import open_block

MAX_OBSERVATION_CHARS = 20_000
MAX_RELATIONS = 50


@dataclass(frozen=True)
class Remembered:
    id: str
    created: bool
    label: str
    name: str
    path: str | None
    relations_created: int
    embedded: bool
    message: str
    proactive_hint: str | None = None
    history_kept: tuple[str, ...] = ()  # properties whose old value was kept as history
    clarifications: tuple[Clarification, ...] = ()  # properties left alone until the person decides
    revived: bool = False  # the entity was superseded or archived and is current again


async def remember(
    rt: Runtime,
    label: str,
    name: str,
    properties: Mapping[str, Any] | None = None,
    observation: str | None = None,
    relations: Sequence[RelationSpec] = (),
    resolve: str | None = None,
    reason: str | None = None,
) -> Remembered:
    """Validate against the profile, then create or update the entity's note (or graph node) and relations.

    A property that already holds a different value is replaced with its old value kept as history, or
    left alone with a clarification to ask the person (`conflicts`). Updating a superseded (`valid_to` set)
    or archived entity makes it current again, as does relating it to an archived one. Nothing is written
    unless every part of the call is valid."""
    label = require_label(rt.profile, label)
    name = require_name(name)
    props = require_properties(properties or {})
    choice = require_resolve(resolve)
    if observation is not None and len(observation) > MAX_OBSERVATION_CHARS:
        raise ServiceError(
            f"the observation is {len(observation)} characters; keep it under {MAX_OBSERVATION_CHARS} "
            "(one fact or a short paragraph per call)"
        )
    if observation is not None:
        require_plain_text(observation, "the observation")
        # As written into the note: what it leaves open would hide the rest of the note.
        if observation.strip() and (left_open := open_block(observation_line(observation, "0000-00-00"))):
            raise ServiceError(
                f"the observation leaves {left_open} open, which would swallow what follows it in the note "
                "(and stop later observations); close it in the observation"
            )
    if len(relations) > MAX_RELATIONS:
        raise ServiceError(
            f"{len(relations)} relations in one call is too many; give at most {MAX_RELATIONS}"
        )
    async with rt.entity_lock(name):
        target = await rt.store.read(memory_sql.find_entity, label, name)
        if await any_waiting(rt):  # what another client's server queued about them lands first
            reached = [
                n for s in relations for n in await rt.store.find_nodes(s.target, include_archived=True)
            ]
            await in_order(rt, target, *reached)
            target = await rt.store.read(memory_sql.find_entity, label, name)
        if target is None:
            name = visible(name)  # a new entity's name without characters that show as nothing (review 23h)
        current = dict(target.properties) if target is not None and target.status != "stub" else {}
        if target is not None and target.path and (fields := NOTE_FIELDS.intersection(props)):
            current |= await note_fields(rt, target.path, fields)
        plan = plan_properties(target.name if target else name, current, props, choice)
        why = (reason or "").strip() or (observation or "").strip() or "changed with engrama_remember"
        source_id = target.id if target is not None else None
        async with relations_planned(rt, label, name, relations, source_id) as planned:
            written, revival = await write_reviving(
                rt, label, name, plan.write, observation, planned, target, why
            )
    await _keep_questions(rt, written.id, plan, props)
    await reflect_hooks.note_remembered(rt)
    return Remembered(
        id=written.id,
        created=written.created,
        label=written.label,
        name=written.name,
        path=written.path,
        relations_created=written.relations_created,
        embedded=vectors_enabled(rt),
        message=_message(written.message, plan, revival, planned),
        proactive_hint=await reflect_hooks.proactive_hint(rt),
        history_kept=tuple(plan.replaced),
        clarifications=tuple(plan.clarifications),
        revived=revival is not None,
    )


def _message(
    base: str, plan: PropertyPlan, revival: Revival | None, relations: Sequence[PlannedRelation]
) -> str:
    parts = [base]
    if revival is not None:
        parts.append(f"it was {revival.was} and is current again")
    for relation in relations:
        if relation.revived is not None:
            parts.append(f"{relation.target.name} was {relation.revived} and is current again")
    if plan.replaced:
        parts.append(f"the previous value of {', '.join(plan.replaced)} is kept as history")
    if plan.held:
        parts.append(
            f"{', '.join(plan.held)} already held that value, spelled as the note has it, and was left as it is "
            "(pass resolve='replace' to write your spelling)"
        )
    for ask in plan.clarifications:
        parts.append(f"{ask.key} was NOT changed: {ask.question}")
    return "; ".join(parts)


async def _keep_questions(rt: Runtime, node_id: str, plan: PropertyPlan, props: Mapping[str, Any]) -> None:
    """Keep the clarifications asked until the person decides (the session brief reminds them); a later
    remember of the same key settles its question."""
    asked = [(c.key, c.current, c.proposed, c.question) for c in plan.clarifications]
    settled = [key for key in props if key not in {c.key for c in plan.clarifications}]
    if asked or settled:
        await rt.store.write(brief_sql.record_clarifications, node_id, asked, settled, utc_now())


def vectors_enabled(rt: Runtime) -> bool:
    """True when new passages get vectors (an embedder is configured and sqlite-vec loaded).

    The vectors themselves are computed in the background within moments of the write; until then, and
    always when this is False, the entity is found by full-text search."""
    return rt.settings.embedding_provider != "none" and rt.store.db.vec.ok
