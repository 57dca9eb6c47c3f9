"""Applying the same note again leaves its node as it was (no new `updated_at`, no reset of decay).

A process without the vault's lease cannot write a note's id line, so a note whose line the person removed is
applied again on every pass until the lease holder writes it back. Each pass used to stamp the node as edited
now: the brief listed it as edited again and again, and recency favoured it."""

from __future__ import annotations

import time
from pathlib import Path

from profiles.loader import load_profile
from server.runtime import note_rules
from server.store import GraphStore
from vault_sync.reconcile import VaultSync

RULES = note_rules(load_profile("base", []))


async def node_row(store: GraphStore, path: str) -> tuple[str, str]:
    row = await store.read(
        lambda c: c.execute("select id, updated_at from nodes where path = ?", (path,)).fetchone()
    )
    return row["id"], row["updated_at"]


def without_id_line(note: Path) -> None:
    note.write_text(
        "".join(line for line in note.read_text().splitlines(keepends=True) if "engrama_id" not in line)
    )


async def test_a_follower_applying_a_note_that_owes_its_id_line_does_not_mark_it_edited_each_pass(
    vault: Path, db_path: Path
) -> None:
    note = vault / "Projects" / "Harbor.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\ntype: Project\n---\nThe harbor analytics project.\n")
    store = await GraphStore.open(db_path)
    try:
        await VaultSync(vault, store, RULES, settle=0).sync_vault()
        node_id, first = await node_row(store, "Projects/Harbor.md")
        without_id_line(note)  # the person removes the line; only the lease holder may write it back
        follower = VaultSync(vault, store, RULES, settle=0, writable=False)
        await follower.sync_vault()
        same_id, edited = await node_row(store, "Projects/Harbor.md")
        assert same_id == node_id and "engrama_id" not in note.read_text()
        time.sleep(1.1)  # updated_at has a resolution of one second
        for _ in range(3):
            await follower.sync_vault()
        assert await node_row(store, "Projects/Harbor.md") == (node_id, edited)
        # An edit the person makes is still an edit.
        note.write_text(note.read_text() + "Now with a dashboard.\n")
        await follower.sync_vault()
        _, after_edit = await node_row(store, "Projects/Harbor.md")
        assert after_edit > edited >= first
    finally:
        await store.close()
