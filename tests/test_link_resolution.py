"""Which note a link means follows the vault as it is now: the live graph always equals a rebuild's (STYLE habit
1), however notes with the same name come, go and get renamed after the linking note was read."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from profiles.loader import load_profile
from server.runtime import note_rules
from server.store import GraphStore
from vault_sync.reconcile import VaultSync

RULES = note_rules(load_profile("base", []))


async def targets(store: GraphStore) -> set[tuple[str, str, str, str | None]]:
    """Open edges as (source path, type, target name, target path): independent of ids and of read order."""
    rows = await store.read(
        lambda c: c.execute(
            "select s.path, e.type, t.name, t.path from edges e join nodes s on s.id = e.source "
            "join nodes t on t.id = e.target where e.valid_to is null"
        ).fetchall()
    )
    return {(r[0], r[1], r[2], r[3]) for r in rows}


async def rebuilt(vault: Path, tmp_path: Path, n: int) -> set[tuple[str, str, str, str | None]]:
    store = await GraphStore.open(tmp_path / f"rebuild-{n}.db")
    try:
        await VaultSync(vault, store, RULES, settle=0).sync_vault()
        return await targets(store)
    finally:
        await store.close()


async def synced(
    sync: VaultSync, store: GraphStore, vault: Path, tmp_path: Path, n: int
) -> set[tuple[str, str, str, str | None]]:
    """Sync the vault; the live graph's open edges (`targets`), checked equal to a rebuild's from the vault."""
    await sync.sync_vault()
    live = await targets(store)
    assert live == await rebuilt(vault, tmp_path, n)
    return live


async def rows(store: GraphStore, sql: str) -> list[tuple[object, ...]]:
    return await store.read(lambda c: [tuple(r) for r in c.execute(sql).fetchall()])


def write(vault: Path, rel: str, text: str) -> None:
    (vault / rel).parent.mkdir(parents=True, exist_ok=True)
    (vault / rel).write_text(text, encoding="utf-8")


async def test_links_follow_notes_that_share_a_name_as_they_come_go_and_are_renamed(
    vault: Path, store: GraphStore, tmp_path: Path
) -> None:
    sync = VaultSync(vault, store, RULES, settle=0)
    steps = []

    async def step(what: str) -> None:
        await sync.sync_vault()
        steps.append((what, await targets(store), await rebuilt(vault, tmp_path, len(steps))))

    write(vault, "Notes/Source.md", '---\nrelations:\n  USES: ["[[Target]]"]\n---\nSee [[Target]].\n')
    await step("the link names nothing yet")
    write(vault, "Deep/Folder/Target.md", "The deep one.\n")
    await step("a note of that name appears")
    write(vault, "Target.md", "The one at the top.\n")
    await step("a better match appears")
    os.rename(vault / "Target.md", vault / "Other.md")
    await step("the better match is renamed away")
    (vault / "Deep/Folder/Target.md").unlink()
    await step("the last match is deleted")
    write(vault, "Concepts/Target.md", "---\nstatus: archived\n---\nForgotten, but still in the vault.\n")
    await step("an archived note of that name")
    for what, live, rebuild in steps:
        assert live == rebuild, what
    uses = {(t, p) for s, r, t, p in steps[2][1] if r == "USES"}
    assert uses == {("Target", "Target.md")}  # the shortest path wins a tie between two file names
    assert {(t, p) for s, r, t, p in steps[4][1] if r == "USES"} == {("Target", None)}  # a stub again


async def test_a_relation_to_one_of_two_notes_of_a_name_is_written_so_it_leads_there(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Projects/Juniper.md", "---\ntype: Project\n---\nThe project.\n")
    write(vault, "Notes/Juniper.md", "A loose note with the same name (its path is shorter).\n")
    write(vault, "Projects/Atlas.md", "---\ntype: Project\n---\nAnother project.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        done = await relate(rt, "Atlas", "RELATED_TO", "Juniper", target_label="Project")
        live = await targets(rt.store)
    assert '"[[Projects/Juniper]]"' in (vault / "Projects/Atlas.md").read_text(encoding="utf-8")
    assert ("Projects/Atlas.md", "RELATED_TO", "Juniper", "Projects/Juniper.md") in live
    assert done.target_id is not None and live == await rebuilt(vault, tmp_path, 0)


async def test_a_note_back_from_the_trash_after_a_graph_only_revival_takes_back_its_links(
    vault: Path, store: GraphStore, tmp_path: Path
) -> None:
    """Soak seed 31337: the person trashed a note, a new note of that file name took its path links' fallback,
    a follower's tool write made the old node current in the graph alone, and the holder restored its note.
    The note was back, with the names and status the graph already held, so its links were never resolved
    again: the live graph kept the new note where a rebuild gives the restored one."""
    from server.store import memory_sql

    sync = VaultSync(vault, store, RULES, settle=0)
    write(vault, "Notes/Source.md", '---\nrelations:\n  APPLIES: ["[[Concepts/Granite]]"]\n---\nLinks.\n')
    write(vault, "Concepts/Granite.md", "The concept.\n")
    await sync.sync_vault()
    (vault / ".trash").mkdir()
    os.rename(vault / "Concepts/Granite.md", vault / ".trash/Granite.md")
    write(vault, "Projects/Granite.md", "---\ntype: Project\n---\nA project of that file name.\n")
    await sync.sync_vault()
    assert ("Notes/Source.md", "APPLIES", "Granite", "Projects/Granite.md") in await targets(store)
    old = await store.read(
        lambda c: c.execute("select id from nodes where path = 'Concepts/Granite.md'").fetchone()[0]
    )
    await store.write(memory_sql.revive_in_graph, old, "2026-11-25T12:00:00Z")  # a follower's write
    os.rename(vault / ".trash/Granite.md", vault / "Concepts/Granite.md")
    live = await synced(sync, store, vault, tmp_path, 0)
    assert ("Notes/Source.md", "APPLIES", "Granite", "Concepts/Granite.md") in live


async def test_a_relation_to_a_name_another_note_shares_is_written_by_path_even_when_the_name_leads_there_now(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Soak seed 31337: `[[Juniper]]` led to the live project while a note of that name was archived; once
    the person brought that note back, the relation the assistant made meant the other note. Like Obsidian,
    a relation is written by name only when no other note answers to it."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Projects/Juniper.md", "---\ntype: Project\n---\nThe project.\n")
    write(vault, "Notes/Juniper.md", "---\nstatus: archived\n---\nAn archived note of that name.\n")
    write(vault, "Projects/Atlas.md", "---\ntype: Project\n---\nAnother project.\n")
    write(vault, "Projects/Cedar.md", "---\ntype: Project\n---\nA project with a name of its own.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        await relate(rt, "Atlas", "RELATED_TO", "Juniper", target_label="Project")
        await relate(rt, "Atlas", "RELATED_TO", "Cedar", target_label="Project")
    atlas = (vault / "Projects/Atlas.md").read_text(encoding="utf-8")
    assert '"[[Projects/Juniper]]"' in atlas
    assert '"[[Projects/Cedar]]"' in atlas  # a relation names its target's note by path, whatever the name
    archived = (vault / "Notes/Juniper.md").read_text(encoding="utf-8")
    (vault / "Notes/Juniper.md").write_text(archived.replace("status: archived\n", ""), encoding="utf-8")
    after = await rebuilt(vault, tmp_path, 0)
    assert ("Projects/Atlas.md", "RELATED_TO", "Juniper", "Projects/Juniper.md") in after


async def test_links_follow_a_node_a_follower_revives_or_archives_in_the_graph_alone(
    vault: Path, store: GraphStore, tmp_path: Path
) -> None:
    """Soak seed 31337: a follower made an archived project current in the graph alone; the holder then wrote
    its note without `status: archived`, which said nothing the graph did not already hold, so `[[Granite]]`
    kept meaning the other note of that file name, where a rebuild gives the project."""
    from server.store import forget_sql, memory_sql

    sync = VaultSync(vault, store, RULES, settle=0)
    write(vault, "People/Fjord.md", '---\nrelations:\n  USES: ["[[Granite]]"]\n---\nA person.\n')
    write(vault, "Technologies/Granite.md", "---\nname: Pylon\n---\nA technology filed as Granite.\n")
    project = "---\ntype: Project\nstatus: archived\n---\nThe project.\n"
    write(vault, "Projects/Granite.md", project)
    await sync.sync_vault()
    uses = {(t, p) for s, r, t, p in await targets(store) if r == "USES"}
    assert uses == {("Pylon", "Technologies/Granite.md")}  # a live note outranks an archived one
    node = await store.read(
        lambda c: c.execute("select id from nodes where path = 'Projects/Granite.md'").fetchone()[0]
    )
    await store.write(memory_sql.revive_in_graph, node, "2026-11-25T12:00:00Z")  # a follower's write
    write(vault, "Projects/Granite.md", project.replace("status: archived\n", ""))  # the holder's
    live = await synced(sync, store, vault, tmp_path, 0)
    assert ("People/Fjord.md", "USES", "Granite", "Projects/Granite.md") in live
    await store.write(forget_sql.archive_in_graph, node, "2026-11-25T12:01:00Z", "forgotten")
    write(vault, "Projects/Granite.md", project)
    live = await synced(sync, store, vault, tmp_path, 1)
    assert ("People/Fjord.md", "USES", "Pylon", "Technologies/Granite.md") in live


async def test_a_relation_to_a_name_only_an_archived_note_of_another_type_answers_to_means_that_note(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Soak seed 31337: "Ember 6" named no entity of the wanted type, only the file of an archived note of
    another type; relate made a placeholder and wrote `[[Ember 6]]`, a link that leads to that note in the
    vault. The relation now means what its link means."""
    from server.runtime import open_runtime
    from server.services.errors import RelationNotAllowed
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Notes/Ember 6.md", "---\nname: Loose ends\nstatus: archived\n---\nAn old note.\n")
    write(vault, "Projects/Cedar.md", "---\ntype: Project\n---\nThe project.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        with pytest.raises(RelationNotAllowed, match="Notes/Ember 6.md"):  # a Note, not the Concept wanted
            await relate(rt, "Cedar", "APPLIES", "Ember 6", target_label="Concept")
        done = await relate(rt, "Cedar", "RELATED_TO", "Ember 6", target_label="Concept")
        note = await rt.store.read(
            lambda c: c.execute("select id from nodes where path = 'Notes/Ember 6.md'").fetchone()[0]
        )
        stubs = await rt.store.read(
            lambda c: c.execute("select count(*) from nodes where status = 'stub'").fetchone()[0]
        )
        live = await targets(rt.store)
    assert done.target_id == note and stubs == 0
    assert ("Projects/Cedar.md", "RELATED_TO", "Loose ends", "Notes/Ember 6.md") in live
    assert live == await rebuilt(vault, tmp_path, 0)


async def test_a_link_that_spells_out_a_notes_path_means_that_note_even_once_it_is_archived(
    vault: Path, store: GraphStore, tmp_path: Path
) -> None:
    """Soak seed 20261125: `[[Raven]]` led to the vault's top-level Raven.md (its path); once that note was
    archived, the link meant another note named Raven. A link that spells out a path means that file, as in
    Obsidian; only a name several notes share is settled by which of them is live."""
    sync = VaultSync(vault, store, RULES, settle=0)
    write(
        vault,
        "Projects/Harbor.md",
        '---\nrelations:\n  USES: ["[[Raven]]", "[[Projects/Kite]]"]\n---\nUses.\n',
    )
    write(vault, "Raven.md", "---\ntype: Technology\n---\nThe technology.\n")
    write(vault, "People/Raven.md", "---\ntype: Person\n---\nA person of that name.\n")
    write(vault, "Projects/Kite.md", "---\ntype: Project\n---\nA project.\n")
    write(vault, "Kite.md", "A loose note of that file name (its path is shorter).\n")
    live = await synced(sync, store, vault, tmp_path, 0)
    expected = {("Raven", "Raven.md"), ("Kite", "Projects/Kite.md")}
    assert {(t, p) for s, r, t, p in live if r == "USES"} == expected
    for rel in ("Raven.md", "Projects/Kite.md"):
        write(
            vault,
            rel,
            (vault / rel).read_text(encoding="utf-8").replace("---\n", "---\nstatus: archived\n", 1),
        )
    live = await synced(sync, store, vault, tmp_path, 1)
    assert {(t, p) for s, r, t, p in live if r == "USES"} == expected


async def test_a_relation_from_the_file_name_of_an_archived_entity_makes_that_entity_current_again(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Soak seed 8112526: a concept note named Borealis was renamed to `Delta 88.md` and archived; relating
    "Delta 88" (a Concept) from it found no entity *called* Delta 88 and created a second Concept named
    Borealis, beside the archived one the name answered to. The relation now revives that entity."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Concepts/Delta 88.md", "---\ntype: Concept\nname: Borealis\nstatus: archived\n---\nIdea.\n")
    write(vault, "Projects/Ember.md", "---\ntype: Project\n---\nThe project.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        archived = await rt.store.read(
            lambda c: c.execute("select id from nodes where path = 'Concepts/Delta 88.md'").fetchone()[0]
        )
        done = await relate(rt, "Delta 88", "RELATED_TO", "Ember", source_label="Concept")
        named = await rows(
            rt.store, "select id, status from nodes where label = 'Concept' and name = 'Borealis'"
        )
        live = await targets(rt.store)
    assert done.source_id == archived and done.revived == ("Borealis",)
    assert [tuple(r) for r in named] == [(archived, "active")]
    assert sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md")) == [
        "Concepts/Delta 88.md",
        "Projects/Ember.md",
    ]
    note = (vault / "Concepts/Delta 88.md").read_text(encoding="utf-8")
    assert "status: archived" not in note and "[[Projects/Ember]]" in note
    assert ("Concepts/Delta 88.md", "RELATED_TO", "Ember", "Projects/Ember.md") in live
    assert live == await rebuilt(vault, tmp_path, 0)


async def test_a_relation_to_the_file_name_of_the_source_itself_is_refused(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Soak seed 25112027: the person renamed the note of the concept Kestrel to `Atlas 69.md`; relating Kestrel
    to "Atlas 69" reached Kestrel itself, wrote `[[Atlas 69]]` into its own note and made an edge from it to
    itself that a rebuild does not have. It is refused like a relation to its own name, and nothing changes."""
    from server.runtime import open_runtime
    from server.services.entities import RelationSpec
    from server.services.errors import ServiceError
    from server.services.relate import relate
    from server.services.remember import remember
    from server.settings import Settings

    text = "---\ntype: Concept\nname: Kestrel\n---\nA bird of an idea.\n"
    write(vault, "Technologies/Atlas 69.md", text)
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        with pytest.raises(ServiceError, match="itself"):
            await relate(rt, "Kestrel", "RELATED_TO", "Atlas 69", "Concept", "Project")
        with pytest.raises(ServiceError, match="itself"):
            await remember(rt, "Concept", "Kestrel", relations=[RelationSpec("RELATED_TO", "Atlas 69", None)])
        live = await targets(rt.store)
        nodes = await rt.store.read(lambda c: c.execute("select count(*) from nodes").fetchone()[0])
    assert (vault / "Technologies/Atlas 69.md").read_text(encoding="utf-8").endswith(text.split("---\n")[-1])
    assert "engrama_id" in (vault / "Technologies/Atlas 69.md").read_text(encoding="utf-8")
    assert "[[Atlas 69]]" not in (vault / "Technologies/Atlas 69.md").read_text(encoding="utf-8")
    assert live == set() and nodes == 1
    assert live == await rebuilt(vault, tmp_path, 0)


@pytest.mark.parametrize("path_taken", [False, True])
async def test_reviving_an_entity_whose_note_is_gone_writes_into_the_live_note_of_its_name(
    vault: Path, db_path: Path, tmp_path: Path, path_taken: bool
) -> None:
    """Soak seed 3141592: the project Lumen's note had been renamed `Cedar.md` and then deleted for good (and its
    path taken by another note); a new note for a project Lumen was made since. Relating "Cedar" reached the
    old node, and making it current again created a second note for it (`Projects/Lumen 2.md`): two live
    Projects named Lumen. The entity of that name already has a note, so the write goes there, and the old
    node stays the record of the deleted note."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Projects/Cedar.md", "---\ntype: Project\nname: Lumen\n---\nThe first Lumen.\n")
    write(vault, "Concepts/Fjord.md", "---\ntype: Concept\n---\nAn idea.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        (vault / "Projects/Cedar.md").unlink()
        await sync.sync_vault()
        write(vault, "Projects/Ember 6.md", "---\ntype: Project\nname: Lumen\n---\nThe Lumen of now.\n")
        if path_taken:
            write(vault, "Projects/Cedar.md", "---\ntype: Concept\n---\nAnother note at that path.\n")
        await sync.sync_vault()
        done = await relate(rt, "Cedar", "RELATED_TO", "Fjord", source_label="Project")
        lumens = await rows(
            rt.store, "select status from nodes where label = 'Project' and name = 'Lumen' order by status"
        )
        live = await targets(rt.store)
    assert sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md")) == [
        "Concepts/Fjord.md",
        *(["Projects/Cedar.md"] if path_taken else []),
        "Projects/Ember 6.md",
    ]
    assert [r[0] for r in lumens] == ["active", "archived"]
    assert done.note_path == "Projects/Ember 6.md"
    assert "[[Concepts/Fjord]]" in (vault / "Projects/Ember 6.md").read_text(encoding="utf-8")
    assert ("Projects/Ember 6.md", "RELATED_TO", "Fjord", "Concepts/Fjord.md") in live
    assert live == await rebuilt(vault, tmp_path, 0)


async def test_a_relation_to_an_entity_with_no_note_yet_links_to_that_entitys_own_note(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Soak seed 4711: a second client's assistant made the Concept "Ember 61" in the graph (its note queued for
    the holder), and an assistant related Atlas to it at once. The holder wrote `[[Ember 61]]`, but a note the
    person keeps at the vault's root is called `Ember 61.md`, so the link led there, and the relation the graph
    recorded was not the one the vault says. The target gets its note first and the link names that note."""
    from datetime import date

    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings
    from server.store import outbox_sql
    from server.store.clock import utc_now

    write(vault, "Ember 61.md", "---\ntype: Project\nname: Juniper 15\n---\nThe person's own note.\n")
    write(vault, "Projects/Atlas.md", "---\ntype: Project\n---\nThe project.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        made, _, _ = await rt.store.write(
            outbox_sql.remember_and_queue,
            *("Concept", "Ember 61", {}, "Made by another client.", utc_now(), "", (), []),
            date.today().isoformat(),
        )
        await relate(rt, "Atlas", "APPLIES", "Ember 61", "Project", "Concept")
        concept = await rt.store.get_node(made)
        live = await targets(rt.store)
    assert concept is not None and concept.path == "Concepts/Ember 61.md"
    assert f"engrama_id: {made}" in (vault / "Concepts/Ember 61.md").read_text(encoding="utf-8")
    assert '"[[Concepts/Ember 61]]"' in (vault / "Projects/Atlas.md").read_text(encoding="utf-8")
    assert ("Projects/Atlas.md", "APPLIES", "Ember 61", "Concepts/Ember 61.md") in live
    assert live == await rebuilt(vault, tmp_path, 0)


MAC_CAFE = unicodedata.normalize("NFD", "Café")  # how a Mac's HFS+ (and files synced from it) spell the name
CAFE = unicodedata.normalize("NFC", "Café")  # how it is typed anywhere else


async def test_a_name_in_either_unicode_form_is_one_name(vault: Path, db_path: Path, tmp_path: Path) -> None:
    """A note named on a Mac spells `é` as `e` + a combining accent. `[[Café]]` typed elsewhere, and a tool
    writing "Café", mean that note: before, the link made a second entity and `engrama_remember` created a
    second note `Café.md` beside the person's."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.services.remember import remember
    from server.settings import Settings

    write(vault, f"Concepts/{MAC_CAFE}.md", "---\ntype: Concept\n---\nAn idea named on a Mac.\n")
    write(vault, "Projects/Atlas.md", f"---\ntype: Project\n---\nSee [[{CAFE}]].\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        done = await remember(rt, "Concept", CAFE, observation="Written by the assistant.")
        related = await relate(rt, MAC_CAFE, "RELATED_TO", "Atlas", source_label="Concept")
        names = await rt.store.read(
            lambda c: c.execute("select name from nodes where label = 'Concept'").fetchall()
        )
        live = await targets(rt.store)
    assert sorted(p.name for p in (vault / "Concepts").iterdir()) == [
        f"{MAC_CAFE}.md"
    ]  # the file keeps its name
    assert not done.created and done.path == f"Concepts/{MAC_CAFE}.md"
    assert related.note_path == f"Concepts/{MAC_CAFE}.md"
    assert [r[0] for r in names] == [CAFE]
    note = (vault / f"Concepts/{MAC_CAFE}.md").read_text(encoding="utf-8")
    assert "Written by the assistant." in note and "[[Projects/Atlas]]" in note
    assert ("Projects/Atlas.md", "LINKS_TO", CAFE, f"Concepts/{MAC_CAFE}.md") in live
    assert live == await rebuilt(vault, tmp_path, 0)


async def test_a_database_from_before_composed_names_is_brought_up_to_them(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Migration 11: a database that kept a Mac-named note's name decomposed, and so sent `[[Café]]` typed
    elsewhere to a stub, gets composed names and folded keys, and the link leads to the note, as a rebuild."""
    from server.store import database, sync_sql
    from server.store.clock import utc_now
    from server.store.migrations import apply_migrations

    write(vault, f"Concepts/{MAC_CAFE}.md", "---\ntype: Concept\n---\nAn idea named on a Mac.\n")
    write(vault, "Projects/Atlas.md", f"---\ntype: Project\n---\nSee [[{CAFE}]].\n")
    store = await GraphStore.open(db_path)
    await VaultSync(vault, store, RULES, settle=0).sync_vault()
    await store.close()
    # The database as the code before wrote it: the name and keys as the file spells them, the link to a stub.
    conn, _ = database.connect_sync(db_path, load_vec=False)
    old = MAC_CAFE.casefold()
    conn.execute("update nodes set name = ? where name = ?", (MAC_CAFE, CAFE))
    conn.execute("update node_keys set key = replace(key, ?, ?)", (CAFE.casefold(), old))
    conn.execute("update note_links set key = ? where key = ?", (CAFE.casefold(), CAFE.casefold()))
    sync_sql.reresolve_links(conn, {CAFE.casefold()}, utc_now())
    conn.execute("delete from schema_migrations where number = 11")
    conn.commit()
    stub = conn.execute(
        "select t.status from edges e join nodes t on t.id = e.target where e.valid_to is null"
    ).fetchall()
    assert [r[0] for r in stub] == ["stub"]
    assert apply_migrations(conn) == 1
    conn.commit()
    conn.close()
    store = await GraphStore.open(db_path)
    try:
        live = await targets(store)
        names = await store.read(lambda c: [r[0] for r in c.execute("select name from nodes")])
    finally:
        await store.close()
    assert sorted(names) == ["Atlas", CAFE]  # the stub gave way to the note (found by review: it stayed)
    assert ("Projects/Atlas.md", "LINKS_TO", CAFE, f"Concepts/{MAC_CAFE}.md") in live
    assert live == await rebuilt(vault, tmp_path, 0)


async def test_a_name_differing_only_in_the_case_of_an_accented_letter_is_the_same_name(
    vault: Path, db_path: Path
) -> None:
    """Obsidian matches `[[école]]` to `École.md`; so does a tool. SQLite's `nocase` folds ASCII letters only,
    so "école" made a second note `école.md` beside the person's `École.md` (on a case-sensitive file system)."""
    from server.runtime import open_runtime
    from server.services.remember import remember
    from server.settings import Settings

    write(vault, "Concepts/École.md", "---\ntype: Concept\n---\nA school of thought.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        done = await remember(rt, "Concept", "école", observation="Written by the assistant.")
        count = await rt.store.read(lambda c: c.execute("select count(*) from nodes").fetchone()[0])
    assert not done.created and done.path == "Concepts/École.md" and count == 1
    assert sorted(p.name for p in (vault / "Concepts").iterdir()) == ["École.md"]
    assert "Written by the assistant." in (vault / "Concepts/École.md").read_text(encoding="utf-8")


async def test_a_file_name_with_stray_spaces_is_the_name_a_tool_gives(vault: Path, db_path: Path) -> None:
    """A tool's name is trimmed with its inner spaces made one; a note's name now is too. `Topic .md` (a space
    kept before `.md`) was the entity "Topic " and a write for "Topic" created a second note `Topic.md`."""
    from server.runtime import open_runtime
    from server.services.remember import remember
    from server.settings import Settings

    write(vault, "Concepts/Topic .md", "---\ntype: Concept\n---\nA space before the extension.\n")
    write(vault, "Concepts/Two.md", "---\ntype: Concept\nname: ' Two   words '\n---\nA padded name.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        first = await remember(rt, "Concept", "Topic", observation="Written by the assistant.")
        second = await remember(rt, "Concept", "two words", observation="Written by the assistant.")
        names = await rt.store.read(lambda c: sorted(r[0] for r in c.execute("select name from nodes")))
    assert (first.path, second.path) == ("Concepts/Topic .md", "Concepts/Two.md")
    assert names == ["Topic", "Two words"]
    assert sorted(p.name for p in (vault / "Concepts").iterdir()) == ["Topic .md", "Two.md"]


async def test_a_tool_write_by_a_notes_file_name_goes_into_that_note(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """`Atlas.md` says `name: Atlas Project`. Obsidian shows it as Atlas, and `[[Atlas]]` leads there; relating
    "Atlas" already wrote into it. Remembering "Atlas" created `Atlas 2.md`, a second entity the person's links
    never reach. A tool's name now reaches a note by its file name too, after its name and aliases."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.services.remember import remember
    from server.settings import Settings

    write(vault, "Concepts/Atlas.md", "---\ntype: Concept\nname: Atlas Project\n---\nThe person's note.\n")
    write(vault, "Concepts/Other.md", "---\ntype: Concept\n---\nSee [[Atlas]].\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        related = await relate(rt, "Atlas", "RELATED_TO", "Other", source_label="Concept")
        done = await remember(rt, "Concept", "Atlas", observation="Written by the assistant.")
        live = await targets(rt.store)
    assert related.note_path == done.path == "Concepts/Atlas.md" and not done.created
    assert sorted(p.name for p in (vault / "Concepts").iterdir()) == ["Atlas.md", "Other.md"]
    assert "Written by the assistant." in (vault / "Concepts/Atlas.md").read_text(encoding="utf-8")
    assert live == await rebuilt(vault, tmp_path, 0)


async def test_a_relation_links_its_targets_note_by_path_and_keeps_leading_there_when_notes_take_its_names(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """`Projects/Borealis.md` says `name: Iris`. Obsidian has nothing for `[[Iris]]`: written by its name, the
    link led there only in engrama's eyes, and went to `Iris.md` once the person made one (soak seed 77001).
    Written by file name, it went to another `Borealis.md` made in another folder later (soak seed 5151). A
    relation names the note by its path, which no note made later can take."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Projects/Borealis.md", "---\ntype: Project\nname: Iris\n---\nThe person's project.\n")
    write(vault, "Notes/Meridian.md", "---\ntype: Note\n---\nA note.\n")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        await relate(rt, "Meridian", "RELATED_TO", "Iris", source_label="Note")
        text = (vault / "Notes/Meridian.md").read_text(encoding="utf-8")
        assert '"[[Projects/Borealis]]"' in text and "[[Iris]]" not in text
        write(
            vault,
            "Technologies/Iris.md",
            "---\ntype: Technology\n---\nAnother note, named Iris by its file.\n",
        )
        write(vault, "Archive/Borealis.md", "---\ntype: Note\n---\nAnother note with that file name.\n")
        live = await synced(sync, rt.store, vault, tmp_path, 0)
    assert ("Notes/Meridian.md", "RELATED_TO", "Iris", "Projects/Borealis.md") in live


async def test_a_relation_already_written_by_its_targets_name_is_not_added_again_by_file_name(
    vault: Path, db_path: Path
) -> None:
    """A note written by an earlier version holds `"[[Iris]]"` for the entity whose note is `Borealis.md`
    (`name: Iris`). Relating the two again finds the relation there and adds no `"[[Borealis]]"` beside it."""
    from server.runtime import open_runtime
    from server.services.relate import relate
    from server.settings import Settings

    write(vault, "Projects/Borealis.md", "---\ntype: Project\nname: Iris\n---\nThe person's project.\n")
    meridian = '---\ntype: Note\nrelations:\n  RELATED_TO:\n    - "[[Iris]]"\n---\nA note.\n'
    write(vault, "Notes/Meridian.md", meridian)
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        before = (vault / "Notes/Meridian.md").read_bytes()
        done = await relate(rt, "Meridian", "RELATED_TO", "Iris", source_label="Note")
        assert (vault / "Notes/Meridian.md").read_bytes() == before
        assert not done.created
