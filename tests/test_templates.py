"""The person's note templates (named in Obsidian's settings) are not notes: never indexed, never written into.

A template's text, frontmatter included, is copied by Obsidian into every note made from it: an `engrama_id`
line written into it would travel into each of those notes, and `{{title}}` placeholders would rank in search
and feed reflect. Real vaults on disk, the real sync, the real watcher, the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_live import active_note_nodes, eventually, id_lines, new_note, node_at
from test_reflect_support import synced
from test_reflect_writeback import approved_insight, shared_sqlite

from server.live import LiveSync, live_sync
from server.reflect.service import InsightWriteError, write_insight_to_vault
from server.runtime import Runtime, open_runtime
from server.settings import Settings
from vault_sync import templates
from vault_sync.errors import VaultError
from vault_sync.writer import create_note

SCRIPT = str(Path(sys.executable).parent / "engrama-vault")
# `date: {{date}}` is not valid YAML (a flow mapping as a key): templates are often no valid notes at all,
# and the sync used to report them as broken notes to fix.
MEETING = b"---\ntags: [meeting]\ndate: {{date}}\n---\n# {{title}}\n\nAttendees:\n- \n\n## Notes\n"
QUOTED = MEETING.replace(b"{{date}}\n---", b'"{{date}}"\n---')


def settings(vault: Path, rel: str, data: object) -> None:
    path = vault / ".obsidian" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, env=dict(os.environ))


# --- what the settings name -------------------------------------------------------------------------------


def test_the_templates_every_setting_names_are_read(tmp_path: Path) -> None:
    settings(tmp_path, "templates.json", {"folder": "Templates/", "dateFormat": "YYYY-MM-DD"})
    settings(tmp_path, "plugins/templater-obsidian/data.json", {"templates_folder": "Meta\\Templater"})
    settings(tmp_path, "daily-notes.json", {"folder": "Daily", "template": "Setup/Daily template"})
    settings(
        tmp_path,
        "plugins/periodic-notes/data.json",
        {
            "daily": {"enabled": True, "template": "Setup/Day.md"},
            "weekly": {"template": ""},
            "showGettingStarted": False,
        },
    )
    found = templates.read_templates(tmp_path)
    assert found.folders == {"templates", "meta/templater"}
    assert found.files == {"setup/daily template.md", "setup/day.md"}
    assert found.holds("Templates/Meeting.md") and found.holds("Templates/Sub/Deep.md")
    assert found.holds("templates/meeting.md")  # Obsidian on macOS and Windows matches a folder caselessly
    assert found.holds("Meta/Templater/Weekly.md") and found.holds("Setup/Daily template.md")
    assert not found.holds("Setup/Other.md") and not found.holds("Templates.md")
    assert not found.holds("Daily/2024-05-01.md") and not found.holds("Notes/Templates/x.md")
    assert (
        found.holds_folder("Templates")
        and found.holds_folder("Templates/Sub")
        and not found.holds_folder("Meta")
    )


def test_a_template_path_in_either_unicode_form_is_the_same(tmp_path: Path) -> None:
    settings(tmp_path, "templates.json", {"folder": "Mod\u00e8les"})  # composed, as typed into a setting
    assert templates.read_templates(tmp_path).holds(
        "Mode\u0300les/R\u00e9union.md"
    )  # decomposed, as macOS saves


@pytest.mark.parametrize(
    "value", ["", "/", "./", "..", "../Elsewhere", "~/Templates", None, 7, ["Templates"], {"x": 1}]
)
def test_a_setting_naming_the_vault_root_or_outside_it_or_nothing_names_no_template(
    tmp_path: Path, value: object
) -> None:
    settings(tmp_path, "templates.json", {"folder": value})
    settings(tmp_path, "daily-notes.json", {"template": value})
    assert templates.read_templates(tmp_path) == templates.NONE
    assert not templates.read_templates(tmp_path).holds("Notes/Anything.md")


def test_unreadable_settings_name_nothing_and_a_changed_one_is_read_again(tmp_path: Path) -> None:
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / ".obsidian" / "templates.json").write_bytes(b'{"folder": "Templ')  # written half-way
    assert templates.rules(tmp_path) == templates.NONE
    settings(tmp_path, "templates.json", {"folder": "Templates"})
    assert templates.rules(tmp_path).holds("Templates/Meeting.md")
    (tmp_path / ".obsidian" / "templates.json").unlink()
    assert templates.rules(tmp_path) == templates.NONE


# --- the sync, through the command a person runs ----------------------------------------------------------


def test_a_sync_leaves_templates_byte_for_byte_and_out_of_search(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    (vault / "Templates").mkdir(parents=True)
    (vault / "Notes").mkdir()
    (vault / "Templates" / "Meeting.md").write_bytes(MEETING)
    (vault / "Notes" / "Standup.md").write_text("Weekly sync with the attendees about the roadmap.\n")
    (vault / "Setup").mkdir()
    (vault / "Setup" / "Daily.md").write_bytes(b"# {{date}}\n\nAttendees and plans of the day\n")
    settings(vault, "templates.json", {"folder": "Templates"})
    settings(vault, "daily-notes.json", {"template": "Setup/Daily"})
    done = cli("sync", "--vault", str(vault), "--db", str(db))
    assert done.returncode == 0 and "0 failed" in done.stdout, done.stdout + done.stderr
    assert (vault / "Templates" / "Meeting.md").read_bytes() == MEETING
    assert b"engrama_id" not in (vault / "Setup" / "Daily.md").read_bytes()
    assert b"engrama_id: " in (vault / "Notes" / "Standup.md").read_bytes()
    found = cli("search", "--vault", str(vault), "--db", str(db), "--json", "attendees")
    assert found.returncode == 0, found.stderr
    assert [hit["path"] for hit in json.loads(found.stdout)["results"]] == ["Notes/Standup.md"]


def test_a_template_indexed_before_its_folder_was_named_is_archived_and_a_note_made_from_it_gets_its_own_id(
    tmp_path: Path,
) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    (vault / "Templates").mkdir(parents=True)
    (vault / "Templates" / "Meeting.md").write_bytes(QUOTED)
    assert cli("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    adopted = (vault / "Templates" / "Meeting.md").read_bytes()  # an older version gave it an id line
    [template_id] = id_lines(vault / "Templates" / "Meeting.md")
    settings(vault, "templates.json", {"folder": "Templates"})
    done = cli("sync", "--vault", str(vault), "--db", str(db))
    assert done.returncode == 0 and "1 archived" in done.stdout, done.stdout + done.stderr
    assert (vault / "Templates" / "Meeting.md").read_bytes() == adopted  # not written again
    (vault / "Retro.md").write_bytes(adopted)  # a note made from the template, its id line copied along
    assert cli("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    [own] = id_lines(vault / "Retro.md")
    assert own != template_id
    assert (vault / "Retro.md").read_bytes() == adopted.replace(template_id.encode(), own.encode())


# --- live: the watcher, and the settings changing under it ------------------------------------------------


@pytest.fixture
async def watched(vault: Path, db_path: Path) -> AsyncIterator[tuple[Runtime, LiveSync]]:
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt, live_sync(rt, quiet=0.05) as live:
        await live.wait_idle()
        yield rt, live


async def test_a_template_saved_while_watched_is_never_given_an_id(
    vault: Path, watched: tuple[Runtime, LiveSync]
) -> None:
    rt, live = watched
    settings(vault, "templates.json", {"folder": "Templates"})
    await eventually(lambda: templates.rules(vault).folders == {"templates"})
    (vault / "Templates").mkdir()
    (vault / "Templates" / "Meeting.md").write_bytes(QUOTED)
    await new_note(rt, vault, "Notes/After.md", "# After\n")  # saved after it: its id line is written
    await live.wait_idle()
    assert (vault / "Templates" / "Meeting.md").read_bytes() == QUOTED
    assert await node_at(rt, "Templates/Meeting.md") is None


async def test_naming_a_templates_folder_while_watched_archives_its_notes_and_unnaming_it_brings_them_back(
    vault: Path, watched: tuple[Runtime, LiveSync]
) -> None:
    rt, _ = watched
    node_id = await new_note(rt, vault, "Patterns/Meeting.md", "# Meeting\nagenda attendees\n")
    kept = await new_note(rt, vault, "Notes/Kept.md", "# Kept\n")
    settings(vault, "plugins/templater-obsidian/data.json", {"templates_folder": "Patterns"})
    row = await eventually(
        lambda: _with_status(rt, "Patterns/Meeting.md", "archived"), what="the template archived"
    )
    assert row["id"] == node_id
    assert [r["id"] for r in await active_note_nodes(rt)] == [kept]
    settings(vault, "plugins/templater-obsidian/data.json", {"templates_folder": ""})
    row = await eventually(lambda: _with_status(rt, "Patterns/Meeting.md", "active"), what="the note back")
    assert row["id"] == node_id  # its id line kept its identity


async def _with_status(rt: Runtime, rel: str, status: str):
    row = await node_at(rt, rel)
    return row if row is not None and row["status"] == status else None


# --- writes ------------------------------------------------------------------------------------------------


def test_the_writer_refuses_to_create_or_edit_a_template(tmp_path: Path) -> None:
    settings(tmp_path, "templates.json", {"folder": "Templates"})
    with pytest.raises(VaultError, match="templates"):
        create_note(tmp_path, "Templates/New.md", b"# New\n")
    assert not (tmp_path / "Templates").exists()
    create_note(tmp_path, "Notes/New.md", b"# New\n")


async def test_an_insight_is_not_written_into_a_template(vault: Path, db_path: Path) -> None:
    shared_sqlite(vault)
    (vault / "Templates").mkdir()
    (vault / "Templates" / "Ideas.md").write_bytes(MEETING)
    settings(vault, "templates.json", {"folder": "Templates"})
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        with pytest.raises(InsightWriteError, match="templates"):
            await write_insight_to_vault(rt, insight_id, target_note="Templates/Ideas")
    assert (vault / "Templates" / "Ideas.md").read_bytes() == MEETING
