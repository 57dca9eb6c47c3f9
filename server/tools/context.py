"""`engrama_context`: an entity and its neighbourhood in the graph."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from server.services.context import context
from server.store import Node
from server.tools.common import READ_ONLY, runtime, tool_errors


class Entity(BaseModel):
    id: str
    label: str
    name: str
    path: str | None
    status: str = Field(description="active, stub (named by a link, no note yet) or archived")
    properties: dict[str, Any]
    confidence: float
    updated_at: str


class NeighbourOut(BaseModel):
    id: str
    label: str
    name: str
    rel_type: str
    direction: str = Field(description="out: via -> this neighbour; in: this neighbour -> via")
    hops: int
    via: str = Field(description="id of the entity it is related to (the asked-for entity at hop 1)")


class ContextResult(BaseModel):
    node: Entity
    neighbours: list[NeighbourOut]
    truncated: bool = Field(description="true when only the nearest neighbours are listed")
    also_named: list[Entity] = Field(description="other entities with the same name (pass label to pick one)")


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
        hops: Annotated[int, Field(ge=1, le=3, description="how far to follow relations: 1, 2 or 3")] = 1,
    ) -> ContextResult:
        """Show one entity with its properties and the entities related to it (up to 3 hops). Call it
        when you need the full picture around a project, person or topic, e.g. what a project uses and
        which problems it had. Use engrama_search first when you are not sure of the exact name."""
        with tool_errors():
            found = await context(runtime(ctx), name, label, hops)
        return ContextResult(
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
        )
