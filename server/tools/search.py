"""`engrama_search`: find remembered entities by meaning and by words."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from server.services import reflect_hooks
from server.services.errors import ServiceError
from server.services.schema import optional_label
from server.status import taking_in_hint, trouble_hint
from server.tools.common import READ_ONLY, omit_none, runtime, structured, tool_errors

# A question, keywords, or a pasted passage: a long query is searched by its most telling words
# (server/search/telling.py), so its length costs little. Past this it is a whole document, not a query.
MAX_QUERY_CHARS = 100_000


class SearchHit(BaseModel):
    id: str
    label: str
    name: str
    path: str | None = Field(description="vault-relative note path; null for an entity without a note")
    score: float
    snippet: str = Field(description="the best-matching passage")
    updated_at: str | None = None
    confidence: float | None = Field(None, description="1.0 = fresh; lower = not confirmed for a while")
    status: str = Field(
        "active", description="active; archived for a forgotten entity (only with include_archived)"
    )
    step: str | None = Field(None, description="explain: the step that placed it")
    signals: dict[str, float] | None = Field(None, description="explain: each signal's share of the score")


class PendingInsight(BaseModel):
    id: str
    title: str
    pattern: str
    confidence: float


class SearchResult(BaseModel):
    results: list[SearchHit]
    search_mode: str = Field(description="hybrid, or fulltext when no embedder is configured or reachable")
    degraded_reason: str | None = Field(
        None, description="why search fell back to full text (absent when not)"
    )
    pending_insights: list[PendingInsight] | None = Field(
        None, description="insights awaiting the person's decision about these results (absent when none)"
    )
    proactive_hint: str | None = None


def register(mcp: MCPServer) -> None:
    from server.search.service import search  # imported with the tool so a missing service fails loudly

    @mcp.tool(annotations=READ_ONLY)
    async def engrama_search(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                min_length=1,
                description="a question, keywords, or a pasted passage",
                json_schema_extra={"maxLength": MAX_QUERY_CHARS},  # checked below, with a clearer message
            ),
        ],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        label: Annotated[str | None, Field(description="only entities with this label, e.g. Project")] = None,
        include_archived: Annotated[bool, Field(description="also notes that were deleted")] = False,
        as_of: Annotated[str | None, Field(description="ISO date: what was known on that day")] = None,
        reference_time: Annotated[
            str | None,
            Field(description='ISO time of asking; "last week" counts from it'),
        ] = None,
        explain: Annotated[bool, Field(description="why each result ranks")] = False,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the person's long-term memory (their Obsidian vault) by meaning and keywords. Call it
        before answering anything about their projects, people, decisions or past work, and before
        engrama_remember to find the exact name of an entity that may already exist."""
        rt = runtime(ctx)
        with tool_errors():
            if not query.strip():
                raise ServiceError("query is blank; give a question or a few keywords")
            if len(query) > MAX_QUERY_CHARS:
                raise ServiceError(
                    f"query is {len(query):,} characters, over the {MAX_QUERY_CHARS:,} a search reads; "
                    "pass the passage that matters (its most telling words are searched), or a few keywords"
                )
            response = await search(
                rt,
                query,
                limit=limit,
                label=optional_label(rt.profile, label, for_writing=False),
                include_archived=include_archived,
                as_of=as_of,
                explain=explain,
                reference_time=reference_time,
            )
            hits = [SearchHit.model_validate(r, from_attributes=True) for r in response.results]
            pending = await reflect_hooks.pending_insights_for(rt, [h.id for h in hits])
            result = SearchResult(
                results=hits,
                search_mode=response.search_mode,
                degraded_reason=response.degraded_reason,
                pending_insights=[PendingInsight.model_validate(p, from_attributes=True) for p in pending]
                or None,
                proactive_hint=" ".join(
                    hint
                    for hint in (
                        trouble_hint(rt),
                        await taking_in_hint(rt),
                        await reflect_hooks.proactive_hint(rt),
                    )
                    if hint
                )
                or None,
            )
            found = omit_none(result.model_dump(mode="json"))
            for hit in found["results"]:  # explain's keys only when asked for: each hit would carry two nulls
                for key in ("step", "signals"):
                    if hit.get(key) is None:
                        hit.pop(key, None)
            return structured(found)
