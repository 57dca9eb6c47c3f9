"""engrama_forget against real temporary vaults and databases: archive through the note, purge from the graph."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from server.app import create_server
from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.services.errors import EntityNotFound, ServiceError
from server.services.forget import REASON, forget
from server.services.remember import remember
from server.settings import Settings
from server.store import history_sql, insights_sql
from tests.test_tools import call_error, call_ok
from tests.test_tools import connected as connected_client
from tests.test_typing_editor import saving_until, settled_runtime
from vault_sync.report import UNCHANGED
from vault_sync.writer import NoteBusy

HARBOR = (
    b"---\r\n# written by hand\r\ntype: Project\r\nstatus: active\r\n"
    b"tags: [import, nightly]  # keep this\r\nrelations:\r\n  USES: ['[[SQLite]]']\r\n---\r\n"
    b"Harbor runs the zanzibar import every night. It links [[Kafka]].\r\n"
)
SQLITE = b"---\ntype: Technology\n---\nSQLite is an embedded database.\n"


def write(vault: Path, rel: str, data: bytes) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    write(vault, "Projects/Harbor.md", HARBOR)
    write(vault, "Technologies/SQLite.md", SQLITE)
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


async def names_found(rt: Runtime, query: str, include_archived: bool = False) -> set[str]:
    found = await search(rt, query, include_archived=include_archived)
    return {hit.name for hit in found.results}


def count(conn: Any, sql: str, *args: Any) -> int:
    return conn.execute(sql, args).fetchone()[0]


async def test_archive_changes_only_the_status_line_of_the_note(rt: Runtime, vault: Path) -> None:
    before = (vault / "Projects/Harbor.md").read_bytes()  # with the engrama_id the first sync inserted
    done = await forget(rt, "harbor")
    assert (done.status, done.mode, done.path, done.changed) == (
        "archived",
        "archive",
        "Projects/Harbor.md",
        True,
    )
    after = (vault / "Projects/Harbor.md").read_bytes()
    assert after == before.replace(b"\r\nstatus: active\r\n", b"\r\nstatus: archived\r\n")
    node = await rt.store.get_node(done.id)
    assert node is not None and node.status == "archived"
    assert (await rt.require_sync().sync_path("Projects/Harbor.md")).action == UNCHANGED
    assert "Harbor" not in await names_found(rt, "zanzibar")
    assert "Harbor" in await names_found(rt, "zanzibar", include_archived=True)
    [past] = await rt.store.read(history_sql.history, done.id)
    assert (past.key, past.value, past.source, past.reason) == ("status", "active", "tool", REASON)


async def test_archive_keeps_the_persons_comments_on_the_status_line_and_never_rewrites_one_inside_it(
    rt: Runtime, vault: Path
) -> None:
    """Found by review: archiving replaced the whole `status:` entry, so a comment after the value, or a
    status of several lines with comments in it, was lost for good (the graph keeps values, not comments),
    while the tool said no other byte changed."""
    commented = (
        (vault / "Projects/Harbor.md")
        .read_bytes()
        .replace(b"\r\nstatus: active\r\n", b"\r\nstatus: active  # since May, ask Ann\r\n")
    )
    write(vault, "Projects/Harbor.md", commented)
    await rt.require_sync().sync_path("Projects/Harbor.md")
    await forget(rt, "Harbor")
    assert (vault / "Projects/Harbor.md").read_bytes() == commented.replace(
        b"status: active  #", b"status: archived  #"
    )
    nested = b"---\ntype: Concept\nstatus:   # where we are\n  phase: build\n  blocked_by: legal  # ask Bob\n---\nx\n"
    write(vault, "Concepts/Plan.md", nested)
    await rt.require_sync().sync_path("Concepts/Plan.md")
    kept = (vault / "Concepts/Plan.md").read_bytes()  # with its engrama_id
    with pytest.raises(ServiceError, match="holds a comment .* Set it by hand"):
        await forget(rt, "Plan")
    assert (vault / "Concepts/Plan.md").read_bytes() == kept
    node = (await rt.store.find_nodes("Plan", "Concept"))[0]
    assert node.status != "archived"


async def test_archive_adds_the_status_line_when_the_note_has_none(rt: Runtime, vault: Path) -> None:
    before = (vault / "Technologies/SQLite.md").read_bytes()
    done = await forget(rt, "SQLite", "technology")
    after = (vault / "Technologies/SQLite.md").read_bytes()
    closing = before.index(b"---\n", 4)  # the engrama_id line the first sync added is the last key
    assert after == before[:closing] + b"status: archived\n" + before[closing:]
    [past] = await rt.store.read(history_sql.history, done.id)
    assert (past.key, past.value, past.reason) == ("status", None, REASON)


async def test_archiving_twice_changes_nothing(rt: Runtime, vault: Path) -> None:
    await forget(rt, "Harbor")
    before = (vault / "Projects/Harbor.md").read_bytes()
    again = await forget(rt, "Harbor")
    assert not again.changed and "already archived" in again.message
    assert (vault / "Projects/Harbor.md").read_bytes() == before


async def test_an_archive_survives_rebuilding_the_graph(rt: Runtime, vault: Path, tmp_path: Path) -> None:
    done = await forget(rt, "Harbor")
    fresh = Settings(vault=vault, db_path=tmp_path / "rebuilt" / "graph.db", watch=False)
    async with open_runtime(fresh) as rebuilt:
        await rebuilt.require_sync().sync_vault()
        node = await rebuilt.store.get_node(done.id)
        assert node is not None and node.status == "archived"
        assert "Harbor" not in await names_found(rebuilt, "zanzibar")


async def test_a_malformed_note_is_left_alone(rt: Runtime, vault: Path) -> None:
    broken = (vault / "Projects/Harbor.md").read_bytes().replace(b"tags: [import", b"tags: [import: {")
    write(vault, "Projects/Harbor.md", broken)
    with pytest.raises(ServiceError, match="Projects/Harbor.md was left alone"):
        await forget(rt, "Harbor")
    assert (vault / "Projects/Harbor.md").read_bytes() == broken


async def test_without_a_vault_archive_writes_the_graph_only(vault: Path, db_path: Path) -> None:
    async with open_runtime(Settings(vault=None, db_path=db_path, watch=False)) as rt:
        made = await remember(rt, "Project", "Orbit", {"status": "active"})
        done = await forget(rt, "Orbit")
        assert (done.id, done.status, done.path, done.changed) == (made.id, "archived", None, True)
        assert "in the graph" in done.message
        node = await rt.store.get_node(made.id)
        assert node is not None and node.status == "archived" and node.properties["status"] == "archived"
        [past] = await rt.store.read(history_sql.history, made.id)
        assert (past.key, past.value, past.source, past.reason) == ("status", "active", "tool", REASON)
        assert not (await forget(rt, "Orbit")).changed


async def test_without_a_vault_delete_note_is_refused(rt: Runtime, vault: Path, db_path: Path) -> None:
    async with open_runtime(Settings(vault=None, db_path=db_path, watch=False)) as graph_only:
        with pytest.raises(ServiceError, match="no vault is configured; nothing was purged"):
            await forget(graph_only, "Harbor", mode="purge", delete_note=True)
        assert (await graph_only.store.find_nodes("Harbor"))[0].path == "Projects/Harbor.md"


async def test_purge_leaves_the_note_and_removes_every_trace_from_the_graph(rt: Runtime, vault: Path) -> None:
    await forget(rt, "Harbor")  # archived first: an archived entity can be purged, and it has history
    before = (vault / "Projects/Harbor.md").read_bytes()
    node_id = (await rt.store.find_nodes("Harbor", include_archived=True))[0].id

    def traces(conn: Any) -> list[int]:
        return [
            count(conn, "select count(*) from edges where source = ? or target = ?", node_id, node_id),
            count(conn, "select count(*) from chunks_fts where chunks_fts match 'zanzibar'"),
            count(conn, "select count(*) from notes_fts where notes_fts match 'zanzibar'"),
            count(conn, "select count(*) from node_keys where node_id = ?", node_id),
            count(conn, "select count(*) from property_history where node_id = ?", node_id),
        ]

    assert all(await rt.store.read(traces))
    await rt.store.write(
        lambda c: c.execute("update chunks set embedded_model = 'fake' where node_id = ?", (node_id,))
    )
    chunk_ids = await rt.store.read(
        lambda c: [r[0] for r in c.execute("select id from chunks where node_id = ?", (node_id,))]
    )
    done = await forget(rt, "Harbor", mode="purge")
    assert (done.id, done.status, done.trash_path, done.changed) == (node_id, "purged", None, True)
    assert "stays in the vault" in done.message and "delete_note=true" in done.message
    assert (vault / "Projects/Harbor.md").read_bytes() == before
    assert await rt.store.get_node(node_id) is None
    assert await rt.store.find_nodes("Kafka") == []  # the stub only Harbor linked to went with it
    assert [n.status for n in await rt.store.find_nodes("SQLite")] == ["active"]
    assert await rt.store.read(traces) == [0, 0, 0, 0, 0]
    orphans = await rt.store.read(lambda c: [r[0] for r in c.execute("select chunk_id from vec_orphans")])
    assert sorted(orphans) == sorted(chunk_ids) and chunk_ids  # the embedding worker drops their vectors
    assert await names_found(rt, "zanzibar", include_archived=True) == set()
    # The note's sync state stays, so the unchanged note is not indexed again.
    assert (await rt.require_sync().sync_vault()).unchanged == 2
    assert await rt.store.get_node(node_id) is None
    with pytest.raises(EntityNotFound):
        await forget(rt, "Harbor", mode="purge")


async def test_purge_with_delete_note_moves_the_note_to_the_trash(rt: Runtime, vault: Path) -> None:
    before = (vault / "Projects/Harbor.md").read_bytes()
    done = await forget(rt, "Harbor", mode="purge", delete_note=True)
    assert done.trash_path == ".trash/Harbor.md" and done.path == "Projects/Harbor.md"
    assert (vault / ".trash/Harbor.md").read_bytes() == before
    assert not (vault / "Projects/Harbor.md").exists()
    assert await rt.store.get_node(done.id) is None
    assert await rt.store.file_state("Projects/Harbor.md") is None
    report = await rt.require_sync().sync_vault()
    assert (report.scanned, report.archived, report.created) == (1, 0, 0)


async def test_purge_removes_a_stub(rt: Runtime) -> None:
    done = await forget(rt, "Kafka", mode="purge")
    assert done.path is None and "had no note" in done.message and "remove those links" in done.message
    # Harbor's note still links [[Kafka]]: the name stays a placeholder, as a rebuild from the vault gives.
    (back,) = await rt.store.find_nodes("Kafka", include_archived=True)
    assert back.status == "stub" and back.id != done.id


async def test_bad_calls_say_what_to_do(rt: Runtime, vault: Path) -> None:
    before = (vault / "Projects/Harbor.md").read_bytes()
    with pytest.raises(ServiceError, match="delete_note applies to mode=purge"):
        await forget(rt, "Harbor", delete_note=True)
    with pytest.raises(ServiceError, match="archive .*purge"):
        await forget(rt, "Harbor", mode="shred")
    with pytest.raises(EntityNotFound, match="engrama_search"):
        await forget(rt, "Atlantis")
    with pytest.raises(ServiceError, match="mode=purge"):
        await forget(rt, "Kafka")  # a stub has no note to archive
    assert (vault / "Projects/Harbor.md").read_bytes() == before


# --- through the MCP tool -----------------------------------------------------------------------------------


@pytest.fixture
def settings(vault: Path, db_path: Path) -> Settings:
    write(vault, "Projects/Harbor.md", HARBOR)
    write(vault, "Technologies/SQLite.md", SQLITE)
    return Settings(vault=vault, db_path=db_path, watch=False)


async def test_the_tool_archives_by_default_and_purges_when_asked(settings: Settings) -> None:
    async with Client(create_server(settings)) as client:
        await call_ok(client, "engrama_sync_vault", {})
        [tool] = [t for t in (await client.list_tools()).tools if t.name == "engrama_forget"]
        assert tool.annotations is not None and tool.annotations.destructive_hint is True
        assert tool.annotations.idempotent_hint is True and tool.annotations.read_only_hint is False
        assert tool.input_schema["required"] == ["name"]
        archived = await call_ok(client, "engrama_forget", {"name": "Harbor"})
        assert set(archived) == {
            "id",
            "label",
            "name",
            "mode",
            "status",
            "path",
            "trash_path",
            "changed",
            "message",
        }
        assert (archived["status"], archived["path"], archived["trash_path"]) == (
            "archived",
            "Projects/Harbor.md",
            None,
        )
        assert (await call_ok(client, "engrama_search", {"query": "zanzibar"}))["results"] == []
        found = await call_ok(client, "engrama_search", {"query": "zanzibar", "include_archived": True})
        assert found["results"][0]["name"] == "Harbor"
        purged = await call_ok(
            client, "engrama_forget", {"name": "Harbor", "mode": "purge", "delete_note": True}
        )
        assert purged["status"] == "purged" and purged["trash_path"] == ".trash/Harbor.md"
        assert (settings.vault / ".trash/Harbor.md").exists()  # type: ignore[operator]
        assert "delete_note applies to mode=purge" in await call_error(
            client, "engrama_forget", {"name": "SQLite", "delete_note": True}
        )
        assert "archive" in await call_error(client, "engrama_forget", {"name": "SQLite", "mode": "erase"})
        assert "engrama_search" in await call_error(client, "engrama_forget", {"name": "Harbor"})


async def test_a_followers_forget_reaches_the_note_through_the_lease_holder(settings: Settings) -> None:
    watching = Settings(vault=settings.vault, db_path=settings.db_path, watch=True)
    vault = settings.vault
    assert vault is not None
    async with Client(create_server(watching)) as holder, Client(create_server(watching)) as follower:
        await call_ok(holder, "engrama_sync_vault", {})
        purged = await call_ok(
            follower, "engrama_forget", {"name": "Harbor", "mode": "purge", "delete_note": True}
        )
        assert purged["status"] == "purged" and "queued to move to .trash" in purged["message"]
        done = await call_ok(follower, "engrama_forget", {"name": "SQLite"})
        assert done["status"] == "archived" and "queued" in done["message"]
        await eventually(lambda: (vault / ".trash/Harbor.md").exists())
        await eventually(lambda: b"status: archived" in (vault / "Technologies/SQLite.md").read_bytes())
    assert not (vault / "Projects/Harbor.md").exists()


async def eventually(check: Any, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not done within the deadline"
        await asyncio.sleep(0.05)


async def test_purge_withdraws_the_pending_insights_that_name_the_entity(rt: Runtime) -> None:
    harbor = (await rt.store.find_nodes("Harbor"))[0].id
    sqlite = (await rt.store.find_nodes("SQLite"))[0].id

    def proposal(key: str, entities: tuple[str, ...]) -> insights_sql.Proposal:
        return insights_sql.Proposal(key, f"id-{key}", "shared_technology", key, "body", 0.7, entities)

    proposals = [proposal("about-both", (sqlite, harbor)), proposal("about-sqlite", (sqlite,))]
    decided = proposal("decided", (harbor, sqlite))
    await rt.store.write(
        insights_sql.save_proposals, ["shared_technology"], [*proposals, decided], [], "2026-11-20T00:00:00Z"
    )
    await rt.store.write(insights_sql.decide, "id-decided", "approved", "2026-11-20T00:00:00Z")
    done = await forget(rt, "Harbor", mode="purge")
    assert "1 pending insight(s) that named it were withdrawn" in done.message
    left = await rt.store.read(lambda c: {r[0]: r[1] for r in c.execute("select key, status from insights")})
    assert left == {"about-sqlite": "pending", "decided": "approved"}


async def test_an_archived_entity_can_still_be_looked_at_by_name(rt: Runtime) -> None:
    from server.services.context import context

    done = await forget(rt, "harbor")
    seen = await context(rt, "Harbor", "Project")
    assert (seen.node.id, seen.node.status, seen.node.path) == (done.id, "archived", "Projects/Harbor.md")


async def test_an_entity_purged_with_its_note_kept_and_remembered_again_is_that_note(
    rt: Runtime, vault: Path
) -> None:
    """Review 21c: after a purge that kept the note, remembering the name again made `SQLite 2.md` beside the
    person's note, and their next edit of it gave two live entities of one name."""
    before = (vault / "Technologies/SQLite.md").read_bytes()
    await forget(rt, "SQLite", mode="purge")
    done = await remember(rt, "Technology", "SQLite", observation="Back in use.")
    assert done.path == "Technologies/SQLite.md", done
    assert sorted(p.name for p in (vault / "Technologies").iterdir()) == ["SQLite.md"]
    after = (vault / "Technologies/SQLite.md").read_bytes()
    assert after.startswith(before) and b"Back in use." in after[len(before) :]
    (vault / "Technologies/SQLite.md").write_bytes(after + b"Edited by the person.\n")
    await rt.require_sync().sync_vault()
    live = await rt.store.read(
        lambda c: c.execute(
            "select count(*) from nodes where name = 'SQLite' and status = 'active'"
        ).fetchone()[0]
    )
    assert live == 1


async def test_a_purge_says_which_notes_still_link_to_what_it_purged(rt: Runtime, vault: Path) -> None:
    """Review 21c: "purged 'SQLite' ... with its relations", yet Harbor's note still says USES SQLite, so the
    graph has the name again at once (a placeholder) and a later remember re-attaches the relation."""
    done = await forget(rt, "SQLite", mode="purge")
    assert "1 note(s) still link to it (Projects/Harbor.md)" in done.message, done.message
    assert "remove those links or relations in the notes" in done.message
    alone = await forget(rt, "Harbor", mode="purge")
    assert "still link to it" not in alone.message  # nothing links to Harbor


async def test_a_note_whose_id_line_is_owed_or_refused_can_be_forgotten(vault: Path, db_path: Path) -> None:
    """Review 21c: a note indexed without its id line (owed while the person was still saving it, or refused by
    JSON frontmatter) could be neither archived nor purged with delete_note, and the advice given (sync the
    note) changed nothing."""
    write(vault, "Projects/Fresh.md", b"---\ntype: Project\n---\nJust saved.\n")
    write(vault, "Projects/Json.md", b'---\n{"type": "Project"}\n---\nJSON frontmatter.\n')
    # A settle window longer than the sync takes: the line is owed. The forget waits for it, as any write does.
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False, settle=1.0)) as rt:
        await rt.require_sync().sync_vault()
        fresh = (vault / "Projects/Fresh.md").read_bytes()
        assert b"engrama_id" not in fresh  # indexed, its line owed until the note is quiet
        done = await forget(rt, "Fresh")
        assert done.status == "archived"
        after = (vault / "Projects/Fresh.md").read_bytes()
        assert after.startswith(b"---\ntype: Project\n") and after.endswith(b"---\nJust saved.\n")
        assert b"status: archived\n" in after and f"engrama_id: {done.id}\n".encode() in after
        with pytest.raises(ServiceError, match="set `status: archived` in the note in Obsidian"):
            await forget(rt, "Json")
        purged = await forget(rt, "Json", mode="purge", delete_note=True)
        assert purged.trash_path is not None and not (vault / "Projects/Json.md").exists()
        assert (
            vault / purged.trash_path
        ).read_bytes() == b'---\n{"type": "Project"}\n---\nJSON frontmatter.\n'


async def test_a_purge_waits_to_move_a_note_the_person_is_typing_in(vault: Path, db_path: Path) -> None:
    """Review 23f: purge with delete_note moved the note to the trash at once while the person was typing in it;
    the editor's next save made it anew at its path, so the entity was back (same id), with a stale copy of the
    note in the trash. The move waits for the note to be quiet, as a tool's edit does, or says it is being
    edited and purges nothing."""
    write(vault, "Projects/Harbor.md", HARBOR)
    async with settled_runtime(vault, db_path) as rt:  # the id line written, once quiet
        note = vault / "Projects/Harbor.md"
        assert b"engrama_id: " in note.read_bytes()
        stop = asyncio.Event()

        person = asyncio.create_task(saving_until(note, stop))  # the person typing, saved in place
        try:
            await asyncio.sleep(0.5)
            with pytest.raises(NoteBusy, match="being edited"):
                await forget(rt, "Harbor", mode="purge", delete_note=True)
        finally:
            stop.set()
            await person
        assert note.exists() and not (vault / ".trash").exists()
        assert await rt.store.find_nodes("Harbor")  # nothing purged
        await asyncio.sleep(1.2)  # the person paused
        done = await forget(rt, "Harbor", mode="purge", delete_note=True)
        assert done.mode == "purge" and not note.exists() and (vault / ".trash/Harbor.md").exists()


@pytest.mark.parametrize(
    ("data", "called"),
    [
        (b"---\ntype: Project\naliases: [Atl]\n---\nThe Atlas platform.\n", "Atl"),
        (b"---\ntype: Project\nname: Atlas Platform\n---\nThe Atlas platform.\n", "atlas-2024"),
    ],
    ids=["alias", "file name"],
)
async def test_an_entity_forgotten_by_its_alias_or_file_name_is_brought_back_by_it(
    vault: Path, db_path: Path, data: bytes, called: str
) -> None:
    """Review 23f: forget found the entity by its alias (or its note's file name), but remember by the same
    name did not find the forgotten entity and created a second note beside it."""
    rel = "Projects/atlas-2024.md" if called == "atlas-2024" else "Projects/Atlas.md"
    write(vault, rel, data)
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        first = await forget(rt, called)
        assert first.status == "archived"
        again = await remember(rt, "Project", called, {}, "Back on the roadmap.")
        assert again.id == first.id and again.path == rel and not again.created
    assert sorted(p.name for p in (vault / "Projects").iterdir()) == [Path(rel).name]


async def test_of_two_notes_of_one_name_and_label_forget_asks_which(vault: Path, db_path: Path) -> None:
    """Review 23f: with Projects/Atlas.md and Projects/2023/Atlas.md, both Projects, forget archived one of them
    without a word (only namesakes of different labels were asked about). It asks, and the note's path
    chooses."""
    write(vault, "Projects/Atlas.md", b"---\ntype: Project\n---\nThis year's Atlas.\n")
    write(vault, "Projects/2023/Atlas.md", b"---\ntype: Project\n---\nThe old Atlas.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        with pytest.raises(ServiceError, match=r"2 entities are called 'Atlas'.*the note's path as name"):
            await forget(rt, "Atlas")
        done = await forget(rt, "Projects/2023/Atlas")
        assert done.path == "Projects/2023/Atlas.md" and done.status == "archived"
    assert b"status: archived" in (vault / "Projects/2023/Atlas.md").read_bytes()
    assert b"status" not in (vault / "Projects/Atlas.md").read_bytes()


async def test_search_with_archived_entities_says_which_are_archived(vault: Path, db_path: Path) -> None:
    """Review 23f: forget's refusals send the assistant to search with include_archived, and the results did
    not say which entities were forgotten: it could not tell the archived Atlas from the live one."""
    write(vault, "Projects/Atlas.md", b"---\ntype: Project\n---\nThe zanzibar platform.\n")
    write(vault, "Concepts/Atlas.md", b"---\ntype: Concept\n---\nA zanzibar idea.\n")
    settings = Settings(vault=vault, db_path=db_path, watch=False)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        await forget(rt, "Atlas", label="Concept")
        found = await search(rt, "zanzibar", include_archived=True)
        assert {(h.label, h.status) for h in found.results} == {
            ("Project", "active"),
            ("Concept", "archived"),
        }
    async with connected_client(settings) as client:
        result = await client.call_tool("engrama_search", {"query": "zanzibar", "include_archived": True})
        hits = (result.structured_content or {})["results"]
        assert {(h["label"], h["status"]) for h in hits} == {("Project", "active"), ("Concept", "archived")}


async def test_a_purge_cancelled_while_it_waits_moves_nothing(vault: Path, db_path: Path) -> None:
    """Review 23j: a purge with delete_note cancelled (or timed out) while it waited for the person's pause still
    moved the note to the trash a moment later, and the graph purge never ran (the entity left archived)."""
    write(vault, "Projects/Harbor.md", HARBOR)
    async with settled_runtime(vault, db_path) as rt:  # the id lines written, once quiet
        note = vault / "Projects/Harbor.md"
        stop = asyncio.Event()
        person = asyncio.create_task(saving_until(note, stop))  # the person typing, saved in place
        await asyncio.sleep(0.5)
        call = asyncio.create_task(forget(rt, "Harbor", mode="purge", delete_note=True))
        await asyncio.sleep(0.4)
        call.cancel()
        stop.set()  # the person pauses at once: a move still waiting would happen now
        await person
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(2.5)
        assert note.exists() and not (vault / ".trash").exists()
        assert [n.status for n in await rt.store.find_nodes("Harbor", include_archived=True)] == ["active"]


async def test_forget_by_an_exact_name_is_not_asked_about_a_note_with_that_alias(
    vault: Path, db_path: Path
) -> None:
    """Review 23j: Projects/Atlas Cloud.md lists "Atlas" as an alias; forget("Atlas", label="Project") was refused
    as ambiguous (and told to pass the label it was given). The exact name is the entity asked for."""
    write(vault, "Projects/Atlas.md", b"---\ntype: Project\n---\nThe platform.\n")
    write(vault, "Projects/Atlas Cloud.md", b"---\ntype: Project\naliases: [Atlas]\n---\nThe hosted one.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        done = await forget(rt, "Atlas", label="Project")
        assert done.path == "Projects/Atlas.md" and done.status == "archived"


async def test_an_empty_status_the_person_left_comes_back_empty(vault: Path, db_path: Path) -> None:
    """Review 23f: forget then remember took the person's empty `status:` line out of the note (a property
    their template sets up, left for them to fill): the value it had, none, was taken for no key at all."""
    write(vault, "Projects/Atlas.md", b"---\ntype: Project\nstatus:\n---\nBody.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        await forget(rt, "Atlas")
        assert b"status: archived\n" in (vault / "Projects/Atlas.md").read_bytes()
        await remember(rt, "Project", "Atlas", {}, "Back on the roadmap.")
    assert (vault / "Projects/Atlas.md").read_bytes().startswith(b"---\ntype: Project\nstatus:\nengrama_id: ")
