"""`engrama_brief`: what the assistant should know at the start of a conversation, as compact Markdown."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from server.services.brief import DEFAULT_BUDGET, deliver_brief
from server.tools.common import READ_ONLY, runtime, tool_errors

MIN_BUDGET, MAX_BUDGET = 200, 20_000


def client_name(ctx: Context) -> str | None:
    """The connected client's `clientInfo.name` from `initialize` (e.g. "claude-ai", "cursor-vscode"): each
    client gets its own "since". None when the client did not say."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else None
    return name.strip() or None if name else None


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=READ_ONLY)
    async def engrama_brief(
        ctx: Context,
        cues: Annotated[
            str | None, Field(max_length=2000, description="what the person is about to do, in a few words")
        ] = None,
        project: Annotated[
            str | None, Field(max_length=300, description="an entity name to focus on")
        ] = None,
        budget_tokens: Annotated[int, Field(ge=MIN_BUDGET, le=MAX_BUDGET)] = DEFAULT_BUDGET,
    ) -> CallToolResult:
        """Brief yourself at the start of a conversation: what changed in the person's vault since this
        client's last brief (facts old -> new, new and edited notes), active projects with open problems,
        decisions and insights waiting for the person, and notes related to `cues`. Markdown with [[links]]."""
        with tool_errors():
            brief = await deliver_brief(
                runtime(ctx), client=client_name(ctx), cues=cues, project=project, budget_tokens=budget_tokens
            )
        return CallToolResult(content=[TextContent(type="text", text=brief.markdown)])
