"""The person's note templates (named in Obsidian's settings) are not notes: never indexed, never written into.

A template's text, frontmatter included, is copied by Obsidian into every note made from it: an `engrama_id`
line written into it would travel into each of those notes, and `{{title}}` placeholders would rank in search
and feed reflect. Real vaults on disk, the real sync, the real watcher, the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_live import active_note_nodes, eventually, id_lines, new_note, node_at
from test_reflect_support import synced
from test_reflect_writeback import approved_insight, shared_sqlite

from server.live import LiveSync
from server.reflect.service import InsightWriteError, write_insight_to_vault
from server.runtime import Runtime
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


def test_a_settings_file_caught_being_written_keeps_naming_its_templates(tmp_path: Path) -> None:
    """Review 19c: a settings file read half-written (Obsidian truncates and writes; git deletes and creates) was
    taken to name nothing, and the full pass it started gave the templates their id lines."""
    path = tmp_path / ".obsidian" / "templates.json"
    (tmp_path / ".obsidian").mkdir()
    path.write_bytes(b'{"folder": "Templ')  # never read whole: names nothing
    assert templates.rules(tmp_path) == templates.NONE
    settings(tmp_path, "templates.json", {"folder": "Templates"})
    assert templates.rules(tmp_path).holds("Templates/Meeting.md")
    for caught in (b"", b'{"folder": "Temp', b"[]"):
        path.write_bytes(caught)
        assert templates.rules(tmp_path).holds("Templates/Meeting.md"), caught
    path.unlink()  # git replaces a file by deleting it and creating it again
    assert templates.rules(tmp_path).holds("Templates/Meeting.md")
    assert templates.read_templates(tmp_path) == templates.NONE  # what a process that never read it sees
    settings(tmp_path, "templates.json", {"folder": ""})  # the person clears the setting: it is read
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


# --- review 19c -----------------------------------------------------------------------------------------------


async def test_a_settings_file_saved_while_a_template_changes_never_gets_the_template_an_id(
    vault: Path, watched: tuple[Runtime, LiveSync]
) -> None:
    """Obsidian saves a settings file by truncating and writing it: a template saved in that moment was taken
    for a note, and given its id line."""
    rt, live = watched
    settings(vault, "templates.json", {"folder": "Templates"})
    await eventually(lambda: templates.rules(vault).folders == {"templates"})
    (vault / "Templates").mkdir()
    (vault / "Templates" / "Meeting.md").write_bytes(QUOTED)
    await live.wait_idle()
    config = vault / ".obsidian" / "templates.json"
    for caught in (b"", b'{"folder": "Tem'):
        config.write_bytes(caught)
        (vault / "Templates" / "Meeting.md").write_bytes(QUOTED + b"More.\n")  # saved in that moment
        await new_note(rt, vault, f"Notes/After{len(caught)}.md", "# After\n")  # the watcher went past it
        await live.wait_idle()
        settings(vault, "templates.json", {"folder": "Templates"})
        await live.wait_idle()
        assert (vault / "Templates" / "Meeting.md").read_bytes() == QUOTED + b"More.\n"
        assert await node_at(rt, "Templates/Meeting.md") is None


async def test_a_folder_of_many_notes_named_a_templates_folder_is_archived_whole(
    vault: Path, watched: tuple[Runtime, LiveSync]
) -> None:
    """The hold-back that keeps a partly mounted vault from being archived took notes that became templates
    for notes gone missing: it kept them (and warned of an unplugged drive) on every pass."""
    rt, live = watched
    for i in range(30):
        (vault / "Patterns").mkdir(exist_ok=True)
        (vault / "Patterns" / f"P{i}.md").write_text(f"# P{i}\n")
    (vault / "Kept.md").write_text("# Kept\n")
    await live.wait_idle()
    await eventually(lambda: _has(rt, "active", 31), timeout=30, what="every note in the graph")
    settings(vault, "templates.json", {"folder": "Patterns"})
    await eventually(lambda: _has(rt, "active", 1), timeout=30, what="the 30 archived")
    assert await _has(rt, "archived", 30)


async def _has(rt: Runtime, status: str, count: int) -> bool:
    sql = "select count(*) from nodes where status = ? and path is not null"
    return (await rt.store.read(lambda c: c.execute(sql, (status,)).fetchone()))[0] == count


def test_a_note_made_from_a_template_moved_since_gets_its_own_id(tmp_path: Path) -> None:
    """An older version gave the template an id line; the person moved the template inside the templates folder
    and made a note from it: the note took over the template's node (its history, its creation) as a move."""
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    (vault / "Templates").mkdir(parents=True)
    (vault / "Templates" / "Meeting.md").write_bytes(QUOTED)
    assert cli("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    [template_id] = id_lines(vault / "Templates" / "Meeting.md")
    settings(vault, "templates.json", {"folder": "Templates"})
    assert cli("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    (vault / "Templates" / "Work").mkdir()
    os.rename(vault / "Templates" / "Meeting.md", vault / "Templates" / "Work" / "Meeting.md")
    (vault / "Retro.md").write_bytes((vault / "Templates" / "Work" / "Meeting.md").read_bytes())
    done = cli("sync", "--vault", str(vault), "--db", str(db))
    assert done.returncode == 0 and "0 moved" in done.stdout, done.stdout
    [own] = id_lines(vault / "Retro.md")
    assert own != template_id
