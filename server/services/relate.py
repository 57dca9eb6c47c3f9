"""`engrama_relate`: a typed edge between two entities, mirrored into the source note's `relations:`.

Names resolve as `engrama_remember` resolves them: the live entity, else the archived one of that label
(forgotten, or its note deleted), else a placeholder. An archived end is made current again (the README:
remembering something about an archived entity makes it current again), and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.runtime import Runtime
from server.services.entities import RelationSpec, relations_planned, write_reviving
from server.services.errors import ServiceError
from server.services.outbox import any_waiting, in_order
from server.services.schema import optional_label, require_name, require_relation, single_label
from server.store import Node, memory_sql

REVIVED_BY = "made current again by engrama_relate"


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
    revived: tuple[str, ...] = ()  # names of the ends that were archived and are current again


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
    async with rt.entity_lock(source):
        label, name, node = await _source(rt, source, wanted, rel)
        if await any_waiting(rt):  # what another client's server queued about them lands first
            await in_order(rt, node, *await rt.store.find_nodes(target, include_archived=True))
            label, name, node = await _source(rt, source, wanted, rel)
        specs = [RelationSpec(rel, target, target_label)]
        source_id = node.id if node is not None else None
        async with relations_planned(rt, label, name, specs, source_id) as [planned]:
            # A superseded source stays superseded: relating it says how it connects, not that it holds again.
            written, revival = await write_reviving(
                rt, label, name, {}, None, [planned], node, REVIVED_BY, superseded_too=False
            )
    revived = [written.name] if revival is not None else []
    if planned.revived is not None:
        revived.append(planned.target.name)
    message = written.message if written.relations_created else "the relation was already recorded"
    if revived:
        verb = "was archived and is" if len(revived) == 1 else "were archived and are"
        message += f"; {' and '.join(revived)} {verb} current again"
    return Related(
        created=written.relations_created > 0,
        source=written.name,
        source_id=written.id,
        rel_type=rel,
        target=planned.target.name,
        target_id=planned.target.id,
        note_path=written.path,
        message=message,
        revived=tuple(revived),
    )


async def _source(rt: Runtime, name: str, label: str | None, rel: str) -> tuple[str, str, Node | None]:
    """The label and exact name of the source entity and its node: the live one, else the archived one of
    that label (of any label when the relation does not decide), else a stub; no node when it is new."""
    nodes = await rt.store.find_nodes(name, label, include_archived=True)
    live = next((n for n in nodes if n.status == "active"), None)
    if live is not None:
        return live.label, live.name, live
    inferred = label or single_label(rt.profile.relations[rel].sources)
    if inferred is not None:
        node = await rt.store.read(memory_sql.find_entity, inferred, name)
        if node is None or node.status == "stub":
            # No entity of that label is *called* `name`, but an archived one answers to it as a link does (its
            # file name, an alias): that is the entity meant. Creating one under its name made a second one.
            node = next((n for n in nodes if n.status == "archived" and n.label == inferred), node)
        return inferred, node.name if node else (nodes[0].name if nodes else name), node
    node = next((n for n in nodes if n.status == "archived"), None) or next(
        (n for n in nodes if n.status == "stub"), None
    )
    if node is None:
        raise ServiceError(
            f"there is no entity called {name!r} yet, and {rel} may start from several labels; "
            "give source_label so it can be created (or engrama_remember it first)"
        )
    return node.label, node.name, node  # a stub becomes a note of its current label
