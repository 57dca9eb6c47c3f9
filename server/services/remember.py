"""`engrama_remember`: MERGE an entity by label + name and write what was learnt into its note."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.runtime import Runtime
from server.services import reflect_hooks
from server.services.entities import RelationSpec, plan_relations, write_entity
from server.services.errors import ServiceError
from server.services.schema import require_label, require_name, require_properties

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


async def remember(
    rt: Runtime,
    label: str,
    name: str,
    properties: Mapping[str, Any] | None = None,
    observation: str | None = None,
    relations: Sequence[RelationSpec] = (),
) -> Remembered:
    """Validate against the profile, then create or update the entity's note (or graph node) and relations.

    Nothing is written unless every part of the call is valid."""
    label = require_label(rt.profile, label)
    name = require_name(name)
    props = require_properties(properties or {})
    if observation is not None and len(observation) > MAX_OBSERVATION_CHARS:
        raise ServiceError(
            f"the observation is {len(observation)} characters; keep it under {MAX_OBSERVATION_CHARS} "
            "(one fact or a short paragraph per call)"
        )
    if len(relations) > MAX_RELATIONS:
        raise ServiceError(
            f"{len(relations)} relations in one call is too many; give at most {MAX_RELATIONS}"
        )
    planned = await plan_relations(rt, label, name, relations)
    written = await write_entity(rt, label, name, props, observation, planned)
    await reflect_hooks.note_remembered(rt)
    return Remembered(
        id=written.id,
        created=written.created,
        label=written.label,
        name=written.name,
        path=written.path,
        relations_created=written.relations_created,
        embedded=vectors_enabled(rt),
        message=written.message,
        proactive_hint=await reflect_hooks.proactive_hint(rt),
    )


def vectors_enabled(rt: Runtime) -> bool:
    """True when new passages get vectors (an embedder is configured and sqlite-vec loaded).

    The vectors themselves are computed in the background within moments of the write; until then, and
    always when this is False, the entity is found by full-text search."""
    return rt.settings.embedding_provider != "none" and rt.store.db.vec.ok
