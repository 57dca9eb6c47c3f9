"""The MCP prompts: `brief`, `remember_conversation` and `review_insights`.

A prompt is a ready user message the person picks in their client (a slash command in Claude Desktop, Cursor
and Claude Code). Each reads the vault through the same services as the tools, so what a prompt says matches
what the tools then do.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from server.runtime import Runtime
from server.services.brief import deliver_brief
from server.services.brief_render import one_line, show_value
from server.services.guidance import extraction_guidance
from server.services.schema import TOOL_ONLY_LABELS
from server.store import brief_sql, insights_sql
from server.tools.brief import client_name
from server.tools.common import runtime

EXISTING_NAMED = 40  # entities named in remember_conversation, the most recently touched first
REVIEW_LIMIT = 20


def register_prompts(mcp: MCPServer) -> None:
    @mcp.prompt(title="Brief me from memory")
    async def brief(
        ctx: Context,
        cues: Annotated[str | None, Field(description="what you are about to do")] = None,
        project: Annotated[str | None, Field(description="a project (or any entity) to focus on")] = None,
    ) -> str:
        """Start the conversation knowing what changed in your vault, your active work and what waits
        for your decision."""
        done = await deliver_brief(runtime(ctx), client=client_name(ctx), cues=cues, project=project)
        return (
            "Here is what my long-term memory (my Obsidian vault, through engrama-vault) holds for this "
            "conversation. Use it as context; look things up with engrama_search or engrama_read_note before "
            "relying on details, and keep what we decide with engrama_remember.\n\n" + done.markdown
        )

    @mcp.prompt(title="Remember this conversation")
    async def remember_conversation(
        ctx: Context,
        focus: Annotated[str | None, Field(description="what matters most to keep, if anything")] = None,
    ) -> str:
        """Keep what is worth remembering from this conversation in your vault, reusing existing entities."""
        rt = runtime(ctx)
        return (
            "Go through our conversation so far and keep what is worth remembering long-term in my vault "
            "(engrama-vault). Before writing, tell me in a short list what you are about to keep.\n\n"
            + extraction_guidance(rt.profile, "conversation", None, focus, False)
            + "\n\n"
            + await _existing(rt)
        )

    @mcp.prompt(title="Review pending insights")
    async def review_insights(ctx: Context) -> str:
        """Go through the insights and questions waiting for your decision, one at a time."""
        return await _review(runtime(ctx))


async def _existing(rt: Runtime) -> str:
    labels = [name for name in rt.profile.labels if name not in TOOL_ONLY_LABELS and name != "Note"]
    known = await rt.store.read(brief_sql.live_of_labels, labels, EXISTING_NAMED)
    if not known:
        return "The vault holds no entities yet: every entity you keep will be new."
    names = "; ".join(f"{e.name} ({e.label})" for e in known)
    return (
        "Entities already in the vault, the most recently touched first (reuse these exact names and labels; "
        f"for anyone or anything else, search with engrama_search before creating it): {names}"
    )


async def _review(rt: Runtime) -> str:
    pending = (await rt.store.read(insights_sql.pending_insights))[:REVIEW_LIMIT]
    questions = await rt.store.read(brief_sql.open_clarifications, REVIEW_LIMIT)
    if not pending and not questions:
        return (
            "Check my vault (engrama-vault) for decisions waiting for me. Nothing is pending right now: say "
            "so, and offer to run engrama_reflect to look for new patterns across my notes."
        )
    about = await rt.store.read(brief_sql.entries, [i for row in pending for i in row.entities])
    lines = [
        "Walk me through the decisions my vault (engrama-vault) is waiting for, one at a time: show one item, "
        "ask me for a decision, act on my answer, then go to the next. Never decide for me.",
        "- Insight: approve or dismiss with engrama_approve_insight(insight_id, action); after an approval, "
        "offer to write it into my notes with engrama_write_insight_to_vault.",
        "- Question about a fact: call engrama_remember again for that entity with the key and "
        "resolve='replace' (the new value replaces the old, which is kept as history) or "
        "resolve='keep_both' (both values), or with the current value if I keep it as it is.",
        "",
    ]
    for row in pending:
        names = ", ".join(about[i].name for i in row.entities if i in about)
        lines.append(
            f"Insight {row.id} ({row.pattern}, confidence {row.confidence:.2f}): {row.title}. "
            f"{one_line(row.body, 400)} About: {names}."
        )
    for q in questions:
        lines.append(
            f"Question about {q.node.name} ({q.node.label}), {q.key}: now {show_value(q.current)}, was told "
            f"{show_value(q.proposed)}. {q.question}"
        )
    return "\n".join(lines)
