"""Paths a tool is given name the notes the sync knows (review 21c): a Windows-style or `./`-style path, and a
path through a folder that is a link to another folder of the vault, are the note at its real place, never a
second note with the same id; and `engrama_ingest` reads only what `engrama_read_note` would.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.settings import Settings
from tests.test_tools import call_error, call_ok, connected

ENGRAMA = "---\ntype: Project\nstatus: active  # mine\n---\nEngrama keeps memory in a vault.\n"


@pytest.fixture
def settings(vault: Path, db_path: Path) -> Settings:
    (vault / "Projects").mkdir()
    (vault / "Projects/Engrama.md").write_text(ENGRAMA, encoding="utf-8")
    return Settings(vault=vault, db_path=db_path, watch=False)


@pytest.mark.parametrize(
    "given",
    [
        "Projects\\Engrama.md",
        "./Projects/Engrama.md",
        "Projects//Engrama.md",
        "Projects/../Projects/Engrama.md",
    ],
)
async def test_a_note_synced_by_another_spelling_of_its_path_keeps_its_identity(
    settings: Settings, vault: Path, given: str
) -> None:
    async with connected(settings) as client:
        await call_ok(
            client,
            "engrama_remember",
            {"label": "Project", "name": "Engrama", "properties": {"owner": "Maya"}},
        )
        before = await call_ok(client, "engrama_context", {"name": "Engrama"})
        text = (vault / "Projects/Engrama.md").read_bytes()
        synced = await call_ok(client, "engrama_sync_note", {"path": given})
        assert synced["action"] == "unchanged" and synced["id"] == before["node"]["id"], synced
        assert (vault / "Projects/Engrama.md").read_bytes() == text  # no new id written over the note's
        after = await call_ok(client, "engrama_context", {"name": "Engrama"})
        assert after["node"]["id"] == before["node"]["id"] and not after.get("also_named"), after
        assert len(after["history"]) == len(before["history"]) >= 1
        found = await call_ok(client, "engrama_search", {"query": "Engrama keeps memory"})
        assert [r["path"] for r in found["results"]].count("Projects/Engrama.md") == 1


@pytest.mark.skipif(os.name == "nt", reason="folder symlinks need privileges on Windows")
async def test_a_note_named_through_a_linked_folder_is_the_note_at_its_real_place(
    settings: Settings, vault: Path
) -> None:
    (vault / "Proj").symlink_to(vault / "Projects", target_is_directory=True)
    async with connected(settings) as client:
        before = await call_ok(client, "engrama_context", {"name": "Engrama"})
        mtime = (vault / "Projects/Engrama.md").stat().st_mtime_ns
        text = (vault / "Projects/Engrama.md").read_bytes()
        synced = await call_ok(client, "engrama_sync_note", {"path": "Proj/Engrama.md"})
        assert synced["id"] == before["node"]["id"] and synced["action"] == "unchanged", synced
        report = await call_ok(client, "engrama_sync_vault", {"folder": "Proj"})
        assert report["created"] == 0 and not report["ids_injected"], report
        assert (vault / "Projects/Engrama.md").read_bytes() == text
        assert (vault / "Projects/Engrama.md").stat().st_mtime_ns == mtime  # not even written the same
        found = await call_ok(client, "engrama_search", {"query": "Engrama keeps memory"})
        assert [r["path"] for r in found["results"]] == ["Projects/Engrama.md"], found
        read = await call_ok(client, "engrama_read_note", {"path": "Proj/Engrama.md"})
        assert read["path"] == "Projects/Engrama.md"


async def test_ingest_reads_no_settings_trash_or_conflict_copy(settings: Settings, vault: Path) -> None:
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian/app.json").write_text('{"apiKey": "sk-secret"}', encoding="utf-8")
    (vault / ".obsidian/plugin.md").write_text("token: sk-secret\n", encoding="utf-8")
    (vault / ".trash").mkdir()
    (vault / ".trash/Old.md").write_text("deleted words\n", encoding="utf-8")
    (vault / "Projects/Engrama.sync-conflict-20240501-093000-ABCDEF1.md").write_text(
        "copy\n", encoding="utf-8"
    )
    async with connected(settings) as client:
        for path in (".obsidian/app.json", ".obsidian/plugin.md", ".trash/Old.md"):
            said = await call_error(client, "engrama_ingest", {"source": path, "source_type": "note"})
            assert "sk-secret" not in said and "deleted words" not in said
        said = await call_error(
            client,
            "engrama_ingest",
            {"source": "Projects/Engrama.sync-conflict-20240501-093000-ABCDEF1.md", "source_type": "note"},
        )
        assert "conflict copy" in said
        own = await call_ok(
            client, "engrama_ingest", {"source": "Projects\\Engrama.md", "source_type": "note"}
        )
        assert "Engrama keeps memory" in own["content"]
        assert all(e["name"] != "Engrama" for e in own["existing"]), own[
            "existing"
        ]  # not a duplicate of itself
