"""The brief end to end: the installed `engrama-vault serve` over real stdio, and `engrama-vault brief`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import Implementation, TextContent

COMMAND = Path(sys.executable).parent / "engrama-vault"
pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
ENV = {**os.environ, "EMBEDDING_PROVIDER": "none", "ENGRAMA_SETTLE_SECONDS": "0"}
MAYA = "---\ntype: Person\nemployer: Acme\n---\nMaya maintains the sync engine of [[Engrama]].\n"
ENGRAMA = "---\ntype: Project\nstatus: active\n---\nMemory for assistants, worked on by [[Maya]].\n"


@pytest.fixture
def seeded(vault: Path) -> Path:
    (vault / "People").mkdir()
    (vault / "People/Maya.md").write_text(MAYA, encoding="utf-8")
    (vault / "Projects").mkdir()
    (vault / "Projects/Engrama.md").write_text(ENGRAMA, encoding="utf-8")
    return vault


@asynccontextmanager
async def client(vault: Path, db: Path, name: str, log: Path) -> AsyncIterator[ClientSession]:
    """A session of the installed server, as the MCP client `name` (its clientInfo.name), once it is in step."""
    params = StdioServerParameters(
        command=str(COMMAND), args=["serve", "--vault", str(vault), "--db", str(db)], env=ENV
    )
    with open(log, "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=Implementation(name=name, version="1.0")) as session,
        ):
            await session.initialize()
            await until(session, lambda s: s["vault"].get("pending") == 0 and s["vault"].get("note_count"))
            yield session


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    result = await session.call_tool(name, args)
    assert not result.is_error, result.content
    return result


async def brief(session: ClientSession, **args: Any) -> str:
    result = await call(session, "engrama_brief", args)
    assert result.structured_content is None and isinstance(result.content[0], TextContent)
    return result.content[0].text


async def until(session: ClientSession, check: Any, tool: str = "engrama_status", args: Any = None) -> Any:
    """Poll `tool` until `check(its structured result)` holds; fail after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        result = (await call(session, tool, args or {})).structured_content
        if check(result):
            return result
        assert time.monotonic() < deadline, result
        await asyncio.sleep(0.05)


def employer(value: str) -> Any:
    return lambda ctx: ctx["node"]["properties"].get("employer") == value


async def test_a_fact_edited_in_obsidian_shows_old_and_new_in_the_next_brief_only(
    seeded: Path, db_path: Path, tmp_path: Path
) -> None:
    async with client(seeded, db_path, "claude-ai", tmp_path / "server.log") as session:
        first = await brief(session)
        assert first.startswith("# Memory brief for claude-ai: 2 notes (first brief")
        assert "- [[Engrama]] (active)" in first and "[[Maya]] ([[Engrama]])" in first

        note = seeded / "People/Maya.md"
        note.write_text(note.read_text(encoding="utf-8").replace("Acme", "Globex"), encoding="utf-8")
        await until(session, employer("Globex"), "engrama_context", {"name": "Maya"})

        second = await brief(session)
        assert second.startswith("# Memory brief for claude-ai: 2 notes, changes since ")
        assert '- [[Maya]] employer: "Acme" -> "Globex"' in second
        third = await brief(session)
        assert "Acme" not in third and "Nothing changed in the vault since the previous brief." in third


async def test_two_clients_keep_their_own_since(seeded: Path, db_path: Path, tmp_path: Path) -> None:
    log = tmp_path / "servers.log"
    async with (
        client(seeded, db_path, "claude-ai", log) as desktop,
        client(seeded, db_path, "cursor", log) as cursor,
    ):
        await brief(desktop)
        await brief(cursor)
        note = seeded / "People/Maya.md"
        note.write_text(note.read_text(encoding="utf-8").replace("Acme", "Globex"), encoding="utf-8")
        await until(desktop, employer("Globex"), "engrama_context", {"name": "Maya"})

        assert '"Acme" -> "Globex"' in await brief(desktop)
        assert '"Acme" -> "Globex"' not in await brief(desktop)
        assert '"Acme" -> "Globex"' in await brief(
            cursor
        )  # its own since: the desktop's briefs did not move it
        assert '"Acme" -> "Globex"' not in await brief(cursor)


async def test_an_empty_vault_gives_a_brief_that_says_what_to_do(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=str(COMMAND), args=["serve", "--vault", str(vault), "--db", str(db_path)], env=ENV
    )
    with open(tmp_path / "server.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            text = await brief(session, cues="what was I doing")
    assert text.startswith("# Memory brief: the memory is empty\nNothing is remembered yet.")
    assert "engrama_remember" in text and "engrama_sync_vault" in text


def run_brief(vault: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COMMAND), "brief", "--vault", str(vault), "--db", str(db), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=ENV,
        timeout=120,
        check=True,
    )


def test_the_brief_command_prints_markdown_or_json_and_moves_its_clients_mark(
    seeded: Path, db_path: Path
) -> None:
    subprocess.run([str(COMMAND), "sync", "--vault", str(seeded), "--db", str(db_path)], env=ENV, check=True)
    printed = run_brief(seeded, db_path, "--client", "claude-code", "--cues", "sync engine").stdout
    assert printed.startswith("# Memory brief for claude-code: 2 notes (first brief")
    assert '## Related to "sync engine"\n- [[Maya]] (Person): Maya maintains the sync engine' in printed

    note = seeded / "Projects/Engrama.md"
    note.write_text(note.read_text(encoding="utf-8").replace("active", "paused"), encoding="utf-8")
    data = json.loads(
        run_brief(seeded, db_path, "--client", "claude-code", "--json", "--budget", "300").stdout
    )
    assert (
        data["client"] == "claude-code" and data["since"] and data["tokens"] <= data["budget_tokens"] == 300
    )
    changes = next(s for s in data["sections"] if s["key"] == "changes")
    assert changes["items"][0] == {
        "text": '[[Engrama]] status: "active" -> "paused"',
        "name": "Engrama",
        "path": "Projects/Engrama.md",
    }
    assert data["markdown"].startswith("# Memory brief for claude-code")
    again = run_brief(seeded, db_path, "--client", "claude-code").stdout
    assert "Nothing changed in the vault since the previous brief." in again
    assert "Nothing changed" not in run_brief(seeded, db_path, "--client", "other").stdout


def test_the_brief_command_says_which_new_notes_it_could_not_take_in(seeded: Path, db_path: Path) -> None:
    """Review 18a: the brief command never writes into a note, so a note written while no server ran (no
    `engrama_id` yet) cannot join the graph from it; it was silently missing from the brief. The brief now
    says so, naming it, and its JSON lists it; once synced, the note is in and the line is gone."""
    subprocess.run([str(COMMAND), "sync", "--vault", str(seeded), "--db", str(db_path)], env=ENV, check=True)
    (seeded / "Projects/Lighthouse.md").write_text("---\ntype: Project\nstatus: active\n---\nNew.\n", "utf-8")
    printed = run_brief(seeded, db_path, "--client", "hook").stdout
    assert (
        "Not in this brief: 1 new note(s) written while no engrama server ran (`Projects/Lighthouse.md`)"
        in (printed)
    )
    data = json.loads(run_brief(seeded, db_path, "--client", "hook", "--json").stdout)
    assert data["not_indexed"] == ["Projects/Lighthouse.md"]
    assert "engrama_id" not in (seeded / "Projects/Lighthouse.md").read_text(encoding="utf-8")
    subprocess.run([str(COMMAND), "sync", "--vault", str(seeded), "--db", str(db_path)], env=ENV, check=True)
    printed = run_brief(seeded, db_path, "--client", "hook").stdout
    assert "Not in this brief" not in printed and "[[Lighthouse]]" in printed


def test_the_brief_command_refuses_a_budget_out_of_range(seeded: Path, db_path: Path) -> None:
    done = subprocess.run(
        [str(COMMAND), "brief", "--vault", str(seeded), "--db", str(db_path), "--budget", "5"],
        capture_output=True,
        text=True,
        env=ENV,
    )
    assert done.returncode == 2 and "--budget must be between 200 and 20000" in done.stderr
