"""`engrama_context`: one entity and the entities around it, up to three hops away."""

from __future__ import annotations

from dataclasses import dataclass

from server.runtime import Runtime
from server.services.errors import EntityNotFound, ServiceError
from server.services.schema import optional_label, require_name
from server.store import Node, memory_sql

MAX_HOPS = 3
MAX_NEIGHBOURS = 200  # a hub three hops out can reach most of a vault; the model needs the nearest ones


@dataclass(frozen=True)
class Related:
    """One relation from the entity's neighbourhood: `via` is the node it was reached from."""

    node: Node
    rel_type: str
    direction: str  # "out": via -> node; "in": node -> via
    hops: int
    via: str


@dataclass(frozen=True)
class EntityContext:
    node: Node
    neighbours: list[Related]
    truncated: bool  # more neighbours than MAX_NEIGHBOURS; the nearest were kept
    others: list[Node]  # further entities with the same name (another label), for disambiguation


async def context(rt: Runtime, name: str, label: str | None = None, hops: int = 1) -> EntityContext:
    """The best match for `name` (and `label`) with its neighbours, nearest first."""
    name = require_name(name)
    if not 1 <= hops <= MAX_HOPS:
        raise ServiceError(f"hops must be 1, 2 or 3, not {hops}")
    canonical = optional_label(rt.profile, label, for_writing=False)
    nodes = await rt.store.find_nodes(name, canonical)
    if not nodes:
        within = f" with label {canonical}" if canonical else ""
        raise EntityNotFound(
            f"no entity called {name!r}{within}; call engrama_search with a few words about it "
            "to find its exact name, then call engrama_context again"
        )
    node = nodes[0]
    rows, truncated = await rt.store.read(memory_sql.neighbourhood, node.id, hops, MAX_NEIGHBOURS)
    return EntityContext(
        node=node,
        neighbours=[Related(*row) for row in rows],
        truncated=truncated,
        others=nodes[1:],
    )
