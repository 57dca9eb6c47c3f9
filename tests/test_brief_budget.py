"""The brief never exceeds its budget on a 10,000-note vault (bench/vaultgen.py's layout, short bodies)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import Implementation, TextContent

from bench.brief_bench import edit_statuses, give_ids, write_vault
from server.runtime import open_runtime
from server.services.brief import record_brief, render_brief
from server.services.brief_render import estimate_tokens
from server.settings import Settings

NOTES = 10_000
COMMAND = Path(sys.executable).parent / "engrama-vault"
BUDGETS = (200, 500, 1500, 6000)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A synced 10,000-note vault with 300 notes' status changed since a first brief of client "old".

    The notes get their ids when written and are synced without writing into them (as a follower does):
    ten thousand fsynced id writes would be most of the set-up time, and the brief reads only the graph."""
    root = tmp_path_factory.mktemp("big")
    vault, db = root / "vault", root / "graph.db"
    paths = write_vault(vault, NOTES, "short")
    give_ids(paths)

    async def build() -> None:
        async with open_runtime(Settings(vault=vault, db_path=db), writable=False) as rt:
            await rt.require_sync().sync_vault()
            await record_brief(rt, await render_brief(rt, client="old"))
            edited = edit_statuses(paths, 300)
            await rt.require_sync().sync_paths([str(Path(p).relative_to(vault)) for p in edited])

    asyncio.run(build())
    yield vault, db


@pytest.mark.parametrize("budget", BUDGETS)
async def test_the_brief_fits_its_budget_on_a_large_vault(big: tuple[Path, Path], budget: int) -> None:
    vault, db = big
    async with open_runtime(Settings(vault=vault, db_path=db), writable=False) as rt:
        project = next((vault / "Projects").glob("*.md")).stem
        for kwargs in ({}, {"cues": "Ka lo mi ne ru sa"}, {"project": project}, {"client": "old"}):
            brief = await render_brief(rt, **{"client": None, **kwargs}, budget_tokens=budget)
            assert brief.tokens == estimate_tokens(brief.markdown) <= budget, kwargs
            assert brief.markdown.startswith("# Memory brief") and brief.sections, kwargs
    # Every kind of news keeps a line when the budget allows: the 300 fact changes do not crowd out the rest.
    if budget >= 1500:
        assert {"changes", "work", "decisions", "people"} <= {s.key for s in brief.sections}
        changes = brief.sections[0]
        assert changes.key == "changes" and changes.total >= 300 and '-> "' in changes.items[0].text


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_the_tool_keeps_a_small_budget_over_stdio(big: tuple[Path, Path], tmp_path: Path) -> None:
    vault, db = big
    params = StdioServerParameters(
        command=str(COMMAND),
        args=["serve", "--vault", str(vault), "--db", str(db), "--no-watch"],
        env={"EMBEDDING_PROVIDER": "none", "ENGRAMA_SETTLE_SECONDS": "0", "PATH": "/usr/bin:/bin"},
    )
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=Implementation(name="old", version="1")) as session,
        ):
            await session.initialize()
            result = await session.call_tool("engrama_brief", {"budget_tokens": 300, "cues": "Kalo"})
    assert not result.is_error and isinstance(result.content[0], TextContent)
    text = result.content[0].text
    assert text.startswith("# Memory brief for old: 10,000 notes, changes since")
    assert estimate_tokens(text) <= 300
