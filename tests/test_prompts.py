"""The MCP prompts (brief, remember_conversation, review_insights), listed and got through a real stdio client."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import Implementation, TextContent

from tests.test_brief_stdio import until

COMMAND = Path(sys.executable).parent / "engrama-vault"
EXAMPLE_VAULT = Path(__file__).resolve().parents[1] / "examples" / "vault"
pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


async def prompt_text(session: ClientSession, name: str, args: dict[str, str] | None = None) -> str:
    result = await session.get_prompt(name, args or {})
    assert len(result.messages) == 1 and result.messages[0].role == "user"
    content = result.messages[0].content
    assert isinstance(content, TextContent)
    return content.text


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, args)
    assert not result.is_error, result.content
    return result.structured_content or {}


async def test_the_prompts_are_listed_and_read_over_stdio(tmp_path: Path, db_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault)
    env = {**os.environ, "EMBEDDING_PROVIDER": "none", "ENGRAMA_SETTLE_SECONDS": "0"}
    params = StdioServerParameters(
        command=str(COMMAND), args=["serve", "--vault", str(vault), "--db", str(db_path)], env=env
    )
    with open(tmp_path / "server.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=Implementation(name="claude-ai", version="1")) as session,
        ):
            await session.initialize()
            await until(session, lambda s: s["vault"].get("note_count") == 18 and s["vault"]["pending"] == 0)
            listed = {p.name: p for p in (await session.list_prompts()).prompts}
            assert set(listed) == {"brief", "remember_conversation", "review_insights"}
            assert {a.name for a in listed["brief"].arguments or []} == {"cues", "project"}
            assert all(not a.required for p in listed.values() for a in p.arguments or [])

            brief = await prompt_text(session, "brief", {"cues": "nightly import"})
            assert "# Memory brief for claude-ai: 18 notes (first brief" in brief
            assert '## Related to "nightly import"\n- [[Slow nightly import]] (Problem)' in brief
            assert "Nothing changed" in await prompt_text(session, "brief")  # the prompt moved the mark

            remember = await prompt_text(session, "remember_conversation", {"focus": "the lease decision"})
            assert "The content is a conversation." in remember and "the lease decision" in remember
            assert "engrama_remember" in remember and "Maya Lindqvist (Person)" in remember

            assert "Nothing is pending" in await prompt_text(session, "review_insights")
            reflected = await call(session, "engrama_reflect", {})
            assert reflected["insights"]
            await call(
                session,
                "engrama_remember",
                {"label": "Person", "name": "Maya Lindqvist", "properties": {"city": "Oslo"}},
            )
            asked = await call(
                session,
                "engrama_remember",
                {"label": "Person", "name": "Maya Lindqvist", "properties": {"city": "Bergen"}},
            )
            assert asked["clarifications"]
            review = await prompt_text(session, "review_insights")
            assert "one at a time" in review and "engrama_approve_insight" in review
            assert 'Question about Maya Lindqvist (Person), city: now "Oslo", was told "Bergen".' in review
            for insight in reflected["insights"]:
                assert f"Insight {insight['id']} " in review
            assert '[[Maya Lindqvist]] city: "Oslo" or "Bergen"?' in await prompt_text(session, "brief")
