"""`engrama_read_note`: one whole note (or a page of a long one), with its identity and links."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.services.reading import DEFAULT_PAGE_CHARS, MAX_PAGE_CHARS, read_note
from server.tools.common import READ_ONLY, result, runtime, tool_errors


class LinkOut(BaseModel):
    name: str
    label: str
    rel_type: str = Field(description="LINKS_TO for a [[wikilink]] in the text; else the relation type")
    path: str | None = Field(description="the linked note; null when it has no note yet")


class NoteRead(BaseModel):
    path: str
    id: str | None = Field(description="the note's engrama_id; null until the note is synced")
    label: str | None
    name: str | None
    text: str = Field(description="the note's text from offset (frontmatter included)")
    offset: int
    total_chars: int = Field(description="length of the whole text in characters")
    next_offset: int | None = Field(description="pass as offset for the next page; null at the end")
    links: list[LinkOut] = Field(description="what the note links to or relates to")
    links_total: int
    backlinks: int = Field(description="how many entities link to this note")
    replaced_bytes: bool = Field(description="true when the file is not UTF-8; bad bytes shown as U+FFFD")


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=READ_ONLY)
    async def engrama_read_note(
        ctx: Context,
        path: Annotated[
            str | None, Field(description="vault-relative note path, e.g. Projects/Engrama.md")
        ] = None,
        name: Annotated[
            str | None, Field(description="or the entity's name; aliases work, case does not matter")
        ] = None,
        offset: Annotated[int, Field(ge=0, description="start at this character (next_offset)")] = 0,
        max_chars: Annotated[int, Field(ge=1, le=MAX_PAGE_CHARS)] = DEFAULT_PAGE_CHARS,
    ) -> Annotated[CallToolResult, NoteRead]:
        """Read one note whole, as the person wrote it, by path or entity name, with its id, label and links.
        Call it when a search snippet or engrama_context is not enough. A long note comes in pages: when
        next_offset is not null, call again with offset=next_offset."""
        with tool_errors():
            page = await read_note(runtime(ctx), path=path, name=name, offset=offset, max_chars=max_chars)
        return result(NoteRead.model_validate(page, from_attributes=True))
