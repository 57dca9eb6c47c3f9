"""Conflict copies a sync tool leaves beside a note are reported to the person, never synced as notes of their
own (issue 12, item 6): they carry the original's engrama_id, so a sync would call them copies and write a
fresh id into the person's file, splitting one entity into two."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server.live import live_sync
from server.runtime import Runtime, open_runtime
from server.services.errors import ServiceError
from server.services.notesync import sync_note
from server.settings import Settings
from server.status import build_status
from tests.test_live import eventually, no_leaked_threads  # noqa: F401 (an autouse fixture)
from tests.test_partial_view import active_paths

ATLAS_ID = "5b7e2c1a-9d3f-4e8a-b6c2-0f1e2d3c4b5a"
ATLAS = f"---\nengrama_id: {ATLAS_ID}\ntype: Project\n---\nAtlas maps the vault.\n"
COPIES = {  # each as its tool names it, with the other device's text
    "Projects/Atlas.sync-conflict-20240501-093000-ABCDEF1.md": "Syncthing",
    "Projects/Atlas (Ann's conflicted copy 2024-05-01).md": "Dropbox",
    "Projects/Atlas (Conflicted copy Ann's iPhone 202405010930).md": "Obsidian Sync",
    "Projects/Atlas (conflicted copy 2024-05-01 093000).md": "Nextcloud",
    "Projects/Atlas-DESKTOP-AB12CD3.md": "OneDrive",
    "Projects/Atlas_BASE_6997.md": "git mergetool, the common ancestor",  # review 22b
    "Projects/Atlas_REMOTE_6997.md": "git mergetool, the other branch",
}


def copy_text(tool: str) -> str:
    return ATLAS.replace("maps the vault", f"maps the vault, edited on the other device ({tool})")


async def status_copies(rt: Runtime) -> dict[str, str]:
    attention = (await build_status(rt))["vault"].get("attention", {})
    return {c["path"]: c["what_to_do"] for c in attention.get("conflict_copies", [])}


async def test_conflict_copies_are_reported_and_never_get_an_id_of_their_own(
    vault: Path, db_path: Path
) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        for rel, tool in COPIES.items():
            (vault / rel).write_text(copy_text(tool), encoding="utf-8")
        report = await sync.sync_vault()
        for rel, tool in COPIES.items():
            assert (vault / rel).read_text(encoding="utf-8") == copy_text(tool), f"{rel} was written to"
        assert await active_paths(rt) == {"Projects/Atlas.md"}
        assert (report.created, report.ids_injected, report.errors) == (0, [], [])
        assert {(c.path, c.copy_of) for c in report.conflict_copies} == {
            (rel, "Projects/Atlas.md") for rel in COPIES
        }
        advice = await status_copies(rt)
        assert set(advice) == set(COPIES)
        assert all("merge it into Projects/Atlas.md in Obsidian" in text for text in advice.values())
        with pytest.raises(ServiceError, match="conflict copy of 'Projects/Atlas.md'.*Merge it"):
            await sync_note(rt, "Projects/Atlas.sync-conflict-20240501-093000-ABCDEF1.md")
        for rel in COPIES:  # merged in Obsidian and deleted
            (vault / rel).unlink()
        await sync.sync_vault()
        assert await status_copies(rt) == {}


async def test_the_watcher_lists_a_conflict_copy_while_it_is_there(vault: Path, db_path: Path) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    copy = vault / "Projects/Atlas.sync-conflict-20240501-093000-ABCDEF1.md"
    async with (
        open_runtime(Settings(vault=vault, db_path=db_path)) as rt,
        live_sync(rt, quiet=0.05) as live,
    ):
        await live.wait_idle(30)
        # Syncthing writes the copy through a temp file and renames it into place.
        temp = copy.with_name(".syncthing.Atlas.md.tmp")
        temp.write_text(copy_text("Syncthing"), encoding="utf-8")
        os.rename(temp, copy)
        await eventually(lambda: status_copies(rt), timeout=30)
        await live.wait_idle(30)
        assert copy.read_text(encoding="utf-8") == copy_text("Syncthing")
        assert await active_paths(rt) == {"Projects/Atlas.md"}
        copy.unlink()  # the person merged it

        async def dropped() -> bool:
            return await status_copies(rt) == {}

        await eventually(dropped, timeout=30)
