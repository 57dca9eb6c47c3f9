"""`engrama_context`: an entity and its neighbourhood in the graph."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.services.context import context
from server.store import Node
from server.tools.common import READ_ONLY, result, runtime, tool_errors


class Entity(BaseModel):
    id: str
    label: str
    name: str
    path: str | None
    status: str = Field(description="active, stub (named by a link, no note yet) or archived")
    properties: dict[str, Any]
    confidence: float
    valid_from: str | None = Field(description="since when it holds; null when not known")
    valid_to: str | None = Field(description="when it stopped holding (superseded); null while it holds")
    updated_at: str


class NeighbourOut(BaseModel):
    id: str
    label: str
    name: str
    rel_type: str
    direction: str = Field(description="out: via -> this neighbour; in: this neighbour -> via")
    hops: int
    via: str = Field(description="id of the entity it is related to (the asked-for entity at hop 1)")


class PastValueOut(BaseModel):
    key: str
    value: Any = Field(description="the value it had; null when the property was not set")
    valid_from: str | None = Field(description="since when it held; null when not known")
    valid_to: str = Field(description="when it was replaced")
    source: str = Field(description="note: an edit of the note; tool: changed by the assistant")
    reason: str


class ContextResult(BaseModel):
    node: Entity
    neighbours: list[NeighbourOut]
    truncated: bool = Field(description="true when only the nearest neighbours are listed")
    also_named: list[Entity] = Field(description="other entities with the same name (pass label to pick one)")
    history: list[PastValueOut] = Field(
        description="earlier values of its properties, the most recent change first"
    )
    as_of: str | None = Field(None, description="the date the node, properties and neighbours are shown for")


def _entity(node: Node) -> Entity:
    return Entity.model_validate(node, from_attributes=True)


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=READ_ONLY)
    async def engrama_context(
        ctx: Context,
        name: Annotated[str, Field(description="the entity's name (aliases work too)")],
        label: Annotated[
            str | None, Field(description="its label, to choose between same-named entities")
        ] = None,
        hops: Annotated[int, Field(ge=1, le=3, description="relations to follow: 1, 2 or 3")] = 1,
        as_of: Annotated[
            str | None,
            Field(description="ISO date (e.g. 2025-03-01): show the entity as it was on that day"),
        ] = None,
    ) -> Annotated[CallToolResult, ContextResult]:
        """Show one entity with its properties, how they changed (history), and the entities related to
        it (up to 3 hops). Call it when you need the full picture around a project, person or topic, e.g.
        what a project uses and which problems it had, or what was true at some date (as_of). Use
        engrama_search first when you are not sure of the exact name."""
        with tool_errors():
            found = await context(runtime(ctx), name, label, hops, as_of)
        return result(
            ContextResult(
                node=_entity(found.node),
                neighbours=[
                    NeighbourOut(
                        id=n.node.id,
                        label=n.node.label,
                        name=n.node.name,
                        rel_type=n.rel_type,
                        direction=n.direction,
                        hops=n.hops,
                        via=n.via,
                    )
                    for n in found.neighbours
                ],
                truncated=found.truncated,
                also_named=[_entity(n) for n in found.others],
                history=[PastValueOut.model_validate(p, from_attributes=True) for p in found.history],
                as_of=found.as_of,
            )
        )
