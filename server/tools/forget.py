"""`engrama_forget`: archive an entity (reversible) or purge it from the graph."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from server.services.forget import forget
from server.tools.common import result, runtime, tool_errors

# The one tool that may remove something: purge deletes graph rows (and, asked explicitly, moves a note to
# the trash). Forgetting what is already forgotten changes nothing more, so it is idempotent.
DESTRUCTIVE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


class Forgotten(BaseModel):
    id: str
    label: str
    name: str
    mode: Literal["archive", "purge"]
    status: Literal["archived", "purged"]
    path: str | None = Field(description="the entity's note, vault-relative; null when it has none")
    trash_path: str | None = Field(description="where purge moved the note (under .trash/); null otherwise")
    changed: bool = Field(description="false when it was already archived and nothing changed")
    message: str


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=DESTRUCTIVE_IDEMPOTENT)
    async def engrama_forget(
        ctx: Context,
        name: Annotated[str, Field(description="the entity's exact name (aliases work too)")],
        label: Annotated[
            str | None, Field(description="its label, to choose between same-named entities")
        ] = None,
        mode: Annotated[
            Literal["archive", "purge"],
            Field(
                description="archive: mark its note `status: archived` and hide it from search (reversible); "
                "purge: delete it and its relations from the graph"
            ),
        ] = "archive",
        delete_note: Annotated[
            bool,
            Field(description="purge only: also move its note to the vault's .trash (only when asked to)"),
        ] = False,
    ) -> Annotated[CallToolResult, Forgotten]:
        """Forget an entity when the person asks you to, or says it is no longer true or relevant. The
        default, archive, is reversible: only the `status:` line of its note changes to `archived` and
        search hides it (set it back in the note to restore it). Use mode=purge only when the person
        wants it gone from memory, and delete_note=true only when they also want the note deleted."""
        with tool_errors():
            done = await forget(runtime(ctx), name, label, mode, delete_note)
        return result(Forgotten.model_validate(done, from_attributes=True))
