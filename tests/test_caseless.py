"""Notes on a file system that ignores case and Unicode normalization in names (macOS's APFS and Windows' NTFS
by default), where `Atlas.md` still opens the file after it was renamed `atlas.md`.

Linux's usual file systems are case-sensitive, so these tests run where the temporary folder ignores case
(macOS, Windows) or on the folder `ENGRAMA_TEST_CASELESS_DIR` names (a case-insensitive mount on Linux, such
as vfat or a FUSE folder); elsewhere they are skipped.
"""

from __future__ import annotations

import os
import unicodedata
import uuid
from pathlib import Path

import pytest

from profiles.loader import load_profile
from server.runtime import note_rules
from server.store import GraphStore
from vault_sync.identify import read_id
from vault_sync.paths import spelled_as_listed
from vault_sync.reconcile import VaultSync
from vault_sync.scan import presence


def _ignores_case(folder: Path) -> bool:
    probe = folder / f"Probe-{uuid.uuid4().hex}.md"
    probe.write_text("", encoding="utf-8")
    try:
        return (folder / probe.name.lower()).exists()
    finally:
        probe.unlink()


@pytest.fixture
def caseless(tmp_path: Path) -> Path:
    """A fresh vault folder on a file system that ignores case."""
    base = Path(os.environ.get("ENGRAMA_TEST_CASELESS_DIR") or tmp_path)
    if not _ignores_case(base):
        pytest.skip("no case-insensitive folder here (set ENGRAMA_TEST_CASELESS_DIR to one)")
    vault = base / f"vault-{uuid.uuid4().hex[:8]}"
    vault.mkdir()
    return vault


def engine(vault: Path, store: GraphStore) -> VaultSync:
    return VaultSync(vault, store, note_rules(load_profile("base", [])))


async def nodes(store: GraphStore) -> list[tuple[str, str, str | None]]:
    sql = "select id, status, path from nodes where status != 'stub' order by path"
    return [tuple(r) for r in await store.read(lambda c: c.execute(sql).fetchall())]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Atlas.md", "atlas.md"),
        ("Projects/Atlas.md", "projects/Atlas.md"),
        (unicodedata.normalize("NFC", "Café.md"), unicodedata.normalize("NFD", "Café.md")),
    ],
    ids=["note case", "folder case", "composed to decomposed"],
)
async def test_a_rename_to_another_spelling_keeps_the_notes_identity(
    caseless: Path, db_path: Path, old: str, new: str
) -> None:
    """Found by review (on an emulated case-insensitive file system): the old path still opened the renamed
    file, so the rename was taken for a copy (the note got a new id, its history went with the old node) and
    the old node stayed active at a path the vault no longer lists: every search showed the note twice."""
    (caseless / old).parent.mkdir(exist_ok=True)
    (caseless / old).write_text("# Atlas\nzebra crossings\n", encoding="utf-8")
    store = await GraphStore.open(db_path)
    try:
        sync = engine(caseless, store)
        await sync.sync_vault()
        node_id = read_id((caseless / old).read_bytes())
        assert node_id is not None
        written = (caseless / old).read_bytes()
        if "/" in old:
            os.rename(caseless / old.split("/")[0], caseless / new.split("/")[0])
        else:
            os.rename(caseless / old, caseless / new)
        assert spelled_as_listed(caseless, new) and not spelled_as_listed(caseless, old)
        assert presence(caseless, old).state == "gone"  # opens the file, but under another name
        report = await sync.sync_vault()
        assert (report.created, report.archived, report.errors) == (0, 0, [])
        assert await nodes(store) == [(node_id, "active", new)]
        assert (caseless / new).read_bytes() == written
        # The watcher reports both spellings; either order keeps one node, at the new spelling.
        await sync.sync_path(old)
        await sync.sync_path(new)
        assert await nodes(store) == [(node_id, "active", new)]
        assert [p.name for p in caseless.rglob("*.md")] == [Path(new).name]
        assert read_id((caseless / new).read_bytes()) == node_id
    finally:
        await store.close()
