"""A tool write right after the person moved, renamed, trashed or deleted a note, or after `engrama_forget`,
keeps one note and one identity per entity (issue 12, items 2 and 3).

In process: a real vault and database, no watcher, so every tool call lands "at once" after the person's
change, before any reconcile has seen it. The stdio end-to-end repros are in test_identity_stdio.py.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.runtime import Runtime, open_runtime
from server.services.entities import RelationSpec
from server.services.errors import ServiceError
from server.services.forget import forget
from server.services.relate import relate
from server.services.remember import remember
from server.settings import Settings
from server.store import Node, history_sql
from vault_sync.identify import read_id
from vault_sync.locate import Located, candidate_paths, locate_note
from vault_sync.model import FileState
from vault_sync.scan import StatEntry
from vault_sync.writer import restore_from_trash


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        yield runtime


def move(vault: Path, old: str, new: str) -> None:
    """What Obsidian's file explorer does: one rename, folders made as needed (size and mtime kept)."""
    (vault / new).parent.mkdir(parents=True, exist_ok=True)
    os.rename(vault / old, vault / new)


def ids_in_vault(vault: Path) -> dict[str, str | None]:
    """Every note of the vault (its trash too) and the id it holds."""
    return {p.relative_to(vault).as_posix(): read_id(p.read_bytes()) for p in sorted(vault.rglob("*.md"))}


async def entities(rt: Runtime, label: str, name: str) -> list[Node]:
    return [n for n in await rt.store.find_nodes(name, label, include_archived=True) if n.name == name]


async def rebuilt(vault: Path, tmp_path: Path, label: str, name: str) -> list[Node]:
    """The entities called `name` in a graph rebuilt from the vault alone (a new database)."""
    settings = Settings(vault=vault, db_path=tmp_path / "rebuilt.db", watch=False)
    async with open_runtime(settings) as fresh:
        report = await fresh.require_sync().sync_vault()
        assert not report.errors
        return await entities(fresh, label, name)


# --- item 2: moved, renamed, trashed, deleted ---------------------------------------------------------------


async def test_a_note_moved_just_before_remember_keeps_its_id_and_takes_the_observation(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    made = await remember(rt, "Concept", "Topic", {}, "First seen in the design review.")
    move(vault, "Concepts/Topic.md", "Archive/Topic.md")
    done = await remember(rt, "Concept", "Topic", {}, "Came up again in the retro.")
    assert (done.id, done.created, done.path) == (made.id, False, "Archive/Topic.md")
    assert "moved from Concepts/Topic.md" in done.message
    assert ids_in_vault(vault) == {"Archive/Topic.md": made.id}  # no new file in Concepts/
    text = (vault / "Archive/Topic.md").read_text(encoding="utf-8")
    assert "First seen in the design review." in text and "Came up again in the retro." in text
    assert [(n.id, n.status, n.path) for n in await entities(rt, "Concept", "Topic")] == [
        (made.id, "active", "Archive/Topic.md")
    ]
    assert [(n.id, n.status) for n in await rebuilt(vault, tmp_path, "Concept", "Topic")] == [
        (made.id, "active")
    ]


async def test_a_note_renamed_just_before_relate_takes_the_relation(rt: Runtime, vault: Path) -> None:
    made = await remember(rt, "Concept", "Topic", {}, "An idea.")
    move(vault, "Concepts/Topic.md", "Concepts/Subject.md")
    done = await relate(rt, "Topic", "RELATED_TO", "Other", target_label="Concept")
    assert (done.source_id, done.note_path, done.created) == (made.id, "Concepts/Subject.md", True)
    assert ids_in_vault(vault) == {"Concepts/Subject.md": made.id}
    assert '"[[Other]]"' in (vault / "Concepts/Subject.md").read_text(encoding="utf-8")
    node = await rt.store.get_node(made.id)
    assert node is not None and (node.status, node.path) == ("active", "Concepts/Subject.md")


async def test_a_trashed_note_comes_back_when_remembered_and_stays_one_entity_after_a_rebuild(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    made = await remember(rt, "Concept", "Topic", {"summary": "kept"}, "Before the trash.")
    move(vault, "Concepts/Topic.md", ".trash/Topic.md")
    done = await remember(rt, "Concept", "Topic", {}, "After the trash.")
    assert (done.id, done.path) == (made.id, "Concepts/Topic.md")
    assert "trash" in done.message and "back at Concepts/Topic.md" in done.message
    assert ids_in_vault(vault) == {"Concepts/Topic.md": made.id}  # out of the trash: nothing to restore
    text = (vault / "Concepts/Topic.md").read_text(encoding="utf-8")
    assert "Before the trash." in text and "After the trash." in text and "summary: kept" in text
    assert [(n.id, n.status) for n in await entities(rt, "Concept", "Topic")] == [(made.id, "active")]
    assert [(n.id, n.status) for n in await rebuilt(vault, tmp_path, "Concept", "Topic")] == [
        (made.id, "active")
    ]


async def test_a_trashed_note_the_watcher_already_archived_is_revived_from_the_trash(
    rt: Runtime, vault: Path
) -> None:
    made = await remember(rt, "Concept", "Topic", {}, "Before the trash.")
    move(vault, "Concepts/Topic.md", ".trash/Topic.md")
    await rt.require_sync().sync_path("Concepts/Topic.md")  # the watcher saw it go: archived
    done = await remember(rt, "Concept", "Topic", {}, "After the trash.")
    assert (done.id, done.path, done.revived) == (made.id, "Concepts/Topic.md", True)
    assert ids_in_vault(vault) == {"Concepts/Topic.md": made.id}
    assert [(n.id, n.status) for n in await entities(rt, "Concept", "Topic")] == [(made.id, "active")]


async def test_a_note_deleted_for_good_is_written_anew_with_a_fresh_id(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    made = await remember(rt, "Concept", "Topic", {}, "Old words.")
    kept = (vault / "Concepts/Topic.md").read_bytes()
    (vault / "Concepts/Topic.md").unlink()
    done = await remember(rt, "Concept", "Topic", {}, "New words.")
    assert done.id != made.id and done.created and not done.revived and "new id" in done.message
    assert ids_in_vault(vault) == {"Concepts/Topic.md": done.id}
    old = await rt.store.get_node(made.id)
    assert old is not None and old.status == "archived"
    # The deleted note comes back (git, a sync tool, a backup): it keeps its own id, and so does the new one.
    (vault / "Restored").mkdir()
    (vault / "Restored/Topic.md").write_bytes(kept)
    await rt.require_sync().sync_vault()
    assert ids_in_vault(vault) == {"Concepts/Topic.md": done.id, "Restored/Topic.md": made.id}
    assert (vault / "Restored/Topic.md").read_bytes() == kept


async def test_a_write_for_an_entity_whose_path_a_new_note_took_never_gives_its_id_to_a_second_file(
    rt: Runtime, vault: Path
) -> None:
    """Found by the soak (seed 777): the person trashed a note, then made a new one at its path; a queued write
    for the old entity (a follower's, made before it saw the new note) used to create `Name 2.md` with the old
    id while the trashed file still held it, and the person's restore from the trash then lost its id as a
    "copy". Now the write finds the old note by its id: out of the trash, it takes the write."""
    from server.services.entities import write_entity

    made = await remember(rt, "Concept", "Topic", {}, "The first note.")
    move(vault, "Concepts/Topic.md", ".trash/Topic.md")
    await rt.require_sync().sync_path("Concepts/Topic.md")  # the watcher saw it go: archived
    # The new note at its path is another entity (a Concept there would be the Concept Topic now, and take
    # the writes: `test_reviving_an_entity_whose_note_is_gone_writes_into_the_live_note_of_its_name`).
    (vault / "Concepts/Topic.md").write_text("---\ntype: Project\n---\nA new note.\n", encoding="utf-8")
    await rt.require_sync().sync_path("Concepts/Topic.md")  # the new note takes the path
    old = await rt.store.get_node(made.id)
    assert old is not None and old.path is None
    done = await write_entity(rt, "Concept", "Topic", {}, "Written for the old one.", [], target=old)
    assert done.id == made.id and "trash" in done.message
    ids = ids_in_vault(vault)
    assert sorted(ids.values()).count(made.id) == 1 and ".trash/Topic.md" not in ids
    assert "Written for the old one." in (vault / done.path).read_text(encoding="utf-8")
    # Deleted for good instead: a new note with a fresh id, the old node kept, archived.
    (vault / done.path).unlink()
    await rt.require_sync().sync_path(done.path)
    gone = await rt.store.get_node(made.id)
    assert gone is not None
    again = await write_entity(rt, "Concept", "Topic", {}, "Written again.", [], target=gone)
    assert again.id != made.id and "new id" in again.message
    kept = await rt.store.get_node(made.id)
    assert kept is not None and kept.status == "archived"
    assert made.id not in ids_in_vault(vault).values()


async def test_a_new_note_at_a_renamed_notes_path_keeps_its_text_and_the_write_goes_to_the_renamed_one(
    rt: Runtime, vault: Path
) -> None:
    """Found by review: while no server ran, the person renamed the entity's note and started a new one at
    its old path. A write right after start-up (before the catch-up read either) edited the file at the
    recorded path: the person's `status: draft` was replaced unrecorded, the observation landed in the wrong
    note, and the renamed note lost its identity as a "copy". Now the file must be the entity's note."""
    made = await remember(rt, "Project", "Atlas", {"status": "active"}, "The original project note.")
    move(vault, "Projects/Atlas.md", "Projects/Atlas 2023.md")
    new_text = b"---\ntype: Project\nstatus: draft\n---\nA new note the person started: an idea sketch.\n"
    (vault / "Projects/Atlas.md").write_bytes(new_text)
    done = await remember(rt, "Project", "Atlas", {"status": "shipped"}, "Shipped v2 of the original.")
    assert (done.id, done.path) == (made.id, "Projects/Atlas 2023.md")
    assert (vault / "Projects/Atlas.md").read_bytes() == new_text
    renamed = (vault / "Projects/Atlas 2023.md").read_text(encoding="utf-8")
    assert "status: shipped" in renamed and "Shipped v2 of the original." in renamed
    assert read_id(renamed.encode()) == made.id


async def test_a_write_never_lands_in_a_file_at_the_entitys_path_holding_another_notes_id(
    rt: Runtime, vault: Path
) -> None:
    """The person swapped two notes' files (or synced another device's note over this path): the file at the
    recorded path is another entity's note. Writing the entity's keys into it would damage that note."""
    atlas = await remember(rt, "Project", "Atlas", {"status": "active"}, "Atlas's own words.")
    other = await remember(rt, "Project", "Borealis", {"status": "paused"}, "Borealis's own words.")
    assert other.path is not None
    borealis = (vault / other.path).read_bytes()
    move(vault, "Projects/Atlas.md", "Elsewhere/Atlas.md")
    os.replace(vault / other.path, vault / "Projects/Atlas.md")  # Borealis's file now where Atlas's was
    done = await remember(rt, "Project", "Atlas", {"status": "shipped"}, "Atlas again.")
    assert (done.id, done.path) == (atlas.id, "Elsewhere/Atlas.md")
    assert (vault / "Projects/Atlas.md").read_bytes() == borealis
    assert "Atlas again." in (vault / "Elsewhere/Atlas.md").read_text(encoding="utf-8")


async def test_a_changed_note_without_an_id_at_the_entitys_path_is_read_before_it_is_written(
    rt: Runtime, vault: Path
) -> None:
    """The entity's note is gone for good and the person wrote a new one at its path, without an id: the
    graph reads it before the write, so the value the person wrote is seen (kept in the history) rather than
    silently replaced, and the write lands in that note (the entity's path and name)."""
    made = await remember(rt, "Project", "Atlas", {"status": "active"}, "The first note.")
    (vault / "Projects/Atlas.md").write_bytes(
        b"---\ntype: Project\nstatus: draft\n---\nRewritten by the person from scratch.\n"
    )
    done = await remember(rt, "Project", "Atlas", {"status": "shipped"}, "Written after.")
    assert done.path == "Projects/Atlas.md"
    text = (vault / "Projects/Atlas.md").read_text(encoding="utf-8")
    assert "Rewritten by the person from scratch." in text and "Written after." in text
    assert "status: shipped" in text and read_id(text.encode()) == done.id
    past = await rt.store.read(history_sql.history, done.id)
    assert ("status", "draft") in [(v.key, v.value) for v in past], past
    assert done.id == made.id  # the note at the entity's path is still the entity, as a sync would say


async def test_a_write_into_the_entitys_note_whose_frontmatter_broke_says_why_it_was_left_alone(
    rt: Runtime, vault: Path
) -> None:
    """The id line is unreadable in a frontmatter that does not parse: that is said, not "not its note"."""
    await remember(rt, "Project", "Atlas", {"status": "active"}, "The first note.")
    broken = (vault / "Projects/Atlas.md").read_bytes().replace(b"status: active", b"status: [active: {")
    (vault / "Projects/Atlas.md").write_bytes(broken)
    with pytest.raises(ServiceError, match="Projects/Atlas.md was left alone"):
        await remember(rt, "Project", "Atlas", {}, "Written after.")
    assert (vault / "Projects/Atlas.md").read_bytes() == broken


async def test_forget_right_after_a_move_archives_the_moved_note(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    made = await remember(rt, "Concept", "Topic", {}, "An idea.")
    move(vault, "Concepts/Topic.md", "Archive/Topic.md")
    done = await forget(rt, "Topic")
    assert (done.status, done.changed) == ("archived", True)
    assert "status: archived" in (vault / "Archive/Topic.md").read_text(encoding="utf-8")
    assert ids_in_vault(vault) == {"Archive/Topic.md": made.id}
    # the archive is in the note, so it holds when the watcher comes by and after a rebuild
    await rt.require_sync().sync_vault()
    assert [(n.id, n.status) for n in await entities(rt, "Concept", "Topic")] == [(made.id, "archived")]
    assert [(n.id, n.status) for n in await rebuilt(vault, tmp_path, "Concept", "Topic")] == [
        (made.id, "archived")
    ]


async def test_a_note_named_by_its_file_answers_with_its_new_name_after_a_rename(
    rt: Runtime, vault: Path
) -> None:
    (vault / "Ideas").mkdir()
    (vault / "Ideas/Topic.md").write_bytes(b"---\ntype: Concept\n---\nNo name key: the file names it.\n")
    made = await rt.require_sync().sync_path("Ideas/Topic.md")
    move(vault, "Ideas/Topic.md", "Ideas/Subject.md")
    done = await relate(rt, "Topic", "RELATED_TO", "Other", target_label="Concept")
    assert (done.source_id, done.source, done.note_path) == (made.id, "Subject", "Ideas/Subject.md")


# --- item 3: relate after forget ----------------------------------------------------------------------------


async def test_relate_from_a_forgotten_entity_revives_it_and_a_later_remember_updates_its_note(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    (vault / "Ideas").mkdir()
    (vault / "Ideas/Topic.md").write_bytes(b"---\ntype: Concept\n---\nMy own words.\n")  # not in Concepts/
    made = await rt.require_sync().sync_path("Ideas/Topic.md")
    await forget(rt, "Topic")
    done = await relate(rt, "Topic", "RELATED_TO", "Other", source_label="Concept", target_label="Concept")
    assert (done.source_id, done.note_path, done.revived) == (made.id, "Ideas/Topic.md", ("Topic",))
    assert "current again" in done.message
    text = (vault / "Ideas/Topic.md").read_text(encoding="utf-8")
    assert "status:" not in text and '"[[Other]]"' in text  # the forget is undone in the note itself
    again = await remember(rt, "Concept", "Topic", {}, "Still relevant.")
    assert (again.id, again.created, again.path) == (made.id, False, "Ideas/Topic.md")
    assert "Still relevant." in (vault / "Ideas/Topic.md").read_text(encoding="utf-8")
    assert not (vault / "Concepts/Topic.md").exists()
    assert [(n.id, n.status) for n in await entities(rt, "Concept", "Topic")] == [(made.id, "active")]
    assert [(n.id, n.status) for n in await rebuilt(vault, tmp_path, "Concept", "Topic")] == [
        (made.id, "active")
    ]


async def test_relate_without_a_source_label_finds_the_forgotten_entity(rt: Runtime, vault: Path) -> None:
    made = await remember(rt, "Concept", "Topic", {"status": "draft"}, "An idea.")
    await forget(rt, "Topic")
    done = await relate(rt, "Topic", "RELATED_TO", "Other", target_label="Concept")
    assert (done.source_id, done.revived) == (made.id, ("Topic",))
    assert "status: draft" in (vault / "Concepts/Topic.md").read_text(encoding="utf-8")  # as before forget


async def test_relate_to_a_forgotten_entity_revives_it_instead_of_making_a_placeholder(
    rt: Runtime, vault: Path
) -> None:
    made = await remember(rt, "Concept", "Topic", {}, "An idea.")
    await forget(rt, "Topic")
    done = await relate(rt, "Other", "RELATED_TO", "Topic", source_label="Concept")
    assert (done.target_id, done.revived) == (made.id, ("Topic",))
    assert [(n.id, n.status) for n in await rt.store.find_nodes("Topic", include_archived=True)] == [
        (made.id, "active")
    ]
    assert "status:" not in (vault / "Concepts/Topic.md").read_text(encoding="utf-8")
    again = await remember(rt, "Concept", "Topic", {}, "Back in use.")
    assert (again.id, again.path) == (made.id, "Concepts/Topic.md")


async def test_a_relation_in_remember_revives_a_forgotten_target_and_says_so(rt: Runtime) -> None:
    made = await remember(rt, "Technology", "SQLite", {}, "Embedded database.")
    await forget(rt, "SQLite")
    done = await remember(rt, "Project", "Engrama", {}, None, [RelationSpec("USES", "SQLite")])
    assert "SQLite was archived and is current again" in done.message
    node = await rt.store.get_node(made.id)
    assert node is not None and node.status == "active"
    assert [n.id for n in await rt.store.find_nodes("SQLite", include_archived=True)] == [made.id]


# --- the parts: locate and restore ----------------------------------------------------------------------------


def test_locate_reads_only_notes_the_graph_has_not_seen_as_they_are() -> None:
    node_id = "3f2c9a8e-0000-4000-8000-000000000001"
    known = {
        "A.md": FileState("A.md", 10, 100, "x", "other-id"),  # as recorded: not read
        "B.md": FileState("B.md", 10, 100, "x", "other-id"),  # changed since: read
        "C.md": FileState("C.md", 10, 100, "x", node_id),  # recorded under this id: read
    }
    entries = [
        StatEntry("A.md", 10, 100),
        StatEntry("B.md", 11, 100),
        StatEntry("C.md", 10, 100),
        StatEntry("New.md", 5, 50),  # unknown: read, and first (older)
    ]
    assert candidate_paths(entries, known, node_id) == ["New.md", "B.md", "C.md"]


def test_locate_finds_a_moved_note_in_the_vault_before_one_in_the_trash(vault: Path) -> None:
    node_id = "3f2c9a8e-0000-4000-8000-000000000002"
    note = f"---\nengrama_id: {node_id}\n---\nBody.\n".encode()
    (vault / ".trash").mkdir()
    (vault / ".trash/Topic.md").write_bytes(note)
    assert locate_note(vault, node_id, {}) == Located(".trash/Topic.md", in_trash=True)
    (vault / "Archive").mkdir()
    (vault / "Archive/Topic.md").write_bytes(note)
    (vault / "Other.md").write_bytes(f"mentions {node_id} in its body only\n".encode())
    assert locate_note(vault, node_id, {}) == Located("Archive/Topic.md", in_trash=False)
    assert locate_note(vault, "3f2c9a8e-0000-4000-8000-00000000dead", {}) is None


def test_restoring_from_the_trash_never_overwrites_a_note(vault: Path) -> None:
    (vault / ".trash").mkdir()
    (vault / ".trash/Topic.md").write_bytes(b"the trashed note\n")
    (vault / "Concepts").mkdir()
    (vault / "Concepts/Topic.md").write_bytes(b"a new note the person wrote since\n")
    assert restore_from_trash(vault, ".trash/Topic.md", "Concepts/Topic.md") == "Concepts/Topic 2.md"
    assert (vault / "Concepts/Topic.md").read_bytes() == b"a new note the person wrote since\n"
    assert (vault / "Concepts/Topic 2.md").read_bytes() == b"the trashed note\n"
    assert not (vault / ".trash/Topic.md").exists()
    (vault / ".trash/Gone.md").write_bytes(b"x\n")
    assert restore_from_trash(vault, ".trash/Gone.md", "New folder/Gone.md") == "New folder/Gone.md"


async def test_remember_right_after_the_person_made_the_note_writes_into_it_not_a_second_one(
    vault: Path, db_path: Path
) -> None:
    from server.runtime import open_runtime
    from server.services.remember import remember
    from server.settings import Settings

    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        (vault / "Cedar 97.md").write_text(
            "Made in Obsidian a moment ago.\n", encoding="utf-8"
        )  # not synced yet
        done = await remember(rt, "Note", "Cedar 97", observation="Seen by the assistant.")
        notes = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
    assert done.path == "Cedar 97.md" and notes == ["Cedar 97.md"]
    text = (vault / "Cedar 97.md").read_text(encoding="utf-8")
    assert "Made in Obsidian a moment ago." in text and "Seen by the assistant." in text


@pytest.mark.parametrize("unplugged", ["moved away", "an empty mount point"])
async def test_no_write_goes_where_the_vault_was_while_it_is_not_there(
    rt: Runtime, vault: Path, tmp_path: Path, unplugged: str
) -> None:
    """Found by review: with the vault's drive unplugged (or its share not mounted), `remember` made the vault
    folder again at its path and wrote the new note there, and a write for a known entity took its note for
    deleted and wrote a fresh one with a new id; both were hidden when the drive came back, and the real
    notes were archived. Now nothing is written and the tool says why."""
    (vault / "People").mkdir()
    (vault / "People/Maya.md").write_text("---\ntype: Person\n---\nMaya runs the lab.\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    maya_id = read_id((vault / "People/Maya.md").read_bytes())
    before = ids_in_vault(vault)
    away = tmp_path / "drive"
    os.rename(vault, away)
    if unplugged == "an empty mount point":
        vault.mkdir()
    with pytest.raises(Exception, match="unplugged, or a share that is not mounted") as new:
        await remember(rt, "Project", "Atlas", observation="Atlas starts in May.")
    assert "Atlas" in str(new.value)
    with pytest.raises(Exception, match="unplugged, or a share that is not mounted"):
        await remember(rt, "Person", "Maya", observation="Maya moved to Lisbon.")
    assert not vault.exists() or list(vault.iterdir()) == []  # nothing written where the vault was
    if vault.exists():
        vault.rmdir()
    os.rename(away, vault)  # the drive is back
    assert ids_in_vault(vault) == before
    report = await rt.require_sync().sync_vault()
    assert (report.archived, report.created, report.errors) == (0, 0, [])
    [maya] = await entities(rt, "Person", "Maya")
    assert (maya.id, maya.status, maya.path) == (maya_id, "active", "People/Maya.md")
    done = await remember(rt, "Person", "Maya", observation="Maya moved to Lisbon.")
    assert done.id == maya_id and "Lisbon" in (vault / "People/Maya.md").read_text(encoding="utf-8")


async def test_a_note_the_person_made_read_only_is_not_written_and_the_tool_says_so(
    rt: Runtime, vault: Path
) -> None:
    """Found by review: `remember` appended to a note the person had made read-only (chmod 444): the writer
    replaces a note by rename, which needs only the folder's permission."""
    (vault / "People").mkdir()
    note = vault / "People/Maya.md"
    note.write_text("---\ntype: Person\n---\nMaya runs the lab.\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    note.chmod(0o444)
    before = note.read_bytes()
    with pytest.raises(Exception, match="read-only") as refused:
        await remember(rt, "Person", "Maya", observation="Maya moved to Lisbon.")
    assert "Make it writable" in str(refused.value)
    assert note.read_bytes() == before and [p.name for p in (vault / "People").iterdir()] == ["Maya.md"]
    note.chmod(0o644)
    done = await remember(rt, "Person", "Maya", observation="Maya moved to Lisbon.")
    assert "Lisbon" in note.read_text(encoding="utf-8") and done.path == "People/Maya.md"
