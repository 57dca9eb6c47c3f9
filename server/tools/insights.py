"""The four insight tools: reflect, surface, approve/dismiss, and write an approved insight into notes.

Registered only when `server.reflect.service` is installed (see `server.tools.register_tools`)."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.reflect import service
from server.tools.common import READ_ONLY, WRITES_IDEMPOTENT, result, runtime, tool_errors
from server.tools.sync import SyncFailure


class InsightSummary(BaseModel):
    id: str
    title: str
    pattern: str
    confidence: float


class ReflectResult(BaseModel):
    created: int = Field(description="insights found for the first time in this run")
    insights: list[InsightSummary] = Field(description="pending insights found or refreshed by this run")
    skipped_patterns: list[str] = Field(description="patterns the graph does not have enough data for yet")


class EntityRef(BaseModel):
    id: str
    label: str
    name: str


class Insight(BaseModel):
    id: str
    title: str
    body: str
    pattern: str
    confidence: float
    entities: list[EntityRef]


class Insights(BaseModel):
    insights: list[Insight]


class Decision(BaseModel):
    id: str
    status: str = Field(description="approved or dismissed")
    message: str = Field("", description="where the decision is recorded in the vault, or that it is queued")


class Written(BaseModel):
    written: list[str] = Field(description="vault-relative notes that now carry the insight")
    skipped: list[SyncFailure] = Field(default_factory=list, description="notes not written, and why")
    queued: str | None = Field(
        None, description="another process holds the vault and writes them within a second"
    )


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_reflect(
        ctx: Context,
        patterns: Annotated[
            list[str] | None,
            Field(description=f"patterns to run (default all): {', '.join(service.PATTERN_NAMES)}"),
        ] = None,
    ) -> Annotated[CallToolResult, ReflectResult]:
        """Look across everything remembered for patterns (shared technologies, solutions that could
        transfer between projects, stale or under-connected knowledge) and keep them as pending insights.
        Call it when a result carries a proactive_hint or the person asks what connects their work; then
        show the insights with engrama_surface_insights. Nothing is approved or written by this."""
        with tool_errors():
            done = await service.reflect(runtime(ctx), patterns)
        return result(ReflectResult.model_validate(done, from_attributes=True))

    @mcp.tool(annotations=READ_ONLY)
    async def engrama_surface_insights(
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        query: Annotated[str | None, Field(max_length=1000, description="favour insights about this")] = None,
    ) -> Annotated[CallToolResult, Insights]:
        """List pending insights for the person to review, with the entities each is about. Present them
        to the person and ask whether to approve or dismiss each; never decide for them."""
        with tool_errors():
            found = await service.surface_insights(runtime(ctx), limit, query)
        return result(Insights(insights=[Insight.model_validate(v, from_attributes=True) for v in found]))

    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_approve_insight(
        ctx: Context,
        insight_id: Annotated[str, Field(description="its id, e.g. ins-1a2b3c4d5e6f")],
        action: Annotated[
            Literal["approve", "dismiss"], Field(description="the person's decision")
        ] = "approve",
    ) -> Annotated[CallToolResult, Decision]:
        """Record the person's decision on an insight: approve or dismiss. Call it only after the person
        has said so explicitly in the conversation; dismissed insights are never proposed again."""
        with tool_errors():
            done = await service.decide_insight(runtime(ctx), insight_id, action)
        return result(Decision.model_validate(done, from_attributes=True))

    @mcp.tool(annotations=WRITES_IDEMPOTENT)
    async def engrama_write_insight_to_vault(
        ctx: Context,
        insight_id: Annotated[str, Field(description="an approved insight's id")],
        target_note: Annotated[
            str | None, Field(description="vault-relative note to write into (default: the entities' notes)")
        ] = None,
    ) -> Annotated[CallToolResult, Written]:
        """Write an approved insight as a marked section into the notes of the entities it is about (or into
        target_note); writing again changes nothing. Call it when the person wants the insight kept in their
        notes."""
        with tool_errors():
            done = await service.write_insight_to_vault(runtime(ctx), insight_id, target_note)
        return result(Written.model_validate(done, from_attributes=True))
