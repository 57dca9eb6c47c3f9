"""remember and relate against a real temporary vault and database: notes written, merged, mirrored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from profiles.loader import load_profile
from profiles.schema import LabelDef
from server.runtime import Runtime, open_runtime
from server.services.context import context
from server.services.entities import RelationSpec
from server.services.errors import RelationNotAllowed, ServiceError, UnknownLabel, UnknownRelation
from server.services.relate import relate
from server.services.remember import remember
from server.settings import Settings
from server.store import outbox_sql
from tests.test_typing_editor import saving_until, settled_runtime
from vault_sync.errors import NoteInConflict
from vault_sync.identify import read_id
from vault_sync.parse import parse_note
from vault_sync.report import UNCHANGED
from vault_sync.writer import in_conflict


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        yield runtime


def write(vault: Path, rel: str, data: bytes) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


async def test_remember_creates_a_note_in_the_label_folder(rt: Runtime, vault: Path) -> None:
    done = await remember(rt, "project", "Engrama", {"status": "active"}, "Started the MCP server.")
    assert (done.created, done.label, done.path) == (True, "Project", "Projects/Engrama.md")
    data = (vault / "Projects/Engrama.md").read_bytes()
    assert read_id(data) == done.id
    text = data.decode()
    assert "type: Project" in text and "status: active" in text and "Started the MCP server." in text
    node = await rt.store.get_node(done.id)
    assert node is not None and node.path == "Projects/Engrama.md" and node.properties["status"] == "active"
    # the recorded checksum matches the file, so the watcher will see our own write as unchanged
    assert (await rt.require_sync().sync_path("Projects/Engrama.md")).action == UNCHANGED


async def test_remember_merges_into_a_persons_note_and_keeps_their_bytes(rt: Runtime, vault: Path) -> None:
    original = (
        b"---\r\n# my comment\r\ntype: Project\r\nname: Engrama\r\nstatus: idea\r\n---\r\nMy own words.\r\n"
    )
    write(vault, "Work/Engrama.md", original)
    synced = await rt.require_sync().sync_path("Work/Engrama.md")
    done = await remember(rt, "Project", "engrama", {"status": "active"}, "Shipped v1.")
    assert (done.id, done.created, done.path, done.name) == (synced.id, False, "Work/Engrama.md", "Engrama")
    text = (vault / "Work/Engrama.md").read_bytes().decode()
    assert text.startswith("---\r\n# my comment\r\ntype: Project\r\nname: Engrama\r\nstatus: active\r\n")
    assert "My own words.\r\n" in text and text.rstrip().endswith("Shipped v1.")
    assert not (vault / "Projects").exists()


async def test_remembering_twice_the_same_day_changes_nothing(rt: Runtime, vault: Path) -> None:
    first = await remember(rt, "Technology", "SQLite", {"version": "3.45"}, "Used for the graph.")
    before = (vault / "Technologies/SQLite.md").read_bytes()
    again = await remember(rt, "Technology", "SQLite", {"version": "3.45"}, "Used for the graph.")
    assert again.id == first.id and not again.created
    assert (vault / "Technologies/SQLite.md").read_bytes() == before


async def test_a_value_remembered_again_in_other_capitals_keeps_the_persons_spelling(
    rt: Runtime, vault: Path
) -> None:
    """Review 23a: remember judged "active" the same as the note's "Active" (case and spacing do not count) and
    then wrote its own spelling over the person's, reported as an update, with the person's values recorded as
    replaced. The same value leaves the note as the person wrote it."""
    original = (
        b"---\ntype: Project\nstatus: Active\nowner: Ann Smith\ntags: [ProjectX, Alpha]\n"
        b"aliases: [The Big One]\n---\nMine.\n"
    )
    write(vault, "Projects/Atlas.md", original)
    await rt.require_sync().sync_path("Projects/Atlas.md")
    written = (vault / "Projects/Atlas.md").read_bytes()
    props = {
        "status": "active",
        "owner": "ann smith",
        "tags": ["projectx", "alpha"],
        "aliases": ["the big one"],
    }
    done = await remember(rt, "Project", "Atlas", props)
    assert done.path == "Projects/Atlas.md" and not done.clarifications
    assert (vault / "Projects/Atlas.md").read_bytes() == written  # nothing to change: same values
    node = await rt.store.get_node(done.id)
    assert (
        node is not None and node.properties["status"] == "Active" and node.properties["owner"] == "Ann Smith"
    )
    assert "already held that value" in done.message
    # Asked to replace it (review 23g), the tool's spelling is written, the person's kept as history.
    fixed = await remember(rt, "Project", "Atlas", {"owner": "ann smith"}, resolve="replace")
    assert "owner: ann smith" in (vault / "Projects/Atlas.md").read_text(encoding="utf-8")
    assert fixed.history_kept == ("owner",)


async def test_relations_are_mirrored_and_targets_created_with_the_inferred_label(
    rt: Runtime, vault: Path
) -> None:
    done = await remember(rt, "Project", "Engrama", relations=[RelationSpec("uses", "SQLite")])
    assert done.relations_created == 1
    assert '"[[SQLite]]"' in (vault / "Projects/Engrama.md").read_text(encoding="utf-8")
    around = await context(rt, "Engrama")
    [edge] = [n for n in around.neighbours if n.rel_type == "USES"]
    assert (edge.node.name, edge.node.label, edge.node.status, edge.direction) == (
        "SQLite",
        "Technology",
        "stub",
        "out",
    )


async def test_a_stub_target_becomes_the_note_when_it_is_remembered(rt: Runtime, vault: Path) -> None:
    await remember(rt, "Project", "Engrama", relations=[RelationSpec("USES", "SQLite")])
    stub = (await rt.store.find_nodes("SQLite"))[0]
    done = await remember(rt, "Technology", "SQLite", observation="Fast enough.")
    assert done.id == stub.id and done.created and done.path == "Technologies/SQLite.md"
    assert [n.node.id for n in (await context(rt, "Engrama")).neighbours] == [done.id]


async def test_an_unknown_label_lists_the_valid_ones(rt: Runtime, vault: Path) -> None:
    with pytest.raises(UnknownLabel, match="did you mean Project.*use one of: .*Technology"):
        await remember(rt, "Projekt", "Engrama")
    with pytest.raises(UnknownLabel, match="engrama_reflect"):
        await remember(rt, "Insight", "Everything is connected")
    assert list(vault.iterdir()) == []


async def test_a_bad_relation_writes_nothing_at_all(rt: Runtime, vault: Path) -> None:
    with pytest.raises(UnknownRelation, match="use one of: .*USES"):
        await remember(
            rt, "Project", "Engrama", relations=[RelationSpec("USES", "A"), RelationSpec("LOVES", "B")]
        )
    with pytest.raises(RelationNotAllowed, match="USES cannot go from a Technology to a Project"):
        await remember(rt, "Technology", "SQLite", relations=[RelationSpec("USES", "Engrama", "Project")])
    assert list(vault.iterdir()) == []
    assert await rt.store.find_nodes("A") == []


async def test_a_relation_to_a_note_of_the_wrong_type_says_how_to_fix_it(rt: Runtime, vault: Path) -> None:
    write(vault, "Notes/React.md", b"# React\n")
    await rt.require_sync().sync_path("Notes/React.md")
    with pytest.raises(RelationNotAllowed, match=r"'React' is a Note \(Notes/React.md\).*RELATED_TO"):
        await remember(rt, "Project", "Engrama", relations=[RelationSpec("USES", "React")])


async def test_reserved_and_nested_properties_are_refused(rt: Runtime) -> None:
    with pytest.raises(ServiceError, match="reserved"):
        await remember(rt, "Project", "Engrama", {"engrama_id": "x"})
    with pytest.raises(ServiceError, match="flatten"):
        await remember(rt, "Project", "Engrama", {"owner": {"name": "Maya"}})
    with pytest.raises(ServiceError, match="wikilinks"):
        await remember(rt, "Project", "[[Engrama]]")


async def test_a_file_name_taken_by_another_entity_gets_a_suffix(rt: Runtime, vault: Path) -> None:
    write(vault, "Projects/Atlas.md", b"---\ntype: Concept\n---\nThe idea.\n")
    await rt.require_sync().sync_path("Projects/Atlas.md")
    done = await remember(rt, "Project", "Atlas")
    assert done.path == "Projects/Atlas 2.md" and done.created
    other = (vault / "Projects/Atlas.md").read_bytes()
    assert other.startswith(b"---\ntype: Concept\nengrama_id: ") and other.endswith(b"---\nThe idea.\n")


@pytest.mark.parametrize(
    "data",
    [b"---\ntype: Project\nstatus: [active\n---\nMine.\n", b"---\ntype: Project\n---\nCaf\xe9 notes.\n"],
    ids=["yaml typo", "not utf-8"],
)
async def test_a_note_at_the_entitys_path_that_cannot_be_read_gets_no_second_note_beside_it(
    rt: Runtime, vault: Path, data: bytes
) -> None:
    """Review 23a: remember found Projects/Atlas.md unreadable (a typo in its frontmatter, bytes that are not
    UTF-8) and created `Atlas 2.md` beside it; once the person fixed theirs, the vault held two Atlas entities.
    It may be the entity's note: the call says so and what to do, and writes nothing."""
    write(vault, "Projects/Atlas.md", data)
    with pytest.raises(ServiceError, match=r"Projects/Atlas\.md is already there and cannot be read"):
        await remember(rt, "Project", "Atlas", {"owner": "Ann"}, "Told while the note was broken.")
    assert sorted(p.name for p in (vault / "Projects").iterdir()) == ["Atlas.md"]
    assert (vault / "Projects/Atlas.md").read_bytes() == data


async def test_an_unsynced_note_of_the_same_entity_is_merged_not_duplicated(rt: Runtime, vault: Path) -> None:
    write(vault, "Projects/Atlas.md", b"---\ntype: Project\n---\nMine.\n")
    done = await remember(rt, "Project", "Atlas", {"status": "active"})
    assert done.path == "Projects/Atlas.md" and not done.created
    assert sorted(p.name for p in (vault / "Projects").iterdir()) == ["Atlas.md"]


async def test_a_follower_writes_the_graph_and_queues_the_note(rt: Runtime, vault: Path) -> None:
    rt.require_sync().writable = False
    done = await remember(
        rt, "Project", "Engrama", {"status": "active"}, "Noted.", [RelationSpec("USES", "SQLite")]
    )
    assert done.path is None and "queued" in done.message and done.relations_created == 1
    assert "a new note in Projects/" in done.message
    assert list(vault.iterdir()) == []  # the lease holder writes it (tests/test_outbox.py)
    assert (await rt.store.read(outbox_sql.summary)).waiting == 1
    node = await rt.store.get_node(done.id)
    assert node is not None and node.properties["observations"][0].endswith("Noted.")
    assert [n.node.name for n in (await context(rt, "Engrama")).neighbours] == ["SQLite"]


async def test_relate_mirrors_the_edge_into_the_source_note(rt: Runtime, vault: Path) -> None:
    write(vault, "Projects/Engrama.md", b"---\ntype: Project\n---\nBody stays.\n")
    synced = await rt.require_sync().sync_path("Projects/Engrama.md")
    done = await relate(rt, "Engrama", "uses", "watchdog", target_label="Technology")
    assert (done.created, done.rel_type, done.note_path) == (True, "USES", "Projects/Engrama.md")
    assert (vault / "Projects/Engrama.md").read_text(encoding="utf-8") == (
        f'---\ntype: Project\nengrama_id: {synced.id}\nrelations:\n  USES:\n    - "[[watchdog]]"\n---\nBody stays.\n'
    )
    again = await relate(rt, "Engrama", "USES", "watchdog")
    assert not again.created and again.target_id == done.target_id


async def test_relate_creates_a_missing_source_when_its_label_is_clear(rt: Runtime, vault: Path) -> None:
    done = await relate(rt, "Harbor", "HAS_PROBLEM", "Slow import")
    assert done.note_path == "Projects/Harbor.md"
    target = await rt.store.get_node(done.target_id)
    assert target is not None and target.label == "Problem"
    with pytest.raises(ServiceError, match="give source_label"):
        await relate(rt, "Nobody yet", "RELATED_TO", "Harbor")


async def test_an_entity_cannot_relate_to_itself(rt: Runtime) -> None:
    with pytest.raises(ServiceError, match="itself"):
        await relate(rt, "Engrama", "RELATED_TO", "engrama", source_label="Project")


@pytest.mark.parametrize("tool", ["relate", "remember"])
async def test_a_write_that_fails_leaves_no_placeholder_for_its_target(
    rt: Runtime, vault: Path, tool: str
) -> None:
    # A placeholder that notes link already stays; the one the failed call made goes.
    write(vault, "Projects/Engrama.md", b"---\ntype: Project\n---\nBody.\n")
    write(vault, "Notes/Idea.md", b"Try [[Redis]].\n")
    await rt.require_sync().sync_vault()
    source = vault / "Projects/Engrama.md"
    broken = source.read_bytes().replace(b"type: Project", b"type: [Project")  # the person's typo
    source.write_bytes(broken)
    specs = [RelationSpec("USES", "Kafka", "Technology"), RelationSpec("USES", "Redis", "Technology")]
    with pytest.raises(ServiceError, match="frontmatter"):
        if tool == "relate":
            await relate(rt, "Engrama", "USES", "Kafka", target_label="Technology")
        else:
            await remember(rt, "Project", "Engrama", relations=specs)
    assert await rt.store.find_nodes("Kafka", include_archived=True) == []
    assert [n.status for n in await rt.store.find_nodes("Redis", include_archived=True)] == ["stub"]
    assert source.read_bytes() == broken


async def test_a_call_the_client_cancels_leaves_no_placeholder_nothing_points_at(
    rt: Runtime, vault: Path
) -> None:
    """Found by review: a remember or relate cancelled by the client (MCP notifications/cancelled) after its
    targets were planned kept their placeholder nodes, which neither the vault nor a rebuild has."""
    import anyio

    write(vault, "Projects/Engrama.md", b"---\ntype: Project\n---\nBody.\n")
    await rt.require_sync().sync_vault()
    for n in range(16):
        with anyio.move_on_after(n * 0.001):  # cancelled anywhere from before planning to after the write
            if n % 2:
                await relate(rt, "Engrama", "USES", f"Relate target {n}", target_label="Technology")
            else:
                specs = [RelationSpec("USES", f"Remember target {n}", "Technology")]
                await remember(rt, "Project", f"Project {n}", relations=specs)
    unused = await rt.store.read(
        lambda c: c.execute(
            "select name from nodes n where status = 'stub' "
            "and not exists (select 1 from edges e where e.source = n.id or e.target = n.id) "
            "and not exists (select 1 from note_links l where l.target = n.id)"
        ).fetchall()
    )
    assert [r[0] for r in unused] == []


async def test_a_note_in_a_merge_conflict_is_indexed_but_never_written_until_resolved(
    rt: Runtime, vault: Path
) -> None:
    """obsidian-git pulled a conflict into the top of a note (review 18b): engrama indexes the text, but neither
    its id line (it would go above the markers: two frontmatter blocks once resolved) nor a tool's write (it
    went after `>>>>>>>`) touches the file; once the person resolves it, both go in as usual."""
    ours = (
        b"---\nengrama_id: 01a21ae0-48a0-7000-8000-000000000001\ntype: Project\n---\nIdea: sell lemonade.\n"
    )
    conflicted = b"<<<<<<< HEAD\n" + ours + b"=======\nIdea: sell lemonade and tea.\n>>>>>>> 7aa1171 (tea)\n"
    write(vault, "Projects/Stand.md", conflicted)
    report = await rt.require_sync().sync_vault()
    assert [e.path for e in report.ids_not_written] == ["Projects/Stand.md"]
    assert "merge conflict" in report.ids_not_written[0].error
    assert (vault / "Projects/Stand.md").read_bytes() == conflicted
    with pytest.raises(NoteInConflict, match="merge conflict"):  # the tool says this message
        await remember(rt, "Project", "Stand", {"status": "active"}, "Opened on Saturday.")
    assert (vault / "Projects/Stand.md").read_bytes() == conflicted
    write(vault, "Projects/Stand.md", ours.replace(b"lemonade.", b"lemonade and tea."))
    await rt.require_sync().sync_vault()
    done = await remember(rt, "Project", "Stand", {"status": "active"}, "Opened on Saturday.")
    text = (vault / "Projects/Stand.md").read_text(encoding="utf-8")
    assert done.path == "Projects/Stand.md" and text.count("---\n") == 2 and "Opened on Saturday." in text


def test_conflict_markers_in_a_code_block_or_a_heading_are_no_conflict() -> None:
    """Review 18c: a note explaining merge conflicts in a fenced code block was taken for one (no id line, every
    tool write refused), and the pattern backtracked: a note of many `<<<<<<<` and `=======` lines took seconds
    to minutes. One pass over the lines now, skipping code blocks."""
    example = b"# Git\n```\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n```\nThen resolve it.\n"
    assert not in_conflict(example)
    assert not in_conflict(b"~~~diff\n<<<<<<< a\n=======\n>>>>>>> b\n~~~\n")
    assert not in_conflict(b"Title\n=======\nText <<<<<<< quoted.\n")
    assert in_conflict(b"<<<<<<< HEAD\r\na\r\n=======\r\nb\r\n>>>>>>> x\r\n")
    assert in_conflict(b"<<<<<<< ours\na\n||||||| base\nq\n=======\nb\n>>>>>>>\n")
    assert in_conflict(b"```\ncode\n```\n<<<<<<< HEAD\na\n=======\nb\n>>>>>>> x\n")
    assert not in_conflict(b"<<<<<<< x\n=======\n" * 2000 + b"Title\n=======\n" * 20000)


async def _edge_targets(rt: Runtime, source: str) -> list[tuple[str, str, str | None]]:
    sql = (
        "select t.name, t.status, t.path from edges e join nodes s on s.id = e.source join nodes t on t.id = e.target"
        " where s.name = ? and e.valid_to is null order by t.name"
    )
    return [tuple(r) for r in await rt.store.read(lambda c: c.execute(sql, (source,)).fetchall())]


async def test_a_relation_to_a_name_or_path_no_wikilink_carries_leads_to_that_entity(
    rt: Runtime, vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Review 19a: `[[C#]]` is note `C`, heading `#`; `[[C# Notes/Atlas]]` likewise; a folder `[2024] Work`
    could not be linked at all. The tool said it related the right entity while the graph (and every rebuild)
    held a relation to `C`, to a stub `F`, or none."""
    write(vault, "Projects/Proj.md", b"---\ntype: Project\n---\nA project.\n")
    write(vault, "Technologies/C.md", b"---\ntype: Technology\n---\nThe C language.\n")
    write(vault, "Technologies/C#.md", b"---\ntype: Technology\n---\nThe C# language.\n")
    write(vault, "C# Notes/Atlas.md", b"---\ntype: Technology\n---\nA map library.\n")
    write(vault, "[2024] Work/Orbit.md", b"---\ntype: Technology\n---\nA scheduler.\n")
    write(
        vault,
        "Archive/Orbit.md",
        b"---\ntype: Concept\n---\nAnother Orbit, so the file name is not unique.\n",
    )
    write(vault, "[2024] Work/Kite.md", b"---\ntype: Technology\n---\nA kite.\n")
    await rt.require_sync().sync_vault()
    for target in ("C#", "F#", "Atlas", "Kite"):
        done = await relate(rt, "Proj", "USES", target, target_label="Technology")
        assert done.created, target
    orbit = await rt.store.read(
        lambda c: c.execute("select id from nodes where path = '[2024] Work/Orbit.md'").fetchone()[0]
    )
    done = await relate(rt, "Proj", "USES", "Orbit", target_label="Technology")
    assert done.target_id == orbit
    wanted = [
        ("Atlas", "active", "C# Notes/Atlas.md"),
        ("C#", "active", "Technologies/C#.md"),
        ("F#", "stub", None),
        ("Kite", "active", "[2024] Work/Kite.md"),
        ("Orbit", "active", "[2024] Work/Orbit.md"),
    ]
    assert await _edge_targets(rt, "Proj") == wanted
    text = (vault / "Projects/Proj.md").read_text(encoding="utf-8")
    assert '"Technologies/C#"' in text and '"F#"' in text and '"C# Notes/Atlas"' in text
    assert '"[2024] Work/Kite"' in text  # by path: a `Kite.md` made later cannot take it over
    assert '"[2024] Work/Orbit"' in text  # no wikilink can carry it, and its file name is not unique
    # notes of those file names made later take nothing over (review 19c: `[[Atlas]]` went to a new Atlas.md)
    write(vault, "Maps/Atlas.md", b"---\ntype: Concept\n---\nAn atlas of maps.\n")
    write(vault, "Toys/Kite.md", b"---\ntype: Concept\n---\nA toy.\n")
    await rt.require_sync().sync_vault()
    assert await _edge_targets(rt, "Proj") == wanted
    # the vault holds the same relations: a graph rebuilt from it
    async with open_runtime(Settings(vault=vault, db_path=tmp_path / "rebuilt.db", watch=False)) as again:
        await again.require_sync().sync_vault()
        assert await _edge_targets(again, "Proj") == wanted
    # and relating again adds nothing
    for target in ("C#", "F#", "Atlas"):
        assert not (await relate(rt, "Proj", "USES", target)).created
    assert (vault / "Projects/Proj.md").read_text(encoding="utf-8") == text


@pytest.mark.parametrize("folder", ["projects", "PROJECTS"])
async def test_a_new_note_joins_the_label_folder_as_the_vault_spells_it(
    rt: Runtime, vault: Path, folder: str
) -> None:
    """Review 19a: notes in `projects/` are read as Projects, but a new Project went to `Projects/`, a second
    folder differing only in case (two folders here, a case conflict for a sync client on a Mac or Windows)."""
    write(vault, f"{folder}/Existing.md", b"An untyped note in the person's folder.\n")
    await rt.require_sync().sync_vault()
    done = await remember(rt, "Project", "NewProj", {}, "x")
    assert done.path == f"{folder}/NewProj.md"
    assert sorted(p.name for p in vault.iterdir() if p.is_dir()) == [folder]


async def test_a_folder_in_either_unicode_form_gives_its_label() -> None:
    """Review 19a: a profile folder `Réunions` (typed composed) labelled the notes of `Réunions` as macOS saves
    it (decomposed) `Note`; the sync's own folder match (`parse._label`) did the same."""
    base = load_profile("base")
    meeting = LabelDef(name="Meeting", description="a meeting", properties=(), folder="R\u00e9unions")
    profile = replace(base, labels={**base.labels, "Meeting": meeting})
    assert profile.label_for_path("Re\u0301unions/Lundi.md") == "Meeting"
    assert profile.label_for_path("R\u00c9UNIONS/Lundi.md") == "Meeting"
    note = parse_note(
        "Re\u0301unions/Lundi.md",
        b"Agenda.\n",
        folder_labels=profile.folder_labels(),
        canonical_label=lambda t: t,
    )
    assert note.label == "Meeting"


async def test_an_entity_whose_note_became_a_link_to_another_note_gets_a_note_again(
    rt: Runtime, vault: Path
) -> None:
    """Review 22b: Linky.md replaced by a symlink to Real/Target.md: remembering Linky said the file "holds
    another note's engrama_id" and to call engrama_sync_note, which said the path was not a note; forever, also
    after a restart."""
    import os

    from server.services.notesync import sync_note

    (vault / "Real").mkdir()
    (vault / "Real/Target.md").write_text("Target body.\n", encoding="utf-8")
    (vault / "Linky.md").write_text("---\nstatus: draft\n---\nLinky body.\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    (vault / "Linky.md").unlink()
    os.symlink("Real/Target.md", vault / "Linky.md")
    await rt.require_sync().sync_vault()
    done = await remember(rt, "Note", "Linky", observation="Still worth keeping.")
    assert done.created and "Linky.md is now a link to another note" in done.message
    assert "Still worth keeping." in (vault / done.path).read_text(encoding="utf-8")
    assert (vault / "Real/Target.md").read_text(encoding="utf-8").endswith("Target body.\n")  # untouched
    again = await remember(rt, "Note", "Linky", observation="And again.")
    assert again.id == done.id and not again.created
    with pytest.raises(ServiceError, match="is a link to the note 'Real/Target.md'"):
        await sync_note(rt, "Linky.md")


async def test_a_remember_cancelled_while_it_waits_for_quiet_writes_nothing_later(
    vault: Path, db_path: Path
) -> None:
    """Review 23h: a remember cancelled by the client (or timed out) while the person was typing went on
    waiting on its thread and wrote a moment later, on top of a later remember the assistant had been told
    was made (status back to the cancelled call's value). Cancelled, it writes nothing, and the next call
    plans on the note as it is."""
    import asyncio

    write(vault, "Projects/Atlas.md", b"---\ntype: Project\nstatus: active\n---\nMine.\n")
    async with settled_runtime(vault, db_path) as rt:  # the id lines written, once quiet
        note = vault / "Projects/Atlas.md"
        stop = asyncio.Event()

        person = asyncio.create_task(saving_until(note, stop))  # the person typing, saved in place
        await asyncio.sleep(0.5)
        call = asyncio.create_task(remember(rt, "Project", "Atlas", {"status": "paused"}, "Cancelled call."))
        await asyncio.sleep(0.4)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        stop.set()
        await person
        await asyncio.sleep(1.2)  # the person paused: a write still waiting would land now
        done = await remember(rt, "Project", "Atlas", {"status": "active"}, "The call made after it.")
        await asyncio.sleep(1.5)
        text = note.read_text(encoding="utf-8")
        assert "Cancelled call." not in text and "status: paused" not in text
        assert "The call made after it." in text and "status: active" in text and not done.clarifications


async def test_a_remember_cancelled_while_git_holds_the_vault_gives_up_at_once(
    vault: Path, db_path: Path
) -> None:
    """Review 23k: a write cancelled while it waited for git (`.git/index.lock`) went on waiting its 5 s, holding
    the cancellation, so a server whose client went away did not stop until the client killed it."""
    import asyncio
    import time

    write(vault, "Projects/Atlas.md", b"---\ntype: Project\n---\nMine.\n")
    async with settled_runtime(vault, db_path) as rt:  # the id lines written, once quiet
        (vault / ".git").mkdir()
        (vault / ".git/index.lock").write_bytes(b"")  # git rewriting the vault
        call = asyncio.create_task(remember(rt, "Project", "Atlas", {}, "Told while git ran."))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert time.monotonic() - started < 1.5
        (vault / ".git/index.lock").unlink()
        await asyncio.sleep(1.5)
    assert "Told while git ran." not in (vault / "Projects/Atlas.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("spelled", ["Atlas\u200b", "\ufeffAtlas", "At\u00adlas", "\u202eAtlas"])
async def test_a_name_with_characters_that_show_as_nothing_reaches_the_entity_without_them(
    rt: Runtime, vault: Path, spelled: str
) -> None:
    """Review 23h: "Atlas" followed by a zero-width space (a name copied from a web page or a chat), with a
    byte-order mark or a soft hyphen, was a second entity beside Atlas, with a note Obsidian shows with the same
    title; a name of such characters alone made a note with a blank title. A name that reaches nothing as given
    is looked up without them, and a new entity is named without them."""
    write(vault, "Projects/Atlas.md", b"---\ntype: Project\n---\nMine.\n")
    await rt.require_sync().sync_path("Projects/Atlas.md")
    done = await remember(rt, "Project", spelled, {}, "Told with an invisible character.")
    assert done.path == "Projects/Atlas.md" and not done.created and done.name == "Atlas"
    fresh = await remember(rt, "Project", "Bor\u200bealis", {}, "A new one.")
    assert fresh.created and fresh.name == "Borealis" and fresh.path == "Projects/Borealis.md"
    assert sorted(p.name for p in (vault / "Projects").iterdir()) == ["Atlas.md", "Borealis.md"]
    with pytest.raises(ServiceError, match="must not be empty"):
        await remember(rt, "Project", "\u2060\u200b", {})


async def test_a_note_whose_own_name_holds_such_characters_is_reached_by_it(rt: Runtime, vault: Path) -> None:
    """Review 23j: stripping those characters from every name given made a note whose title holds one (pasted
    with its soft hyphens) unreachable by its own name: remember made a second note, forget archived another."""
    rel = "Projects/Donau\u00addampf\u00adschiff.md"
    write(vault, rel, b"---\ntype: Project\n---\nMine.\n")
    await rt.require_sync().sync_path(rel)
    done = await remember(rt, "Project", "Donau\u00addampf\u00adschiff", {}, "Told by its own name.")
    assert done.path == rel and not done.created
    assert sorted(p.name for p in (vault / "Projects").iterdir()) == [Path(rel).name]
