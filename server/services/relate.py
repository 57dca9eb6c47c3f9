"""`engrama_relate`: a typed edge between two entities, mirrored into the source note's `relations:`."""

from __future__ import annotations

from dataclasses import dataclass

from server.runtime import Runtime
from server.services.entities import RelationSpec, plan_relations, write_entity
from server.services.errors import ServiceError
from server.services.schema import optional_label, require_name, require_relation, single_label


@dataclass(frozen=True)
class Related:
    created: bool  # False when the relation was already there
    source: str
    source_id: str
    rel_type: str
    target: str
    target_id: str
    note_path: str | None  # the source note that holds the relation; None when only the graph was written
    message: str


async def relate(
    rt: Runtime,
    source: str,
    rel_type: str,
    target: str,
    source_label: str | None = None,
    target_label: str | None = None,
) -> Related:
    """Find (or create) both ends by name and label, and record the relation in the source's note."""
    rel = require_relation(rt.profile, rel_type)
    source = require_name(source, "source")
    wanted = optional_label(rt.profile, source_label)
    label, name = await _source(rt, source, wanted, rel)
    [planned] = await plan_relations(rt, label, name, [RelationSpec(rel, target, target_label)])
    written = await write_entity(rt, label, name, {}, None, [planned])
    return Related(
        created=written.relations_created > 0,
        source=written.name,
        source_id=written.id,
        rel_type=rel,
        target=planned.target.name,
        target_id=planned.target.id,
        note_path=written.path,
        message=written.message if written.relations_created else "the relation was already recorded",
    )


async def _source(rt: Runtime, name: str, label: str | None, rel: str) -> tuple[str, str]:
    """The label and exact name of the source entity: an existing one, or what a new one would be."""
    nodes = await rt.store.find_nodes(name, label)
    live = next((n for n in nodes if n.status == "active"), None)
    if live is not None:
        return live.label, live.name
    inferred = label or single_label(rt.profile.relations[rel].sources)
    if inferred is None and nodes:
        return nodes[0].label, nodes[0].name  # a stub: it becomes a note of its current label
    if inferred is None:
        raise ServiceError(
            f"there is no entity called {name!r} yet, and {rel} may start from several labels; "
            "give source_label so it can be created (or engrama_remember it first)"
        )
    return inferred, nodes[0].name if nodes else name
