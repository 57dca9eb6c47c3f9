"""Temporal memory (issue #8): history instead of overwrite, clarifications, supersession and revival,
and `as_of` time travel in engrama_context. Real vaults, real SQLite, the real server over stdio."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from server.app import create_server
from server.runtime import Runtime, open_runtime
from server.services.context import context
from server.services.errors import EntityNotFound, ServiceError
from server.services.remember import remember
from server.settings import Settings
from tests.test_e2e_stdio import COMMAND, call, synced_session

ALICE = b"---\r\ntype: Person\r\nname: Alice\r\n# where she works\r\nemployer: Acme   # since 2020\r\ncity: Lyon\r\n---\r\nMet at a conference.\r\n"


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        yield runtime


def put(vault: Path, rel: str, data: bytes) -> None:
    (vault / rel).parent.mkdir(parents=True, exist_ok=True)
    (vault / rel).write_bytes(data)


async def synced(rt: Runtime, vault: Path, rel: str, data: bytes) -> str:
    put(vault, rel, data)
    outcome = await rt.require_sync().sync_path(rel)
    assert outcome.id is not None, outcome
    return outcome.id


async def edited(rt: Runtime, vault: Path, rel: str, *changes: tuple[bytes, bytes]) -> None:
    """Edit the note as a person would (its engrama_id line stays), then sync it."""
    data = (vault / rel).read_bytes()
    for old, new in changes:
        assert old in data
        data = data.replace(old, new)
    (vault / rel).write_bytes(data)
    await rt.require_sync().sync_path(rel)


async def test_an_edit_in_the_note_keeps_the_old_value_as_history(rt: Runtime, vault: Path) -> None:
    await synced(rt, vault, "People/Alice.md", ALICE)
    await edited(rt, vault, "People/Alice.md", (b"Acme", b"Globex"), (b"city: Lyon\r\n", b""))
    seen = await context(rt, "Alice")
    assert seen.node.properties["employer"] == "Globex" and "city" not in seen.node.properties
    past = {p.key: p for p in seen.history}
    assert past["employer"].value == "Acme" and past["employer"].source == "note"
    assert past["city"].value == "Lyon" and past["employer"].reason == "edited in the note"


async def test_remember_asks_before_replacing_a_fact_that_may_have_two_values(
    rt: Runtime, vault: Path
) -> None:
    await synced(rt, vault, "People/Alice.md", ALICE)
    before = (vault / "People/Alice.md").read_bytes()
    asked = await remember(rt, "Person", "Alice", {"employer": "Globex", "role": "CTO"})
    assert [c.key for c in asked.clarifications] == ["employer"] and not asked.history_kept
    question = asked.clarifications[0]
    assert (question.current, question.proposed) == ("Acme", "Globex") and "resolve" in question.question
    text = (vault / "People/Alice.md").read_bytes()
    assert b"employer: Acme   # since 2020\r\n" in text and b"role: CTO\r\n" in text  # the rest applied

    done = await remember(rt, "Person", "Alice", {"employer": "Globex"}, resolve="replace", reason="new job")
    assert done.history_kept == ("employer",) and not done.clarifications
    text = (vault / "People/Alice.md").read_bytes()
    # Only the employer's value changed; the comments above it and after it and every other byte stayed.
    assert text == before.replace(b"employer: Acme   #", b"employer: Globex   #").replace(
        b"---\r\nMet", b"role: CTO\r\n---\r\nMet"
    )
    past = [p for p in (await context(rt, "Alice")).history if p.key == "employer"]
    assert [(p.value, p.source, p.reason) for p in past] == [("Acme", "tool", "new job")]


async def test_keep_both_makes_a_list_and_a_value_already_listed_is_not_asked_about(
    rt: Runtime, vault: Path
) -> None:
    await synced(rt, vault, "People/Alice.md", ALICE)
    done = await remember(rt, "Person", "Alice", {"employer": "Globex"}, resolve="keep_both")
    assert not done.clarifications
    assert (await context(rt, "Alice")).node.properties["employer"] == ["Acme", "Globex"]
    again = await remember(rt, "Person", "Alice", {"employer": "acme"})
    assert not again.clarifications and not again.history_kept


async def test_a_status_is_replaced_without_asking_and_the_old_one_kept(rt: Runtime, vault: Path) -> None:
    done = await remember(rt, "Project", "Engrama", {"status": "active", "version": 1})
    later = await remember(rt, "Project", "Engrama", {"status": "done", "version": 2}, "Shipped.")
    assert set(later.history_kept) == {"status", "version"} and not later.clarifications
    past = {p.key: p for p in (await context(rt, "Engrama")).history}
    assert past["status"].value == "active" and past["status"].reason == "Shipped."
    assert done.id == later.id


async def test_a_bad_resolve_is_refused_before_anything_is_written(rt: Runtime, vault: Path) -> None:
    with pytest.raises(ServiceError, match="keep_both"):
        await remember(rt, "Person", "Bob", {"employer": "X"}, resolve="overwrite")
    assert not (vault / "People").exists()


async def test_a_superseded_note_has_half_its_confidence_and_a_write_revives_it(
    rt: Runtime, vault: Path
) -> None:
    note = b"---\ntype: Decision\nname: Use MySQL\nconfidence: 0.8\nvalid_to: 2025-01-10\n---\nWe chose it.\n"
    node_id = await synced(rt, vault, "Decisions/Use MySQL.md", note)
    node = await rt.store.get_node(node_id)
    assert node is not None and node.confidence == pytest.approx(0.4) and node.valid_to == "2025-01-10"
    assert "valid_to" not in node.properties and "confidence" not in node.properties

    before = (vault / "Decisions/Use MySQL.md").read_bytes()
    done = await remember(rt, "Decision", "Use MySQL", observation="Back on the table.")
    assert done.revived and "current again" in done.message
    text = (vault / "Decisions/Use MySQL.md").read_bytes()
    assert text.startswith(before.replace(b"valid_to: 2025-01-10\n", b""))
    node = await rt.store.get_node(node_id)
    assert node is not None and node.valid_to is None and node.confidence == pytest.approx(0.8)


async def test_a_forgotten_entity_comes_back_with_the_status_it_had(rt: Runtime, vault: Path) -> None:
    rel = "Projects/Engrama.md"
    node_id = await synced(rt, vault, rel, b"---\ntype: Project\nname: Engrama\nstatus: paused\n---\nBody.\n")
    await edited(rt, vault, rel, (b"status: paused", b"status: archived"))
    node = await rt.store.get_node(node_id)
    assert node is not None and node.status == "archived"
    done = await remember(rt, "Project", "Engrama", observation="Picked up again.")
    assert done.revived and done.id == node_id and done.path == rel
    assert (
        (vault / rel)
        .read_bytes()
        .startswith(b"---\ntype: Project\nname: Engrama\nstatus: paused\nengrama_id:")
    )
    node = await rt.store.get_node(node_id)
    assert node is not None and node.status == "active"
    assert sorted(p.name for p in (vault / "Projects").iterdir()) == ["Engrama.md"]  # no duplicate note


async def test_a_graph_only_remember_keeps_history_too(db_path: Path) -> None:
    async with open_runtime(Settings(vault=None, db_path=db_path, watch=False)) as rt:
        await remember(rt, "Person", "Bob", {"employer": "Acme"})
        asked = await remember(rt, "Person", "Bob", {"employer": "Globex"})
        assert [c.key for c in asked.clarifications] == ["employer"]
        await remember(rt, "Person", "Bob", {"employer": "Globex"}, resolve="replace", reason="moved")
        seen = await context(rt, "Bob")
        assert seen.node.properties["employer"] == "Globex"
        assert [(p.value, p.source, p.reason) for p in seen.history] == [("Acme", "tool", "moved")]
        # A graph-only update is an update: a decayed confidence goes back to full.
        await rt.store.db.run(lambda c: c.execute("update nodes set confidence = 0.3, base_confidence = 1.0"))
        await remember(rt, "Person", "Bob", observation="Still at Globex.")
        bob = await rt.store.get_node(seen.node.id)
        assert bob is not None and (bob.confidence, bob.status) == (1.0, "active")


async def test_as_of_shows_the_entity_as_it_was(rt: Runtime, vault: Path) -> None:
    rel = "Projects/Engrama.md"
    first = b"---\ntype: Project\nname: Engrama\nstatus: idea\n---\nBuilt on [[SQLite]].\n"
    node_id = await synced(rt, vault, rel, first)
    await synced(rt, vault, "Technologies/DuckDB.md", b"An analytics engine.\n")
    # As if the graph had known the note since 2025: the edge came with it, so it starts with the note.
    await rt.store.db.run(
        lambda conn: conn.execute(
            "update nodes set created_at = '2025-01-01T00:00:00Z', began_at = '2025-01-01T00:00:00Z' "
            "where id = ?",
            (node_id,),
        )
    )
    await rt.store.db.run(
        lambda conn: conn.execute(
            "update edges set valid_from = '2025-01-01T00:00:00Z' where source = ?", (node_id,)
        )
    )
    await edited(
        rt, vault, rel, (b"status: idea", b"status: active"), (b"Built on [[SQLite]]", b"Now on [[DuckDB]]")
    )

    then = await context(rt, "Engrama", as_of="2025-06-01")
    assert then.as_of == "2025-06-01" and then.node.properties["status"] == "idea"
    assert [n.node.name for n in then.neighbours] == ["SQLite"]
    now = await context(rt, "Engrama")
    assert now.node.properties["status"] == "active" and [n.node.name for n in now.neighbours] == ["DuckDB"]
    with pytest.raises(ServiceError, match="ISO date"):
        await context(rt, "Engrama", as_of="last spring")


async def test_as_of_before_a_notes_valid_from_finds_nothing(rt: Runtime, vault: Path) -> None:
    await synced(rt, vault, "Projects/Atlas.md", b"---\ntype: Project\nvalid_from: 2026-02-01\n---\nAtlas.\n")
    with pytest.raises(EntityNotFound, match="did not hold on 2026-01-15"):
        await context(rt, "Atlas", as_of="2026-01-15")
    assert (await context(rt, "Atlas", as_of="2026-03-01")).node.name == "Atlas"


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_an_obsidian_edit_shows_as_history_in_engrama_context(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """The real server watching the vault: the person changes `employer:` in the note, the assistant sees
    the new value and the old one in engrama_context."""
    put(vault, "People/Alice.md", ALICE)
    async with synced_session(vault, db_path, tmp_path) as session:
        assert (await call(session, "engrama_context", {"name": "Alice"}))["node"]["properties"][
            "employer"
        ] == "Acme"
        data = (vault / "People/Alice.md").read_bytes()  # now with the engrama_id line
        (vault / "People/Alice.md").write_bytes(data.replace(b"employer: Acme", b"employer: Globex"))
        deadline = time.monotonic() + 20
        while True:
            seen = await call(session, "engrama_context", {"name": "Alice"})
            if seen["node"]["properties"]["employer"] == "Globex" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
    assert seen["node"]["properties"]["employer"] == "Globex"
    assert [(h["key"], h["value"], h["source"]) for h in seen["history"]] == [("employer", "Acme", "note")]


async def test_the_clarification_round_trip_through_the_tools(vault: Path, db_path: Path) -> None:
    """engrama_remember over MCP: the clarification is structured output, resolve settles it, and
    engrama_context shows the history and answers as_of."""
    put(vault, "People/Alice.md", ALICE)
    async with Client(create_server(Settings(vault=vault, db_path=db_path, watch=False))) as client:
        assert not (await client.call_tool("engrama_sync_vault", {})).is_error
        first = await client.call_tool(
            "engrama_remember", {"label": "Person", "name": "Alice", "properties": {"employer": "Globex"}}
        )
        assert first.structured_content is not None and not first.is_error
        [ask] = first.structured_content["clarifications"]
        assert (ask["key"], ask["current"], ask["proposed"]) == ("employer", "Acme", "Globex")
        bad = await client.call_tool(
            "engrama_remember", {"label": "Person", "name": "Alice", "properties": {}, "resolve": "both"}
        )
        assert bad.is_error
        settled = await client.call_tool(
            "engrama_remember",
            {
                "label": "Person",
                "name": "Alice",
                "properties": {"employer": "Globex"},
                "resolve": "keep_both",
            },
        )
        assert settled.structured_content is not None and settled.structured_content["clarifications"] == []
        seen = await client.call_tool("engrama_context", {"name": "Alice"})
        assert seen.structured_content is not None
        assert seen.structured_content["node"]["properties"]["employer"] == ["Acme", "Globex"]
        assert [(h["key"], h["value"]) for h in seen.structured_content["history"]] == [("employer", "Acme")]
        today = await client.call_tool("engrama_context", {"name": "Alice", "as_of": "2999-01-01"})
        assert today.structured_content is not None and today.structured_content["as_of"] == "2999-01-01"


async def test_the_assistant_can_supersede_a_fact_and_a_later_write_revives_it(
    rt: Runtime, vault: Path
) -> None:
    done = await remember(rt, "Decision", "Use MySQL", observation="Chosen for the billing service.")
    superseded = await remember(
        rt, "Decision", "Use MySQL", {"valid_to": "2026-11-01"}, reason="moved to Postgres"
    )
    assert not superseded.revived
    node = await rt.store.get_node(done.id)
    assert node is not None and node.valid_to == "2026-11-01" and node.confidence == 0.5
    assert b"\nvalid_to: " in (vault / "Decisions/Use MySQL.md").read_bytes()
    revived = await remember(rt, "Decision", "Use MySQL", observation="Back for reporting.")
    node = await rt.store.get_node(done.id)
    assert revived.revived and node is not None and node.valid_to is None and node.confidence == 1.0
    assert b"valid_to" not in (vault / "Decisions/Use MySQL.md").read_bytes()
