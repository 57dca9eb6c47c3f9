"""A database made by an older version, upgraded in place: what the person decided and what their notes say hold.

Migrations 17 and 18 have every note read once more (the same bytes: no news), so this version keeps what older
ones did not (tags, insight sections, property words). Review 23c found that re-read doing more than it should on
databases from before migration 17: a note the person had purged came back, and a note edited while no server ran
got history saying its tags had just been added. A database "from before migration 17" is made here as that
version left it: the tables and rows of migrations 17 and later taken out, and the tags out of the graph.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.runtime import open_runtime
from server.services.forget import forget
from server.settings import Settings
from server.store import database, migrations
from server.store.database import connect_sync


def _as_before_migration_17(db_path: Path, untagged: list[str] = ()) -> int:  # type: ignore[assignment]
    """Take the database back to schema 16 (the nodes of `untagged` without the tags older versions did not
    keep), then upgrade it; returns how many migrations ran."""
    conn, _ = connect_sync(db_path)
    try:
        conn.execute("begin immediate")
        for table in ("insight_sections", "kept_writes"):
            conn.execute(f"drop table {table}")
        conn.execute("delete from schema_migrations where number >= 17")
        for name in untagged:
            (properties,) = conn.execute("select properties from nodes where name = ?", (name,)).fetchone()
            stated = json.loads(properties)
            stated.pop("tags", None)
            conn.execute("update nodes set properties = ? where name = ?", (json.dumps(stated), name))
        conn.execute("commit")
        return migrations.apply_migrations(conn)
    finally:
        conn.close()


async def test_a_note_purged_before_the_upgrade_stays_out_of_the_graph(vault: Path, db_path: Path) -> None:
    """Review 23c: the upgrade marked every file to be read again, the purged note's too, and the next pass made
    its entity anew: back in search and in the brief, though the person had asked for it to be forgotten."""
    (vault / "Ideas").mkdir()
    (vault / "Ideas/Purged Idea.md").write_text("---\ntype: Concept\n---\nA zanzibar thought.\n", "utf-8")
    (vault / "Ideas/Kept Idea.md").write_text("---\ntype: Concept\n---\nAnother thought.\n", "utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        await forget(rt, "Purged Idea", mode="purge")
        assert await rt.store.find_nodes("Purged Idea", include_archived=True) == []
    assert _as_before_migration_17(db_path) == len(migrations.MIGRATIONS) - 16
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        assert await rt.store.find_nodes("Purged Idea", include_archived=True) == []
        assert [n.name for n in await rt.store.find_nodes("Kept Idea")] == ["Kept Idea"]
    assert "zanzibar" in (vault / "Ideas/Purged Idea.md").read_text(
        encoding="utf-8"
    )  # the note is the person's


async def test_tags_an_older_version_did_not_keep_are_no_news_when_the_note_was_edited_meanwhile(
    vault: Path, db_path: Path
) -> None:
    """Review 23c: a note with tags, synced by a version that kept no tags, then edited while no server ran: the
    upgraded version recorded "tags: (unset) -> [memory, q3-goals]" in the history (and the brief said so),
    though the tags had been there all along. The edit itself is news; the tags are not."""
    (vault / "Projects").mkdir()
    note = vault / "Projects/Engrama.md"
    note.write_text(
        "---\ntype: Project\nstatus: active\ntags: [memory, q3-goals]\n---\nFirst words.\n", "utf-8"
    )
    settings = Settings(vault=vault, db_path=db_path, watch=False)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
    _as_before_migration_17(db_path, untagged=["Engrama"])
    text = note.read_text(encoding="utf-8")
    note.write_text(text.replace("status: active", "status: paused") + "More words.\n", "utf-8")
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        [node] = await rt.store.find_nodes("Engrama")
        changed = await rt.store.read(
            lambda c: [
                r[0] for r in c.execute("select key from property_history where node_id = ?", (node.id,))
            ]
        )
        assert node.properties["tags"] == ["memory", "q3-goals"]
    assert changed == ["status"]  # the person's edit, and nothing about the tags


def test_a_database_another_process_is_upgrading_is_waited_for(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 23c: two servers started together on a database needing an upgrade (both MCP clients opened after
    an update): one ran a migration longer than the busy timeout (10.5 s at 10,000 notes), and the other exited
    saying another program held the database. Opening a database that is behind waits for the upgrade."""
    conn, _ = connect_sync(db_path)
    conn.execute("drop table kept_writes")
    conn.execute("delete from schema_migrations where number = ?", (migrations.MIGRATIONS[-1][0],))
    conn.close()
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 500)  # the usual wait, made short
    upgrading = subprocess.Popen(  # the other process, in the middle of a long migration (a process of its
        [  # own: SQLite's locks are the process's, so a connection of this one would not be kept out)
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('begin immediate')\n"
            "print('holding', flush=True)\n"
            "time.sleep(2.0)\n"
            "c.execute('commit')\n",
            str(db_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert upgrading.stdout is not None and upgrading.stdout.readline().strip() == "holding"
    started = time.monotonic()
    try:
        opened, _ = connect_sync(db_path)
    finally:
        upgrading.wait(timeout=30)
    assert time.monotonic() - started >= 1.5
    (newest,) = opened.execute("select max(number) from schema_migrations").fetchone()
    opened.close()
    assert newest == migrations.MIGRATIONS[-1][0]
