"""context, ingest and note sync against a real temporary vault and database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.runtime import Runtime, open_runtime
from server.services.context import context
from server.services.errors import EntityNotFound, NoteNotFound, ServiceError
from server.services.ingest import ingest, name_candidates
from server.services.notesync import sync_note, sync_vault
from server.services.reading import read_note
from server.settings import Settings
from vault_sync.errors import PathOutsideVault

NOTES = {
    "Projects/Engrama.md": "---\ntype: Project\nrelations:\n  USES: ['[[SQLite]]']\n---\nBuilt on [[watchdog]] and [[SQLite]].\n",
    "Technologies/SQLite.md": "---\ntype: Technology\naliases: [sqlite3]\n---\nAn embedded database.\n",
    "People/Maya.md": "---\ntype: Person\nrelations:\n  WORKS_ON: ['[[Engrama]]']\n---\nMaya builds things.\n",
}


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


async def test_context_lists_neighbours_in_both_directions(rt: Runtime) -> None:
    around = await context(rt, "engrama")
    assert around.node.name == "Engrama" and around.node.path == "Projects/Engrama.md"
    seen = {(n.node.name, n.rel_type, n.direction, n.hops) for n in around.neighbours}
    assert seen == {
        ("SQLite", "USES", "out", 1),
        ("SQLite", "LINKS_TO", "out", 1),  # one row per relation, typed ones first
        ("watchdog", "LINKS_TO", "out", 1),
        ("Maya", "WORKS_ON", "in", 1),
    }
    assert around.neighbours[0].rel_type != "LINKS_TO"


async def test_context_follows_more_hops_and_finds_aliases(rt: Runtime) -> None:
    around = await context(rt, "sqlite3", hops=2)
    assert around.node.name == "SQLite"
    assert {(n.node.name, n.hops) for n in around.neighbours} == {
        ("Engrama", 1),
        ("watchdog", 2),
        ("Maya", 2),
    }


async def test_context_of_an_unknown_name_points_to_search(rt: Runtime) -> None:
    with pytest.raises(EntityNotFound, match="engrama_search"):
        await context(rt, "Nothing like this")
    with pytest.raises(ServiceError, match="hops"):
        await context(rt, "Engrama", hops=4)


async def test_ingest_a_note_gives_content_guidance_and_known_entities(rt: Runtime) -> None:
    done = await ingest(rt, "Projects/Engrama.md", "note", "my side project")
    assert "Built on [[watchdog]]" in done.content
    assert "the Project 'Engrama'" in done.guidance and "my side project" in done.guidance
    assert "- Technology:" in done.guidance and "- USES: Person|Project -> Technology" in done.guidance
    assert "Insight:" not in done.guidance
    known = {(e.name, e.score) for e in done.existing}
    assert ("watchdog", 1.0) in known and all(e.name != "Engrama" for e in done.existing)


async def test_ingest_text_matches_names_it_mentions(rt: Runtime) -> None:
    done = await ingest(rt, "Maya said SQLite was too slow for the Harbor import.", "conversation")
    assert done.content.startswith("Maya said")
    assert {"Maya", "SQLite"} <= {e.name for e in done.existing}
    assert "conversation" in done.guidance


async def test_ingest_refuses_paths_outside_the_vault_and_missing_notes(rt: Runtime) -> None:
    with pytest.raises(PathOutsideVault):
        await ingest(rt, "../secret.md", "note")
    with pytest.raises(PathOutsideVault):
        await ingest(rt, "/etc/passwd", "note")
    with pytest.raises(NoteNotFound, match="source_type 'text'"):
        await ingest(rt, "Projects/Nope.md", "note")
    with pytest.raises(ServiceError, match="source_type"):
        await ingest(rt, "text", "email")


def test_name_candidates_put_wikilinks_first() -> None:
    assert name_candidates("Talked to Maya Lindqvist about [[SQLite]] and C++. Maya Lindqvist agreed.")[
        :3
    ] == [
        "SQLite",
        "Maya Lindqvist",
        "Talked",
    ]


async def test_sync_note_reports_created_unchanged_and_archived(rt: Runtime, vault: Path) -> None:
    (vault / "Inbox.md").write_text("A thought.\n", encoding="utf-8")
    preview = await sync_note(rt, "Inbox.md", dry_run=True)
    assert (preview.action, preview.inject_id) == ("created", True)
    done = await sync_note(rt, "Inbox.md")
    assert done.action == "created" and done.inject_id and done.id
    assert (await sync_note(rt, "Inbox.md")).action == "unchanged"
    (vault / "Inbox.md").unlink()
    assert (await sync_note(rt, "Inbox.md")).action == "archived"


async def test_sync_note_explains_what_cannot_be_synced(rt: Runtime, vault: Path) -> None:
    with pytest.raises(NoteNotFound, match="no note at"):
        await sync_note(rt, "Projects/Missing.md")
    with pytest.raises(ServiceError, match="not a note"):
        await sync_note(rt, ".obsidian/app.json")
    (vault / "Bad.md").write_text("---\nname: [unclosed\n---\n", encoding="utf-8")
    with pytest.raises(ServiceError, match="Bad.md could not be synced"):
        await sync_note(rt, "Bad.md")
    with pytest.raises(PathOutsideVault):
        await sync_note(rt, "../outside.md")


async def test_sync_vault_reports_progress_and_counts(rt: Runtime, vault: Path) -> None:
    (vault / "Projects/New.md").write_text("new\n", encoding="utf-8")
    ticks: list[tuple[int, int]] = []

    async def progress(done: int, total: int) -> None:
        ticks.append((done, total))

    report = await sync_vault(rt, "Projects", progress=progress)
    assert (report.scanned, report.created, report.unchanged) == (2, 1, 1)
    assert report.ids_injected == ["Projects/New.md"] and ticks[-1] == (2, 2)


async def test_a_name_two_notes_share_is_not_guessed(vault: Path, db_path: Path) -> None:
    """Review 21c: with People/Mercury.md and Technologies/Mercury.md, name="Mercury" returned one of them and
    no sign of the other."""
    for folder, label in (("People", "Person"), ("Technologies", "Technology")):
        (vault / folder).mkdir()
        (vault / folder / "Mercury.md").write_text(f"---\ntype: {label}\n---\nA {label}.\n", encoding="utf-8")
    (vault / "Venus.md").write_text("---\naliases: [Morning star]\n---\nA planet.\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        with pytest.raises(
            ServiceError, match=r"2 notes are called 'Mercury': .*People/Mercury.md \(Person\)"
        ):
            await read_note(rt, name="mercury")
        page = await read_note(rt, path="Technologies/Mercury.md")
        assert page.label == "Technology"
        assert (await read_note(rt, name="morning star")).path == "Venus.md"  # one note: found as before


async def test_a_name_whose_note_was_deleted_or_archived_is_said_so(vault: Path, db_path: Path) -> None:
    """Review 21a: read by name after the person deleted People/Dora.md (Nile still links [[Dora]]), the answer
    was "'Dora' has no note yet", which sent the assistant looking for a note that had been there."""
    (vault / "People").mkdir()
    (vault / "People/Dora.md").write_text("---\ntype: Person\n---\nDora runs the river survey.\n", "utf-8")
    (vault / "People/Ada.md").write_text("---\ntype: Person\nstatus: archived\n---\nAda left.\n", "utf-8")
    (vault / "Nile.md").write_text("Surveyed by [[Dora]].\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        (vault / "People/Dora.md").unlink()
        await rt.require_sync().sync_vault()
        with pytest.raises(NoteNotFound, match=r"the note of 'Dora' \(People/Dora.md\) was deleted"):
            await read_note(rt, name="Dora")
        page = await read_note(rt, name="Ada")  # archived by its status line: the note is there to read
        assert page.path == "People/Ada.md" and "Ada left." in page.text
