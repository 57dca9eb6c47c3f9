"""What a tool call may write into a note (review 20c): nothing that leaves the note unreadable or uneditable.

Each of these once wrote a note that engrama itself could then never read or edit again: an observation
leaving a code block open (every later observation was refused), a property name long enough for YAML to write
it as a complex key, a NUL (the note became binary), a note grown past the size any reader takes; and two calls
in flight for one name in two cases made two notes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.runtime import Runtime, open_runtime
from server.services.errors import ServiceError
from server.services.remember import remember
from server.settings import Settings
from vault_sync.errors import VaultError
from vault_sync.writer import MAX_NOTE_BYTES, create_note, edit_note

PERSONS = "---\ntype: Project\n---\nThe person's own words.\n"


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(PERSONS, encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


def files(vault: Path) -> dict[str, bytes]:
    return {str(p.relative_to(vault)): p.read_bytes() for p in sorted(vault.rglob("*.md"))}


@pytest.mark.parametrize(
    ("observation", "said"),
    [
        ("Build steps:\n```bash\nmake test", "code block"),
        ("Draft follows\n%% private", "Obsidian comment"),
        ("Kept for later\n<!-- hidden", "HTML comment"),
        ("Output:\n<pre>\nraw", "<pre> block"),
    ],
)
async def test_an_observation_that_leaves_a_block_open_is_refused_and_writes_nothing(
    rt: Runtime, vault: Path, observation: str, said: str
) -> None:
    before = files(vault)
    with pytest.raises(ServiceError, match=f"leaves .*{said}.* open"):
        await remember(rt, "Project", "Atlas", {}, observation)
    assert files(vault) == before


@pytest.mark.parametrize(
    "observation",
    [
        "Build steps:\n```bash\nmake test\n```",
        "```python\nprint('hello')\n```",  # review 20d: a block from the first line on
        "%%\nhidden\n%%",
        "A note with an inline %% comment %% and a tab\there.",
    ],
)
async def test_a_closed_block_in_an_observation_is_written_and_later_observations_still_land(
    rt: Runtime, vault: Path, observation: str
) -> None:
    await remember(rt, "Project", "Atlas", {}, observation)
    await remember(rt, "Project", "Atlas", {}, "Shipped on Friday.")
    text = (vault / "Projects/Atlas.md").read_text(encoding="utf-8")
    assert observation.splitlines()[0] in text and "Shipped on Friday." in text
    assert text.startswith("---\ntype: Project\n")


@pytest.mark.parametrize(
    ("properties", "observation", "name", "said"),
    [
        ({"k" * 130: "v"}, None, "Atlas", "130 characters"),
        ({"notes": ["x" * 9_000, "y" * 9_000]}, None, "Atlas", "list of 18000 characters"),
        ({}, "copied from the terminal\x00 done", "Atlas", "control character"),
        ({"owner\x1b": "Ana"}, None, "Atlas", "control character"),
        ({"a\u2028b": "v"}, None, "Atlas", "control character"),  # review 20d: YAML breaks the line there
        ({"a\x85b": "v"}, None, "Atlas", "control character"),
        ({}, None, "Ada\x00Lovelace", "control character"),
    ],
)
async def test_what_would_make_a_note_unreadable_or_uneditable_is_refused_before_anything_is_written(
    rt: Runtime, vault: Path, properties: dict[str, object], observation: str | None, name: str, said: str
) -> None:
    before = files(vault)
    with pytest.raises(ServiceError, match=said):
        await remember(rt, "Project", name, properties, observation)
    assert files(vault) == before
    await remember(rt, "Project", "Atlas", {"status": "active"}, "still editable")  # and the note still is
    assert "still editable" in (vault / "Projects/Atlas.md").read_text(encoding="utf-8")


def test_the_writer_refuses_a_note_past_the_size_any_reader_takes(vault: Path) -> None:
    (vault / "Big.md").write_text("small\n", encoding="utf-8")
    too_big = b"x" * (MAX_NOTE_BYTES + 1)
    with pytest.raises(VaultError, match="nothing was written"):
        edit_note(vault, "Big.md", lambda data: data + too_big)
    with pytest.raises(VaultError, match="nothing was written"):
        create_note(vault, "Bigger.md", too_big)
    assert files(vault) == {"Big.md": b"small\n"}


async def test_calls_in_flight_at_once_for_one_name_in_several_cases_make_one_note(
    rt: Runtime, vault: Path
) -> None:
    written = await asyncio.gather(
        *(remember(rt, "Project", name, {}, f"seen as {name}") for name in ("Nova", "nova", "NOVA", "Nova"))
    )
    assert len({w.id for w in written}) == 1
    made = [p for p in files(vault) if p.lower() == "projects/nova.md"]
    assert len(made) == 1
    text = (vault / made[0]).read_text(encoding="utf-8")
    assert all(f"seen as {name}" in text for name in ("Nova", "nova", "NOVA"))


async def test_a_remember_of_tags_or_aliases_meets_the_notes_own_and_replaces_them_only_when_told(
    rt: Runtime, vault: Path
) -> None:
    """Review 20d: the graph keeps a note's tags and aliases apart from its properties, so a remember setting
    `tags` found nothing to meet and replaced the person's tags without a word or a history."""
    note = vault / "Projects/Atlas.md"
    note.write_text(
        "---\ntype: Project\ntags: [work, urgent]\naliases: [ATL]\n---\nAtlas.\n", encoding="utf-8"
    )
    await rt.require_sync().sync_path("Projects/Atlas.md")
    asked = await remember(rt, "Project", "Atlas", {"tags": ["personal"], "aliases": ["ATL"]})
    assert [c.key for c in asked.clarifications] == ["tags"]
    text = note.read_text(encoding="utf-8")
    assert "tags: [work, urgent]" in text and "aliases: [ATL]" in text
    both = await remember(rt, "Project", "Atlas", {"tags": ["personal"]}, resolve="keep_both")
    assert not both.clarifications
    assert all(tag in note.read_text(encoding="utf-8") for tag in ("work", "urgent", "personal"))
