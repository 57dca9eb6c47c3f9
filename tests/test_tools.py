"""The engrama_* tools through an in-process MCP client: schemas, annotations, results, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server.app import create_server
from server.settings import Settings

TOOLS = {
    "engrama_status": "read",
    "engrama_search": "read",
    "engrama_context": "read",
    "engrama_ingest": "read",
    "engrama_surface_insights": "read",
    "engrama_brief": "read",
    "engrama_read_note": "read",
    "engrama_remember": "write",
    "engrama_relate": "write",
    "engrama_sync_note": "write",
    "engrama_sync_vault": "write",
    "engrama_reflect": "write",
    "engrama_approve_insight": "write",
    "engrama_write_insight_to_vault": "write",
    "engrama_forget": "destructive",
}
NOTES = {
    "Projects/Engrama.md": "---\ntype: Project\nrelations:\n  USES: ['[[SQLite]]']\n---\n"
    "Engrama keeps memory in a vault. It is built on [[watchdog]].\n",
    "Technologies/SQLite.md": "---\ntype: Technology\n---\nSQLite is an embedded database with FTS5.\n",
}


@pytest.fixture
def settings(vault: Path, db_path: Path) -> Settings:
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    return Settings(vault=vault, db_path=db_path, watch=False)


@asynccontextmanager
async def connected(settings: Settings) -> AsyncIterator[Client]:
    """An in-process client of a server on `settings`, with the vault synced once."""
    async with Client(create_server(settings)) as c:
        synced = await c.call_tool("engrama_sync_vault", {})
        assert not synced.is_error, synced.content
        yield c


async def call_ok(client: Client, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(name, args or {})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, result.structured_content
    [content] = result.content
    text = content.text  # type: ignore[union-attr]
    assert "Error executing tool" not in text or ":" in text.split("Error executing tool", 1)[1]
    return text


async def test_every_tool_has_a_schema_docstring_and_annotations(settings: Settings) -> None:
    async with connected(settings) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == set(TOOLS)
        for name, kind in TOOLS.items():
            tool = tools[name]
            assert tool.description and len(tool.description) > 80, name
            # The brief is Markdown for the model to read, not structured data (issue 14).
            assert (tool.output_schema is not None) is (name != "engrama_brief"), name
            assert tool.annotations is not None and tool.annotations.open_world_hint is False
            assert tool.annotations.read_only_hint is (kind == "read"), name
            if kind != "read":
                assert tool.annotations.destructive_hint is (kind == "destructive"), name
        remember = tools["engrama_remember"].input_schema
        assert remember["required"] == ["label", "name"]
        assert set(remember["properties"]) == {
            "label",
            "name",
            "properties",
            "observation",
            "relations",
            "resolve",
            "reason",
        }
        assert tools["engrama_context"].input_schema["properties"]["hops"]["maximum"] == 3
        assert tools["engrama_search"].input_schema["properties"]["query"]["maxLength"] == 100_000


async def test_status_omits_what_is_switched_off(settings: Settings) -> None:
    async with connected(settings) as client:
        status = await call_ok(client, "engrama_status")
        assert "embedder" not in status
        assert status["vault"]["path"] == str(settings.vault) and status["vault"]["note_count"] == 2
        assert status["search"]["mode"] == "fulltext" and status["profile"]["name"] == "base"
        assert status["backend"]["node_count"] >= 3


async def test_search_finds_notes_and_refuses_an_overlong_query(settings: Settings) -> None:
    async with connected(settings) as client:
        found = await call_ok(client, "engrama_search", {"query": "embedded database"})
        assert found["results"][0]["name"] == "SQLite" and found["search_mode"] == "fulltext"
        assert "pending_insights" not in found and "proactive_hint" not in found
        assert (await call_ok(client, "engrama_search", {"query": "embedded database " * 600}))["results"]
        message = await call_error(client, "engrama_search", {"query": "memory " * 15_000})
        assert "105,000 characters" in message and "100,000" in message
        assert "unknown label" in await call_error(client, "engrama_search", {"query": "x", "label": "Nope"})
        assert "ISO date" in await call_error(client, "engrama_search", {"query": "x", "as_of": "last week"})
        assert (await call_ok(client, "engrama_search", {"query": "vault"}))["results"]  # still serving


async def test_remember_writes_a_note_and_explains_bad_calls(settings: Settings) -> None:
    async with connected(settings) as client:
        done = await call_ok(
            client,
            "engrama_remember",
            {
                "label": "Project",
                "name": "Harbor",
                "properties": {"status": "active"},
                "observation": "Moved the nightly import to SQLite.",
                "relations": [{"type": "uses", "target": "SQLite"}],
            },
        )
        assert done["created"] and done["path"] == "Projects/Harbor.md" and done["relations_created"] == 1
        assert done["embedded"] is False
        text = (settings.vault / "Projects/Harbor.md").read_text(encoding="utf-8")  # type: ignore[operator]
        assert f"engrama_id: {done['id']}" in text and '"[[Technologies/SQLite]]"' in text
        message = await call_error(client, "engrama_remember", {"label": "Projekt", "name": "X"})
        assert "did you mean Project" in message and "Technology" in message
        message = await call_error(
            client, "engrama_remember", {"label": "Project", "name": "X", "relations": "SQLite"}
        )
        assert "relations" in message
        message = await call_error(
            client,
            "engrama_remember",
            {"label": "Project", "name": "X", "relations": [{"type": "EATS", "target": "Y"}]},
        )
        assert "unknown relation type 'EATS'" in message and "USES" in message
        assert "name" in await call_error(client, "engrama_remember", {"label": "Project"})
        assert (await call_ok(client, "engrama_context", {"name": "Harbor"}))["node"]["id"] == done["id"]


async def test_relate_mirrors_the_edge_and_refuses_unknown_types(settings: Settings) -> None:
    async with connected(settings) as client:
        done = await call_ok(
            client, "engrama_relate", {"source": "Engrama", "rel_type": "USES", "target": "watchdog"}
        )
        assert (
            done["created"]
            and done["edge"]["rel_type"] == "USES"
            and done["note_path"] == "Projects/Engrama.md"
        )
        note = (settings.vault / "Projects/Engrama.md").read_text(encoding="utf-8")  # type: ignore[operator]
        assert "'[[SQLite]]'" in note and "[[watchdog]]" in note
        assert not (
            await call_ok(
                client, "engrama_relate", {"source": "Engrama", "rel_type": "uses", "target": "watchdog"}
            )
        )["created"]
        message = await call_error(
            client, "engrama_relate", {"source": "Engrama", "rel_type": "ADORES", "target": "X"}
        )
        assert "use one of" in message
        message = await call_error(
            client, "engrama_relate", {"source": "SQLite", "rel_type": "USES", "target": "Engrama"}
        )
        assert "cannot go from a Technology" in message


async def test_context_shows_neighbours_and_points_to_search(settings: Settings) -> None:
    async with connected(settings) as client:
        around = await call_ok(client, "engrama_context", {"name": "Engrama", "hops": 2})
        assert around["node"]["label"] == "Project"
        assert {(n["name"], n["rel_type"], n["direction"]) for n in around["neighbours"]} == {
            ("SQLite", "USES", "out"),
            ("watchdog", "LINKS_TO", "out"),
        }
        assert "engrama_search" in await call_error(client, "engrama_context", {"name": "Atlantis"})
        assert "less than or equal to 3" in await call_error(
            client, "engrama_context", {"name": "Engrama", "hops": 7}
        )


async def test_sync_tools_report_and_refuse_paths_outside_the_vault(settings: Settings) -> None:
    async with connected(settings) as client:
        (settings.vault / "Inbox.md").write_text("A new thought.\n", encoding="utf-8")  # type: ignore[operator]
        done = await call_ok(client, "engrama_sync_note", {"path": "Inbox.md"})
        assert done["action"] == "created" and done["inject_id"] is True
        for bad in ("../outside.md", "/etc/passwd", "~/notes.md"):
            assert "vault" in await call_error(client, "engrama_sync_note", {"path": bad})
        outside = settings.vault.parent / "outside"  # type: ignore[union-attr]
        outside.mkdir()
        (settings.vault / "Escape").symlink_to(outside)  # type: ignore[operator]
        assert "symlink" in await call_error(client, "engrama_sync_note", {"path": "Escape/x.md"})
        assert "symlink" in await call_error(client, "engrama_sync_vault", {"folder": "Escape"})
        ticks: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            ticks.append((done, total, message))

        result = await client.call_tool("engrama_sync_vault", {"dry_run": True}, progress_callback=progress)
        assert result.structured_content is not None and result.structured_content["scanned"] == 3
        assert ticks and ticks[-1][:2] == (3, 3)


async def test_ingest_returns_guidance_and_existing_entities(settings: Settings) -> None:
    async with connected(settings) as client:
        done = await call_ok(client, "engrama_ingest", {"source": "Projects/Engrama.md"})
        assert "watchdog" in done["content"] and "engrama_remember" in done["guidance"]
        assert "SQLite" in {e["name"] for e in done["existing"]}
        text = await call_ok(
            client,
            "engrama_ingest",
            {"source": "We picked SQLite for Harbor.", "source_type": "conversation"},
        )
        assert text["existing"][0]["name"] == "SQLite" and text["existing"][0]["score"] == 1.0
        assert "vault" in await call_error(client, "engrama_ingest", {"source": "../../etc/passwd"})
        assert "source_type" in await call_error(
            client, "engrama_ingest", {"source": "x", "source_type": "email"}
        )


async def test_insight_tools_need_known_ids_and_approval(settings: Settings) -> None:
    async with connected(settings) as client:
        reflected = await call_ok(client, "engrama_reflect", {})
        assert set(reflected) == {"created", "insights", "skipped_patterns"}
        assert "engrama_surface_insights" in await call_error(
            client, "engrama_approve_insight", {"insight_id": "ins-000000000000"}
        )
        assert "approve" in await call_error(
            client, "engrama_approve_insight", {"insight_id": "x", "action": "maybe"}
        )
        assert "no insight" in await call_error(
            client, "engrama_write_insight_to_vault", {"insight_id": "ins-nope"}
        )
        assert "insights" in await call_ok(client, "engrama_surface_insights", {"limit": 3})
        assert "unknown" in (await call_error(client, "engrama_reflect", {"patterns": ["astrology"]})).lower()


async def test_an_approved_insight_is_written_into_the_notes(settings: Settings) -> None:
    async with connected(settings) as client:
        await call_ok(
            client,
            "engrama_relate",
            {"source": "Harbor", "rel_type": "USES", "target": "SQLite", "source_label": "Project"},
        )
        reflected = await call_ok(client, "engrama_reflect", {"patterns": ["shared_technology"]})
        [insight] = reflected["insights"]
        assert "SQLite" in insight["title"]
        surfaced = (await call_ok(client, "engrama_surface_insights", {"query": "SQLite"}))["insights"]
        assert surfaced[0]["id"] == insight["id"] and {e["name"] for e in surfaced[0]["entities"]} >= {
            "Engrama",
            "Harbor",
        }
        found = await call_ok(client, "engrama_search", {"query": "SQLite database"})
        assert insight["id"] in {p["id"] for p in found["pending_insights"]}  # offered, never decided
        assert "approve" in await call_error(
            client, "engrama_write_insight_to_vault", {"insight_id": insight["id"]}
        )
        decided = await call_ok(
            client, "engrama_approve_insight", {"insight_id": insight["id"], "action": "approve"}
        )
        assert (decided["id"], decided["status"]) == (insight["id"], "approved")
        assert decided["message"].startswith("approved; recorded in the vault in Insights/")
        written = (await call_ok(client, "engrama_write_insight_to_vault", {"insight_id": insight["id"]}))[
            "written"
        ]
        assert "Projects/Engrama.md" in written
        note = (settings.vault / "Projects/Engrama.md").read_text(encoding="utf-8")  # type: ignore[operator]
        assert "<!-- engrama:insight" in note
        again = await call_ok(client, "engrama_write_insight_to_vault", {"insight_id": insight["id"]})
        assert again["written"] == written


async def test_a_second_server_on_the_same_vault_writes_the_graph_only(settings: Settings) -> None:
    watching = Settings(vault=settings.vault, db_path=settings.db_path, watch=True)
    async with Client(create_server(watching)) as holder, Client(create_server(watching)) as follower:
        assert (await call_ok(holder, "engrama_status"))["vault"]["watching"] is True
        done = await call_ok(
            follower, "engrama_remember", {"label": "Person", "name": "Maya", "observation": "Hi."}
        )
        assert done["path"] is None and "lease" in done["message"]
        assert not (settings.vault / "People").exists()  # type: ignore[operator]
        mine = await call_ok(holder, "engrama_remember", {"label": "Person", "name": "Tomas"})
        assert mine["path"] == "People/Tomas.md"


async def test_with_an_embedder_status_reports_it_and_search_is_hybrid(settings: Settings) -> None:
    hybrid = Settings(vault=settings.vault, db_path=settings.db_path, watch=False, embedding_provider="fake")
    async with connected(hybrid) as client:
        status = await call_ok(client, "engrama_status")
        assert status["embedder"]["provider"] == "fake" and status["search"]["mode"] == "hybrid"
        done = await call_ok(client, "engrama_remember", {"label": "Concept", "name": "Local-first"})
        assert done["embedded"] is True
        found = await call_ok(client, "engrama_search", {"query": "embedded database"})
        assert found["search_mode"] == "hybrid" and found["results"][0]["name"] == "SQLite"


async def test_after_ten_remembers_results_suggest_reflecting(settings: Settings) -> None:
    async with connected(settings) as client:
        for n in range(9):
            done = await call_ok(client, "engrama_remember", {"label": "Concept", "name": f"Idea {n}"})
            assert done["proactive_hint"] is None
        done = await call_ok(client, "engrama_remember", {"label": "Concept", "name": "Idea 9"})
        assert "engrama_reflect" in done["proactive_hint"]
        assert (
            "engrama_reflect"
            in (await call_ok(client, "engrama_search", {"query": "idea"}))["proactive_hint"]
        )


async def test_a_search_while_the_server_first_takes_in_the_vault_says_its_results_may_miss_notes(
    vault: Path, db_path: Path
) -> None:
    """Left open in session 19: a search during the first catch-up of a large vault answered from the part
    read so far without a word, so the assistant took "nothing found" for an answer."""
    for i in range(1500):
        folder = vault / f"F{i % 30}"
        folder.mkdir(exist_ok=True)
        (folder / f"Note {i}.md").write_text(f"# Note {i}\nA line about topic {i % 97}.\n", encoding="utf-8")
    async with Client(create_server(Settings(vault=vault, db_path=db_path))) as c:
        during = await call_ok(c, "engrama_search", {"query": "topic"})
        assert "engrama is still taking in the vault" in during["proactive_hint"], during.get(
            "proactive_hint"
        )
        for _ in range(1200):
            if (await call_ok(c, "engrama_status"))["vault"]["pending"] == 0:
                break
            await asyncio.sleep(0.1)
        after = await call_ok(c, "engrama_search", {"query": "topic"})
    assert "taking in" not in after.get("proactive_hint", "") and after["results"]


async def test_a_write_refused_for_a_merge_conflict_says_to_make_the_call_again(settings: Settings) -> None:
    """Review 23f: the refusal said "engrama writes into it again once the conflict is resolved", but a tool
    call is not kept for later: the person resolved the conflict and the fact never arrived."""
    note = settings.vault / "Projects/Clash.md"  # type: ignore[operator]
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("---\ntype: Project\n---\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other\n", "utf-8")
    async with connected(settings) as client:
        text = await call_error(
            client, "engrama_remember", {"label": "Project", "name": "Clash", "observation": "Decided."}
        )
    assert "merge conflict" in text and "make this call again" in text and "writes into it again" not in text
