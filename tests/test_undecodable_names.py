"""A note or folder whose name is not UTF-8 (legal on Linux: an archive unpacked from an old Windows or Mac system)
is reported for the person to rename, and the rest of the vault syncs (review 19a: one such name stopped every
sync with a traceback, the notes already given their id line had no node, and a server retried for good)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_live import eventually, node_at

from server.live import LiveSync
from server.runtime import Runtime
from vault_sync.scan import scan_vault

SCRIPT = str(Path(sys.executable).parent / "engrama-vault")

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="only Linux file systems take any bytes as a name"
)


def misnamed(vault: Path) -> None:
    """A note named in Latin-1 (`café.md`), and a folder so named holding a note (with an id line already)."""
    base = os.fsencode(vault)
    with open(base + b"/caf\xe9.md", "wb") as f:
        f.write(b"latin-1 named note\n")
    os.mkdir(base + b"/R\xe9sum\xe9s")
    with open(base + b"/R\xe9sum\xe9s/Plan.md", "wb") as f:
        f.write(b"---\nengrama_id: 01900000-0000-7000-8000-000000000001\n---\nplan\n")


def test_the_walk_reports_them_and_lists_every_other_note(vault: Path) -> None:
    for i in range(3):
        (vault / f"Good{i}.md").write_text(f"good note {i}\n")
    misnamed(vault)
    found = scan_vault(vault)
    assert [n.rel_path for n in found.notes] == ["Good0.md", "Good1.md", "Good2.md"]
    assert sorted(path for path, _ in found.errors) == ["R\\xe9sum\\xe9s", "caf\\xe9.md"]
    assert all("not valid UTF-8; rename it" in why for _, why in found.errors)
    json.dumps(found.errors)  # storable and printable as they are


def test_the_sync_command_syncs_the_rest_and_says_which_to_rename(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    for i in range(3):
        (vault / f"Good{i}.md").write_text(f"good note {i}\n")
    misnamed(vault)
    done = subprocess.run(
        [SCRIPT, "sync", "--vault", str(vault), "--db", str(db), "--json"], capture_output=True, text=True
    )
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["created"] == 3 and sorted(e["path"] for e in report["errors"]) == [
        "R\\xe9sum\\xe9s",
        "caf\\xe9.md",
    ]
    again = subprocess.run(
        [SCRIPT, "search", "--vault", str(vault), "--db", str(db), "--json", "good note"],
        capture_output=True,
        text=True,
    )
    assert sorted(h["path"] for h in json.loads(again.stdout)["results"]) == [
        "Good0.md",
        "Good1.md",
        "Good2.md",
    ]


async def test_one_made_while_watched_leaves_the_server_in_step(
    vault: Path, watched: tuple[Runtime, LiveSync]
) -> None:
    rt, live = watched
    misnamed(vault)
    (vault / "After.md").write_text("# After\nwritten after them\n")
    await eventually(lambda: node_at(rt, "After.md"), what="the next note in the graph")
    await live.wait_idle()
    reconciler = live.reconciler
    assert reconciler is not None and reconciler.pending == 0
    passes = reconciler.full_passes
    reconciler.request_full_pass("test")  # the walk meets them: reported, not retried for good
    await eventually(lambda: reconciler.full_passes > passes, what="the full pass")
    await live.wait_idle()
    assert reconciler.pending == 0
    (vault / "After.md").write_text("# After\nedited after the pass\n")
    await eventually(lambda: _searchable(rt, "edited"), what="an edit after the pass in the graph")


async def _searchable(rt: Runtime, word: str) -> bool:
    sql = "select 1 from chunks_fts where chunks_fts match ?"
    return await rt.store.read(lambda c: c.execute(sql, (f'"{word}"',)).fetchone()) is not None
