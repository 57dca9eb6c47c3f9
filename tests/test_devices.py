"""One vault synced between two devices, each running its own engrama-vault (issue 12, item 6).

The "sync tool" here is a script: it copies notes from one vault copy to the other, as Syncthing, git or a cloud
drive would (last writer wins, file times carried over). Each device has its own database."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from profiles.loader import load_profile
from server.runtime import note_rules
from server.store import GraphStore
from vault_sync.identify import read_id
from vault_sync.reconcile import VaultSync

RULES = note_rules(load_profile("base", []))


class Device:
    def __init__(self, vault: Path, store: GraphStore) -> None:
        self.vault = vault
        self.store = store
        self.sync = VaultSync(vault, store, RULES, settle=0)

    async def nodes(self) -> dict[str, tuple[str, str | None, str]]:
        """id -> (name, path, status) of every node that is not a stub."""
        rows = await self.store.read(
            lambda c: c.execute("select id, name, path, status from nodes where status != 'stub'").fetchall()
        )
        return {r["id"]: (r["name"], r["path"], r["status"]) for r in rows}

    async def edges(self) -> set[tuple[str, str, str]]:
        rows = await self.store.read(
            lambda c: c.execute(
                "select e.source, e.type, t.name from edges e join nodes t on t.id = e.target "
                "where e.valid_to is null"
            ).fetchall()
        )
        return {(r[0], r[1], r[2]) for r in rows}


def carry(source: Path, target: Path, *paths: str) -> None:
    """The sync tool: the source device's version of each note wins on the target device."""
    for rel in paths:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target / rel)


@pytest.fixture
async def devices(tmp_path: Path) -> AsyncIterator[tuple[Device, Device]]:
    laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"
    laptop.mkdir()
    desktop.mkdir()
    a = await GraphStore.open(tmp_path / "laptop.db")
    b = await GraphStore.open(tmp_path / "desktop.db")
    try:
        yield Device(laptop, a), Device(desktop, b)
    finally:
        await a.close()
        await b.close()


async def test_a_note_created_on_one_device_has_the_same_node_id_on_both(
    devices: tuple[Device, Device],
) -> None:
    laptop, desktop = devices
    (laptop.vault / "Garden.md").write_text("Plans for the garden.\n", encoding="utf-8")
    await laptop.sync.sync_vault()
    carry(laptop.vault, desktop.vault, "Garden.md")
    await desktop.sync.sync_vault()
    assert set(await laptop.nodes()) == set(await desktop.nodes())
    assert (desktop.vault / "Garden.md").read_bytes() == (laptop.vault / "Garden.md").read_bytes()


async def test_a_note_whose_id_was_changed_by_the_other_device_rekeys_its_node(
    devices: tuple[Device, Device],
) -> None:
    laptop, desktop = devices
    # Both devices see the note before either one's id has travelled: each gives it an id of its own.
    for device in devices:
        (device.vault / "Garden.md").write_text("---\nstatus: draft\n---\nPlans.\n", encoding="utf-8")
        (device.vault / "Tools.md").write_text("The spade is in the [[Garden]] shed.\n", encoding="utf-8")
        await device.sync.sync_vault()
    laptop_id = read_id((laptop.vault / "Garden.md").read_bytes())
    desktop_id = read_id((desktop.vault / "Garden.md").read_bytes())
    assert laptop_id and desktop_id and laptop_id != desktop_id
    # The laptop edits the note (a property change that history keeps), then the desktop's version wins.
    (laptop.vault / "Garden.md").write_text(
        f"---\nstatus: active\nengrama_id: {laptop_id}\n---\nPlans.\n", encoding="utf-8"
    )
    await laptop.sync.sync_vault()
    carry(desktop.vault, laptop.vault, "Garden.md", "Tools.md")
    report = await laptop.sync.sync_vault()
    assert report.errors == [] and report.archived == 0
    nodes = await laptop.nodes()
    assert laptop_id not in nodes and nodes[desktop_id] == ("Garden", "Garden.md", "active")
    assert sorted(name for name, _, _ in nodes.values()) == ["Garden", "Tools"]  # nothing split in two
    tools = read_id((laptop.vault / "Tools.md").read_bytes())
    assert (tools, "LINKS_TO", "Garden") in await laptop.edges()
    history = await laptop.store.read(
        lambda c: c.execute("select node_id, key from property_history").fetchall()
    )
    # draft -> active on the laptop, then back to the desktop's draft: both kept, under the new id.
    assert [(r["node_id"], r["key"]) for r in history] == [(desktop_id, "status")] * 2
    # Both devices now hold the same notes with the same ids, and nothing more.
    assert set(await laptop.nodes()) == set(await desktop.nodes())
