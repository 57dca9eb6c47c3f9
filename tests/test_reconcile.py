"""The vault sync engine on real temporary vaults and real SQLite files (DESIGN.md sections 2-4)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from profiles.loader import load_profile
from server.runtime import note_rules
from server.store import GraphStore
from vault_sync.identify import read_id
from vault_sync.reconcile import VaultSync


def write(vault: Path, rel: str, text: str | bytes) -> Path:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def engine(vault: Path, store: GraphStore) -> VaultSync:
    return VaultSync(vault, store, note_rules(load_profile("base", ["teaching"])))


async def graph_snapshot(store: GraphStore) -> tuple[set, set]:
    """Nodes as (id, label, name, status, path) and open edges as (source name, type, target name)."""

    def read(conn):
        nodes = {
            (r["id"] if r["status"] != "stub" else "stub", r["label"], r["name"], r["status"], r["path"])
            for r in conn.execute("select id, label, name, status, path from nodes")
        }
        edges = {
            (r[0], r[1], r[2])
            for r in conn.execute(
                "select s.name, e.type, t.name from edges e join nodes s on s.id = e.source "
                "join nodes t on t.id = e.target where e.valid_to is null"
            )
        }
        return nodes, edges

    return await store.read(read)


SAMPLE = {
    "Projects/Engrama.md": '---\ntype: Project\nrelations:\n  USES: ["[[SQLite]]"]\n---\nSee [[Idempotent writes]].\n',
    "Technologies/SQLite.md": "---\ntype: Technology\naliases: [sqlite3]\n---\nEmbedded database.\n",
    "Concepts/Idempotent writes.md": "Repeatable. Links to [[Missing Note]] and [[sqlite3|the db]].\n",
    "Courses/Databases.md": "---\ntype: Course\nrelations:\n  COVERS: [[Idempotent writes]]\n---\n",
}


async def test_first_sync_creates_nodes_and_inserts_ids(vault: Path, store: GraphStore) -> None:
    for rel, text in SAMPLE.items():
        write(vault, rel, text)
    report = await engine(vault, store).sync_vault()
    assert (report.scanned, report.created, len(report.ids_injected), report.errors) == (4, 4, 4, [])
    for rel in SAMPLE:
        assert read_id((vault / rel).read_bytes()) is not None
    nodes, edges = await graph_snapshot(store)
    assert ("Engrama", "USES", "SQLite") in edges
    assert ("Idempotent writes", "LINKS_TO", "SQLite") in edges  # resolved through the alias
    assert ("Databases", "COVERS", "Idempotent writes") in edges
    assert any(n[2] == "Missing Note" and n[3] == "stub" for n in nodes)
    again = await engine(vault, store).sync_vault()
    assert (again.unchanged, again.created, again.updated) == (4, 0, 0)


async def test_deleting_the_database_and_syncing_again_rebuilds_the_same_graph(
    vault: Path, tmp_path: Path
) -> None:
    for rel, text in SAMPLE.items():
        write(vault, rel, text)
    first_db = tmp_path / "first.db"
    store = await GraphStore.open(first_db)
    await engine(vault, store).sync_vault()
    before = await graph_snapshot(store)
    await store.close()
    files_before = {rel: (vault / rel).read_bytes() for rel in SAMPLE}

    rebuilt = await GraphStore.open(tmp_path / "rebuilt.db")
    report = await engine(vault, rebuilt).sync_vault()
    assert report.ids_injected == []  # ids come from the notes: nothing is written the second time
    assert await graph_snapshot(rebuilt) == before
    assert {rel: (vault / rel).read_bytes() for rel in SAMPLE} == files_before
    await rebuilt.close()


async def test_edit_rename_delete_and_revive(vault: Path, store: GraphStore) -> None:
    sync = engine(vault, store)
    path = write(vault, "Notes/Plan.md", "---\ntype: Project\n---\nFirst draft.\n")
    created = await sync.sync_path("Notes/Plan.md")
    node_id = created.id
    assert created.action == "created" and node_id

    path.write_text(path.read_text(encoding="utf-8") + "More [[Ideas]].\n", encoding="utf-8")
    assert (await sync.sync_path("Notes/Plan.md")).action == "updated"
    assert {e[2] for e in (await graph_snapshot(store))[1]} == {"Ideas"}

    path.rename(vault / "Notes" / "Roadmap.md")
    report = await sync.sync_vault()
    assert (report.moved, report.archived, report.created) == (1, 0, 0)
    [node] = await store.find_nodes("Roadmap")
    assert node.id == node_id and node.path == "Notes/Roadmap.md"

    saved = (vault / "Notes" / "Roadmap.md").read_bytes()
    (vault / "Notes" / "Roadmap.md").unlink()
    assert (await sync.sync_path("Notes/Roadmap.md")).action == "archived"
    archived = await store.get_node(node_id)
    assert archived is not None and archived.status == "archived"
    assert (await graph_snapshot(store))[1] == set()  # its edges are closed

    write(vault, "Notes/Roadmap.md", saved)
    assert (await sync.sync_path("Notes/Roadmap.md")).id == node_id
    revived = await store.get_node(node_id)
    assert revived is not None and revived.status == "active"


async def test_a_copied_note_gets_a_fresh_id_and_the_original_keeps_its_own(
    vault: Path, store: GraphStore
) -> None:
    sync = engine(vault, store)
    write(vault, "Notes/Original.md", "---\ntype: Concept\n---\nText.\n")
    original = (await sync.sync_path("Notes/Original.md")).id
    shutil.copy(vault / "Notes" / "Original.md", vault / "Notes" / "Original copy.md")
    report = await sync.sync_vault()
    assert report.ids_injected == ["Notes/Original copy.md"]
    copy_id = read_id((vault / "Notes" / "Original copy.md").read_bytes())
    assert copy_id and copy_id != original
    assert read_id((vault / "Notes" / "Original.md").read_bytes()) == original
    assert len(await store.find_nodes("Original")) == 1 and len(await store.find_nodes("Original copy")) == 1


async def test_a_symlink_to_a_note_never_changes_that_notes_id_and_is_not_a_second_note(
    vault: Path, store: GraphStore
) -> None:
    """Found by review: a link `Link.md -> Real.md` was listed as a note of its own holding the same id, so
    every sync took one of the two for a copy and wrote a new id into Real.md (through the link), turn about;
    searches found the text twice, and the link's copy went stale (the watcher sees Real.md change)."""
    sync = engine(vault, store)
    write(vault, "Real.md", "---\ntitle: Real\n---\nmy wombat text\n")
    first = await sync.sync_vault()
    real_id = read_id((vault / "Real.md").read_bytes())
    assert first.ids_injected == ["Real.md"] and real_id
    os.symlink("Real.md", vault / "Link.md")
    for _ in range(3):
        report = await sync.sync_vault()
        assert report.ids_injected == [] and report.created == 0
        assert read_id((vault / "Real.md").read_bytes()) == real_id
    assert (await sync.sync_path("Link.md")).action == "ignored"
    assert [(n.id, n.path) for n in await store.find_nodes("Real")] == [(real_id, "Real.md")]
    assert await store.find_nodes("Link") == []


async def test_a_copy_of_an_archived_note_gets_a_fresh_id_too(vault: Path, store: GraphStore) -> None:
    sync = engine(vault, store)
    write(vault, "Notes/Old plan.md", "---\ntype: Concept\nstatus: archived\n---\nShelved.\n")
    original = (await sync.sync_path("Notes/Old plan.md")).id
    assert (await store.get_node(original)).status == "archived"  # type: ignore[union-attr]
    shutil.copy(vault / "Notes" / "Old plan.md", vault / "Notes" / "New plan.md")
    report = await sync.sync_vault()
    assert report.ids_injected == ["Notes/New plan.md"] and report.moved == 0
    assert read_id((vault / "Notes" / "Old plan.md").read_bytes()) == original
    assert (await store.get_node(original)).path == "Notes/Old plan.md"  # type: ignore[union-attr]


async def test_trash_dot_folders_and_temp_files(vault: Path, store: GraphStore) -> None:
    sync = engine(vault, store)
    write(vault, "Notes/Gone.md", "Soon in the trash.\n")
    write(vault, ".obsidian/workspace.md", "not a note\n")
    write(vault, "Notes/.Gone.md.swp", "swap\n")
    write(vault, "Notes/image.png", b"\x89PNG")
    report = await sync.sync_vault()
    assert report.scanned == 1
    (vault / ".trash").mkdir()
    (vault / "Notes" / "Gone.md").rename(vault / ".trash" / "Gone.md")
    report = await sync.sync_vault()
    assert report.archived == 1
    [node] = await store.find_nodes("Gone", include_archived=True)
    assert node.status == "archived"


async def test_dry_run_writes_nothing(vault: Path, store: GraphStore) -> None:
    path = write(vault, "Notes/New.md", "No id yet.\n")
    report = await engine(vault, store).sync_vault(dry_run=True)
    assert (report.created, report.ids_injected) == (1, ["Notes/New.md"])
    assert path.read_bytes() == b"No id yet.\n"
    assert await store.find_nodes("New") == []


BAD_NOTES: dict[str, bytes] = {
    "Bad/invalid yaml.md": b"---\ntitle: [unclosed\n---\nbody\n",
    "Bad/latin1.md": "caf\u00e9 cr\u00e8me".encode("latin-1"),
    "Bad/binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "Bad/unterminated.md": b"---\ntype: Project\nno closing line\n",
    "Bad/list frontmatter.md": b"---\n- a\n- b\n---\n",
}


async def test_bad_notes_are_reported_left_byte_identical_and_the_rest_syncs(
    vault: Path, store: GraphStore
) -> None:
    for rel, data in BAD_NOTES.items():
        write(vault, rel, data)
    huge = write(vault, "Bad/huge.md", b"x" * (20 * 1024 * 1024))
    outside = vault.parent / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    os.symlink(outside, vault / "Bad" / "escape.md")
    os.symlink(vault / "Bad" / "loop-b.md", vault / "Bad" / "loop-a.md")
    os.symlink(vault / "Bad" / "loop-a.md", vault / "Bad" / "loop-b.md")
    write(vault, "Good/Fine.md", "All good.\n")

    report = await engine(vault, store).sync_vault()

    failed = {e.path: e.error for e in report.errors}
    for rel in [*BAD_NOTES, "Bad/huge.md", "Bad/escape.md", "Bad/loop-a.md", "Bad/loop-b.md"]:
        assert rel in failed, f"{rel} was not reported"
        assert failed[rel], f"{rel} has no reason"
    assert "line" in failed["Bad/invalid yaml.md"]
    assert "UTF-8" in failed["Bad/latin1.md"]
    assert "MiB" in failed["Bad/huge.md"]
    for rel, data in BAD_NOTES.items():
        assert (vault / rel).read_bytes() == data
    assert huge.stat().st_size == 20 * 1024 * 1024
    assert outside.read_text(encoding="utf-8") == "secret\n"
    assert report.created == 1 and [n.name for n in await store.find_nodes("Fine")] == ["Fine"]


async def test_a_malformed_note_is_fixed_in_obsidian_and_then_syncs(vault: Path, store: GraphStore) -> None:
    sync = engine(vault, store)
    path = write(vault, "Notes/Draft.md", "---\ntype: [Project\n---\nbody\n")
    outcome = await sync.sync_path("Notes/Draft.md")
    assert outcome.action == "failed" and path.read_bytes() == b"---\ntype: [Project\n---\nbody\n"
    path.write_text("---\ntype: Project\n---\nbody\n", encoding="utf-8")
    assert (await sync.sync_path("Notes/Draft.md")).action == "created"


async def test_paths_outside_the_vault_are_refused(vault: Path, store: GraphStore) -> None:
    from vault_sync.errors import PathOutsideVault

    with pytest.raises(PathOutsideVault):
        await engine(vault, store).sync_path("../outside.md")


def _set_mtime(path: Path, seconds_ago: float) -> None:
    moment = path.stat().st_mtime - seconds_ago
    os.utime(path, (moment, moment))


@pytest.mark.parametrize(
    "new_note_has_an_id", [False, True], ids=["new note without id", "new note with its own id"]
)
async def test_a_note_renamed_while_a_new_one_took_its_old_name_keeps_its_identity(
    vault: Path, store: GraphStore, new_note_has_an_id: bool
) -> None:
    """Found by review: a `git pull` (or a sync client) brings another device's rename of Ideas.md to
    Zettel/Ideas.md and a new Ideas.md at once. The pass took the files oldest first; the new Ideas.md came
    first and took over the node of its path (the old note's id was written into it, or the node was re-keyed
    to the new note's id with the old note's history), and the renamed note, carrying the old id, was then
    taken for a copy and given a fresh one: its identity went to the other note."""
    sync = engine(vault, store)
    write(vault, "Ideas.md", "---\nstatus: draft\n---\nGrow tomatoes on the balcony.\n")
    old_id = (await sync.sync_path("Ideas.md")).id
    renamed = (vault / "Ideas.md").read_bytes()
    (vault / "Zettel").mkdir()
    (vault / "Ideas.md").rename(vault / "Zettel/Ideas.md")
    new_id = "01a2b3c4-0000-7000-8000-000000000001"
    header = f"---\nengrama_id: {new_id}\n---\n" if new_note_has_an_id else ""
    write(vault, "Ideas.md", header + "Chess openings to learn.\n")
    _set_mtime(vault / "Ideas.md", 60)  # written first by the pull: the pass meets it first
    report = await sync.sync_vault()
    assert not report.errors
    assert (vault / "Zettel/Ideas.md").read_bytes() == renamed  # its id stays; no byte of it changes
    moved = await store.get_node(old_id)
    assert moved is not None and (moved.path, moved.status) == ("Zettel/Ideas.md", "active")
    assert moved.properties == {"status": "draft"}
    taken = read_id((vault / "Ideas.md").read_bytes())
    assert taken is not None and taken != old_id
    if new_note_has_an_id:
        assert taken == new_id
    fresh = await store.get_node(taken)
    assert fresh is not None and (fresh.path, fresh.properties) == ("Ideas.md", {})
    assert sorted(n.path or "" for n in await store.find_nodes("Ideas")) == ["Ideas.md", "Zettel/Ideas.md"]


JSON_NOTE = '---\n{\n  "tags": ["journal"],\n  "publish": false\n}\n---\nSailboats on the lake at dawn.\n'


@pytest.mark.parametrize("kind", ["JSON frontmatter", "read-only"])
async def test_a_note_that_cannot_take_an_id_line_is_indexed_all_the_same_and_left_as_it_is(
    vault: Path, store: GraphStore, kind: str
) -> None:
    """Found by review: a note whose id line could not be written (Obsidian's documented JSON frontmatter,
    a one-line flow mapping) was reported as an error and never indexed, and a note the person made
    read-only was rewritten (a rename needs only the folder's permission). Both are now indexed with their
    id kept in the database, their bytes (and mode) untouched, and the report says why."""
    sync = engine(vault, store)
    path = write(
        vault, "Journal.md", JSON_NOTE if kind == "JSON frontmatter" else "# Journal\nSailboats at dawn.\n"
    )
    if kind == "read-only":
        path.chmod(0o444)
    before, mode = path.read_bytes(), path.stat().st_mode
    first = await sync.sync_vault()
    assert (first.created, first.errors, first.ids_injected) == (1, [], [])
    assert [e.path for e in first.ids_not_written] == ["Journal.md"]
    assert (path.read_bytes(), path.stat().st_mode) == (before, mode)
    [node] = await store.find_nodes("Journal")
    assert node.path == "Journal.md"
    found = await store.read(
        lambda c: c.execute(
            "select c.node_id from chunks_fts f join chunks c on c.id = f.rowid where chunks_fts match 'sailboats'"
        ).fetchall()
    )
    assert [r[0] for r in found] == [node.id]
    again = await sync.sync_vault()  # nothing to do until the note changes: no attempt, no report
    assert (again.unchanged, again.ids_not_written, again.errors) == (1, [], [])
    assert [n.id for n in await store.find_nodes("Journal")] == [node.id]


@pytest.mark.parametrize("copy_name", ["Note copy.md", "Aardvark.md"], ids=["copy after", "copy sorts first"])
async def test_a_copy_and_the_renamed_original_the_original_keeps_its_identity(
    vault: Path, store: GraphStore, copy_name: str
) -> None:
    """Found by review: with the server off, the person duplicated a note, renamed the original and went on
    editing it. The pass met the copy first (older, or first by name), took it for the note moved, and gave
    the renamed original, the note the person kept working in, a new id. The original is the same file
    (inode) the graph read; the copy is another."""
    sync = engine(vault, store)
    write(vault, "Note.md", "---\nstatus: draft\n---\nThe plan.\n")
    node_id = (await sync.sync_path("Note.md")).id
    _set_mtime(vault / "Note.md", 120)
    shutil.copy2(vault / "Note.md", vault / copy_name)  # a Finder copy keeps the time
    os.rename(vault / "Note.md", vault / "Zettel.md")
    with open(vault / "Zettel.md", "a", encoding="utf-8") as note:  # edited in place since
        note.write("More of the plan.\n")
    report = await sync.sync_vault()
    assert not report.errors and report.ids_injected == [copy_name]
    assert read_id((vault / "Zettel.md").read_bytes()) == node_id
    kept = await store.get_node(node_id)
    assert kept is not None and (kept.path, kept.properties) == ("Zettel.md", {"status": "draft"})
    copy_id = read_id((vault / copy_name).read_bytes())
    assert copy_id not in (None, node_id)


@pytest.mark.parametrize("by", ["a walk of the vault", "the watcher"])
async def test_a_backup_of_a_note_restored_at_its_old_path_does_not_take_its_id(
    vault: Path, store: GraphStore, by: str
) -> None:
    """Found by review: an id is derived from a note's path and bytes (two machines give a synced note the same
    one), so the backup of a note from before its id line, restored where the note was (`cp -p`, Time Machine)
    after the note was renamed, derived the very id the renamed note carries and took its node away."""
    sync = engine(vault, store)
    old = write(vault, "P.md", "---\nstatus: draft\n---\nThe plan.\n")
    _set_mtime(old, 3600)
    backup, stat = old.read_bytes(), old.stat()
    node_id = (await sync.sync_path("P.md")).id
    assert read_id(old.read_bytes()) == node_id
    os.rename(old, vault / "Garden.md")
    await sync.sync_vault()
    old.write_bytes(backup)  # restored with its time
    os.utime(old, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    if by == "the watcher":
        await sync.sync_path("P.md")
    else:
        await sync.sync_vault()
    await sync.sync_vault()
    assert read_id((vault / "Garden.md").read_bytes()) == node_id
    kept = await store.get_node(node_id)
    assert kept is not None and kept.path == "Garden.md" and kept.status == "active"
    restored = read_id(old.read_bytes())
    assert restored not in (None, node_id)
    again = await store.get_node(restored)
    assert again is not None and again.path == "P.md"


async def test_a_vault_restored_with_its_times_keeps_its_notes_through_a_folder_rename(
    vault: Path, store: GraphStore
) -> None:
    """Found by review (a long session on a vault copied with `cp -a`): size and time matched, so the walk
    never looked at the files again and kept their old inode numbers; every later move then looked like a
    copy of the note, and renaming a folder archived all its notes (and closed their relations) before
    bringing them back, seconds later. The walk now records the new inode of a file it finds unchanged."""
    for n in range(5):
        write(vault, f"Tech/Tool {n}.md", f"Tool {n} is used by [[Tool {(n + 1) % 5}]].\n")
    sync = engine(vault, store)
    await sync.sync_vault()
    restored = vault.parent / "restored"
    shutil.copytree(vault, restored, copy_function=shutil.copy2)  # times kept, new files
    shutil.rmtree(vault)
    restored.rename(vault)
    report = await sync.sync_vault()
    assert report.unchanged == 5 and report.errors == []
    os.rename(vault / "Tech", vault / "Stack")
    later: dict[str, None] = {}  # the watcher's way: the folder that appeared, the one gone, then what waited
    await sync.sync_vault(folder="Stack", later=later)
    for n in range(5):
        await sync.sync_path(f"Tech/Tool {n}.md", later=later)
    await sync.settle_later(later)
    rows = await store.read(
        lambda c: c.execute("select path, status from nodes where status != 'stub' order by path").fetchall()
    )
    assert [(r["path"], r["status"]) for r in rows] == [(f"Stack/Tool {n}.md", "active") for n in range(5)]
    closed = await store.read(
        lambda c: c.execute("select count(*) from edges where valid_to is not null").fetchone()
    )
    assert closed[0] == 0  # no relation closed and opened again


@pytest.mark.parametrize("order", ["gone first", "new first"])
async def test_a_note_renamed_keeps_its_relations_open_when_both_paths_come_in_one_batch(
    vault: Path, store: GraphStore, order: str
) -> None:
    """Found by review of a long session: the watcher hands a rename's two paths over together; the old path
    was archived before the new one was applied, so every outgoing relation of the note was closed and a copy
    opened the same second (15% more edge rows after a day of renames)."""
    write(vault, "Atlas.md", "Atlas uses [[SQLite]] and [[Zig]].\n")
    sync = engine(vault, store)
    await sync.sync_vault()
    os.rename(vault / "Atlas.md", vault / "Atlas build.md")
    paths = ["Atlas.md", "Atlas build.md"]
    report = await sync.sync_paths(paths if order == "gone first" else paths[::-1])
    assert report.errors == [] and report.archived == 0
    rows = await store.read(lambda c: c.execute("select count(*), count(valid_to) from edges").fetchone())
    assert (rows[0], rows[1]) == (2, 0)  # the two relations, never closed
    path = await store.read(
        lambda c: c.execute("select path from nodes where name = 'Atlas build'").fetchone()
    )
    assert path is not None and path[0] == "Atlas build.md"
