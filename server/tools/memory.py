"""`engrama_remember` and `engrama_relate`: the two tools that write what the assistant learnt."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.services.entities import RelationSpec
from server.services.relate import relate
from server.services.remember import remember
from server.tools.common import WRITES_IDEMPOTENT, result, runtime, tool_errors


class RelationIn(BaseModel):
    type: str = Field(description="relation type from the profile, e.g. USES, WORKS_ON, RELATED_TO")
    target: str = Field(description="name of the other entity")
    target_label: str | None = Field(None, description="its label, when it may not exist yet")


class ClarificationOut(BaseModel):
    key: str
    current: Any = Field(description="the value the entity has now")
    proposed: Any = Field(description="the value this call gave")
    question: str = Field(description="what to ask the person")


class Remembered(BaseModel):
    id: str
    created: bool = Field(
        description="true when the entity is new; false when it merged into an existing one"
    )
    label: str
    name: str
    path: str | None = Field(
        description="the entity's note, vault-relative; null when only the graph was written"
    )
    relations_created: int
    embedded: bool = Field(description="true when vector search covers it (vectors follow within moments)")
    message: str
    proactive_hint: str | None = None
    history_kept: list[str] = Field(
        default=[], description="properties whose previous value was replaced and kept as history"
    )
    clarifications: list[ClarificationOut] = Field(
        default=[],
        description="properties NOT changed because the new value may replace the old or join it: ask the "
        "person, then call engrama_remember again with resolve",
    )
    revived: bool = Field(
        default=False, description="true when the entity was superseded or archived and is current again"
    )


class Edge(BaseModel):
    source: str
    rel_type: str
    target: str
    source_id: str
    target_id: str


class Related(BaseModel):
    created: bool = Field(description="false when the relation was already recorded")
    edge: Edge
    note_path: str | None = Field(description="the source note holding the relation; null for graph-only")
    message: str
    revived: list[str] = Field(
        default=[], description="names of the ends that were archived (forgotten) and are current again"
    )


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_remember(
        ctx: Context,
        label: Annotated[
            str, Field(description="entity type from the profile, e.g. Project, Person, Technology")
        ],
        name: Annotated[
            str, Field(description="the entity's name; reuse the exact name engrama_search shows")
        ],
        properties: Annotated[
            dict[str, Any], Field(description='short facts as key: value, e.g. {"status": "active"}')
        ] = {},  # noqa: B006 - pydantic copies defaults, and the schema shows {}
        observation: Annotated[
            str | None, Field(description="what was learnt, one or two sentences; appended with today's date")
        ] = None,
        relations: Annotated[
            list[RelationIn], Field(description="relations from this entity to others")
        ] = [],  # noqa: B006
        resolve: Annotated[
            Literal["replace", "keep_both"] | None,
            Field(
                description="only after a clarification: 'replace' (the new value replaces the old, kept "
                "as history) or 'keep_both' (the property holds both values)"
            ),
        ] = None,
        reason: Annotated[
            str | None, Field(description="why a value changed, kept in the history (e.g. 'changed jobs')")
        ] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Remember something durable about an entity (project, person, decision, technology...) in the
        person's vault. Call it when the person shares a fact, decision or lesson worth keeping; it merges
        by label + name (never duplicates), so search first and reuse the existing name. Writes or updates
        the entity's note. A changed fact keeps its old value as history; when the
        new value might replace the old or be a second one (a second employer?), the result has a
        clarification: ask the person and call again with resolve."""
        specs = [RelationSpec(r.type, r.target, r.target_label) for r in relations]
        with tool_errors():
            done = await remember(
                runtime(ctx), label, name, properties, observation, specs, resolve=resolve, reason=reason
            )
        return result(
            Remembered(
                **{k: v for k, v in vars(done).items() if k not in ("history_kept", "clarifications")},
                history_kept=list(done.history_kept),
                clarifications=[
                    ClarificationOut.model_validate(c, from_attributes=True) for c in done.clarifications
                ],
            )
        )

    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_relate(
        ctx: Context,
        source: Annotated[str, Field(description="the entity the relation starts from")],
        rel_type: Annotated[str, Field(description="relation type from the profile, e.g. USES, DEPENDS_ON")],
        target: Annotated[str, Field(description="the entity it points to")],
        source_label: Annotated[
            str | None, Field(description="the source's label, if it may not exist yet")
        ] = None,
        target_label: Annotated[
            str | None, Field(description="the target's label, if it may not exist yet")
        ] = None,
    ) -> Annotated[CallToolResult, Related]:
        """Record a typed relation between two entities, e.g. project USES technology. Call it when the
        person states how two things are connected. Missing entities are created, forgotten ones made
        current again; the relation is written into the source entity's note (its `relations:`
        frontmatter) so it shows in Obsidian."""
        with tool_errors():
            done = await relate(runtime(ctx), source, rel_type, target, source_label, target_label)
        return result(
            Related(
                created=done.created,
                edge=Edge(
                    source=done.source,
                    rel_type=done.rel_type,
                    target=done.target,
                    source_id=done.source_id,
                    target_id=done.target_id,
                ),
                note_path=done.note_path,
                message=done.message,
                revived=list(done.revived),
            )
        )
