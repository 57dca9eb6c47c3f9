"""`engrama_ingest`: a source to extract entities from, with guidance and the entities already known."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.services.ingest import ingest
from server.tools.common import READ_ONLY, result, runtime, tool_errors


class Known(BaseModel):
    id: str
    label: str
    name: str
    path: str | None
    score: float = Field(description="1.0 for an exact name match; lower for text similarity")


class IngestResult(BaseModel):
    content: str = Field(description="the text to extract from")
    guidance: str = Field(description="what to extract and how to store it with this vault's schema")
    existing: list[Known] = Field(description="entities already remembered that the content likely mentions")
    truncated: bool


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=READ_ONLY)
    async def engrama_ingest(
        ctx: Context,
        source: Annotated[str, Field(description="a vault-relative note path, or the text itself")],
        source_type: Annotated[
            Literal["note", "text", "conversation"],
            Field(description="note: source is a vault path; text or conversation: source is the text"),
        ] = "note",
        context_hint: Annotated[str | None, Field(description="what the source is about, if known")] = None,
    ) -> Annotated[CallToolResult, IngestResult]:
        """Prepare a note, a text or a conversation for memorising: its content, what entities and relations
        to extract with this vault's schema, and the matching entities that already exist. Then call
        engrama_remember and engrama_relate for what you extracted. Writes nothing."""
        with tool_errors():
            done = await ingest(runtime(ctx), source, source_type, context_hint)
        return result(IngestResult.model_validate(done, from_attributes=True))
