"""`engrama_context`: one entity and the entities around it, up to three hops away."""

from __future__ import annotations

from dataclasses import dataclass, replace

from server.runtime import Runtime
from server.search.service import normalize_as_of
from server.services.errors import EntityNotFound, ServiceError
from server.services.schema import optional_label, require_name
from server.store import Node, history_sql, memory_sql
from server.store.history_sql import PastValue

MAX_HOPS = 3
MAX_HISTORY = 50  # the most recent changes; enough to answer "what was it before?"
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
    history: list[PastValue]  # past property values, the most recent change first
    as_of: str | None = None


async def context(
    rt: Runtime, name: str, label: str | None = None, hops: int = 1, as_of: str | None = None
) -> EntityContext:
    """The best match for `name` (and `label`) with its neighbours, nearest first, and its history.

    With `as_of`, the entity as it stood on that date: it must have been valid then, its properties are
    the values that held then, and its neighbours are the relations that held then."""
    name = require_name(name)
    if not 1 <= hops <= MAX_HOPS:
        raise ServiceError(f"hops must be 1, 2 or 3, not {hops}")
    try:
        when = normalize_as_of(as_of)
    except ValueError as exc:
        raise ServiceError(str(exc)) from None
    canonical = optional_label(rt.profile, label, for_writing=False)
    nodes = await rt.store.find_nodes(name, canonical, include_archived=when is not None)
    if when is None and not any(n.status == "active" for n in nodes):
        # Nothing current by that name: an archived entity (forgotten, or its note deleted) is still there to
        # look at, marked by its status, as `engrama_search(include_archived=true)` would show it.
        archived = await rt.store.find_nodes(name, canonical, include_archived=True)
        nodes = [n for n in archived if n.status == "archived"] + nodes
    if when is not None:
        nodes = [n for n in nodes if n.status != "stub" and _held(n, when)] or _not_valid(name, when, nodes)
    if not nodes:
        within = f" with label {canonical}" if canonical else ""
        raise EntityNotFound(
            f"no entity called {name!r}{within}; call engrama_search with a few words about it "
            "to find its exact name, then call engrama_context again"
        )
    node = nodes[0]
    if when is not None:
        past = await rt.store.read(history_sql.properties_as_of, node.id, node.properties, when)
        node = replace(node, properties=past)
    rows, truncated = await rt.store.read(memory_sql.neighbourhood, node.id, hops, MAX_NEIGHBOURS, when)
    return EntityContext(
        node=node,
        neighbours=[Related(*row) for row in rows],
        truncated=truncated,
        others=nodes[1:],
        history=await rt.store.read(history_sql.history, node.id, MAX_HISTORY),
        as_of=when,
    )


def _held(node: Node, when: str) -> bool:
    width = len(when)
    starts = node.valid_from is None or node.valid_from[:width] <= when
    return starts and (node.valid_to is None or node.valid_to[:width] >= when)


def _not_valid(name: str, when: str, nodes: list[Node]) -> list[Node]:
    """Raise when the entity exists but did not hold on `when` (an empty list when it does not exist)."""
    live = [n for n in nodes if n.status != "stub"]
    if not live:
        return []
    n = live[0]
    span = f"from {n.valid_from[:10] if n.valid_from else 'an unknown start'} to {n.valid_to[:10] if n.valid_to else 'now'}"
    raise EntityNotFound(
        f"{n.name!r} did not hold on {when}: it is valid {span}; ask about a date in that span"
    )
