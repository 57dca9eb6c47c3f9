"""A partial view of the vault never archives what it cannot see (issue 12, item 5).

An unplugged drive, a folder that cannot be listed, a cloud folder whose notes are placeholders, an empty
mount point: each looks like "the notes are gone" to a scan or to the watcher's deleted events. Real vaults on
disk, the real watcher, the real console script; folders made unreadable with chmod are read by a child
process without root's DAC override (setpriv), since root reads them anyway.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from server.live import live_sync
from server.runtime import Runtime, open_runtime
from server.services.errors import ServiceError
from server.services.notesync import sync_note
from server.services.remember import remember
from server.settings import Settings
from server.status import build_status
from tests.test_e2e_stdio import call
from tests.test_live import eventually, no_leaked_threads  # noqa: F401 (an autouse fixture)
from vault_sync.errors import VaultError
from vault_sync.reconcile import HOLD_BACK_MIN, HOLD_BACK_SHARE
from vault_sync.report import FAILED
from vault_sync.watch import FOLDER, NOTE

COMMAND = Path(sys.executable).parent / "engrama-vault"
NOTES = {
    "Inbox.md": "A loose thought.\n",
    "Projects/Atlas.md": "---\ntype: Project\n---\nAtlas maps the [[Inbox]].\n",
    "Projects/Zephyr.md": "Zephyr is a wind.\n",
    "Areas/Deep/Garden.md": "Tomatoes and basil.\n",
}
needs_cli = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


def fill(vault: Path, notes: dict[str, str]) -> None:
    for rel, text in notes.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


async def active_paths(rt: Runtime) -> set[str]:
    sql = "select path from nodes where status = 'active' and path is not null"
    return {row[0] for row in await rt.store.read(lambda c: c.execute(sql).fetchall())}


def handled(caplog: pytest.LogCaptureFixture, archived: set[str], path: str) -> bool:
    """True once the live sync has dealt with `path`: archived it, or said why it left it as it was."""
    if path in archived:
        return True
    parts = path.split("/")
    folders = ["/".join(parts[:i]) for i in range(1, len(parts))]
    said = [r.getMessage() for r in caplog.records]
    return any(f"{path} not archived" in m or any(f"folder {f} " in m for f in folders) for m in said)


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    fill(vault, NOTES)
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as runtime:
        yield runtime


# --- the vault root goes away ---------------------------------------------------------------------------------


async def test_a_vault_whose_drive_goes_away_under_the_watcher_keeps_every_note(
    rt: Runtime, vault: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with live_sync(rt, quiet=0.3) as live:  # a wide window: the whole removal lands inside it
        await live.wait_idle(30)
        assert await active_paths(rt) == set(NOTES)
        caplog.set_level(logging.INFO, logger="vault_sync")
        shutil.copytree(vault, tmp_path / "drive", symlinks=True)
        shutil.rmtree(vault)  # unplugged: a deleted event for every note and folder, then for the root

        async def all_handled() -> bool:
            archived = set(NOTES) - await active_paths(rt)
            # Each deletion is handled, or comes after the root went and is dropped as the watcher's events
            # are once the vault's path leads nowhere (the watcher then stops: nothing more can arrive).
            reconciler = live.reconciler
            gone = reconciler is not None and not reconciler.watching
            return gone or all(handled(caplog, archived, path) for path in NOTES)

        await eventually(all_handled, timeout=30)
        await live.wait_idle(30)
        assert await active_paths(rt) == set(NOTES), "notes were archived while the drive was away"
    shutil.copytree(tmp_path / "drive", vault, symlinks=True)  # plugged back in
    report = await rt.require_sync().sync_vault()
    assert (report.archived, report.unchanged) == (0, len(NOTES))


async def test_deleted_changes_after_the_root_went_away_archive_nothing(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    async with live_sync(rt, quiet=0.05) as live:
        await live.wait_idle(30)
        assert live.reconciler is not None
        os.rename(vault, tmp_path / "unmounted")  # the root vanishes at once, as when a share is unmounted
        live.reconciler.changed([(NOTE, "Inbox.md"), (NOTE, "Projects/Zephyr.md"), (FOLDER, "Areas")])
        await live.wait_idle(30)
        assert await active_paths(rt) == set(NOTES)
        with pytest.raises(ServiceError, match="not archived: the vault folder .* is missing"):
            await sync_note(rt, "Projects/Atlas.md")
    assert await active_paths(rt) == set(NOTES)


async def test_the_empty_mount_point_of_a_share_archives_nothing_and_takes_no_note(
    rt: Runtime, vault: Path, tmp_path: Path
) -> None:
    """Review 19b: a share unmounted leaves its mount point, an empty folder. A pass (the CLI's sync, or a server
    walking a network vault every few seconds) took it for a vault whose every note went, and archived them all
    (a small vault is under the hold-back), and the next remember wrote its note into the bare mount point,
    where it was hidden once the share came back. (A delete the watcher saw is archived: an unmount is not
    reported as one.)"""
    sync = rt.require_sync()
    await sync.sync_vault()
    shutil.move(str(vault), str(tmp_path / "share"))  # unmounted: the mount point stays, empty
    vault.mkdir()
    held = await sync.sync_vault()
    assert (held.archived, held.archive_held_back) == (0, len(NOTES)), held
    assert held.archive_hint is not None and "share or drive that is not mounted" in held.archive_hint
    # A note looked at on its own (a watcher's event, a note owed its id line checked again: review 19d)
    assert (await sync.sync_path("Projects/Zephyr.md")).action == FAILED
    assert await active_paths(rt) == set(NOTES)
    with pytest.raises(VaultError, match="is empty"):
        await remember(rt, "Project", "Kite", {}, "met the supplier")
    assert list(vault.iterdir()) == []
    vault.rmdir()
    shutil.move(str(tmp_path / "share"), str(vault))  # mounted again
    report = await sync.sync_vault()
    assert (report.archived, report.unchanged) == (0, len(NOTES))


# --- cloud placeholders -----------------------------------------------------------------------------------------


async def test_a_note_evicted_to_an_icloud_placeholder_is_kept(
    rt: Runtime, vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with live_sync(rt, quiet=0.05) as live:
        await live.wait_idle(30)
        caplog.set_level(logging.INFO, logger="vault_sync")
        # iCloud's "Optimise storage" renames the note to a hidden placeholder and drops its bytes.
        os.rename(vault / "Projects/Atlas.md", vault / "Projects/.Atlas.md.icloud")

        async def watcher_done() -> bool:
            archived = set(NOTES) - await active_paths(rt)
            return handled(caplog, archived, "Projects/Atlas.md")

        await eventually(watcher_done, timeout=30)
        await live.wait_idle(30)
        assert await active_paths(rt) == set(NOTES)
        report = await rt.require_sync().sync_vault()  # a full pass does not archive it either
        assert (report.archived, report.not_downloaded) == (0, ["Projects/Atlas.md"])
        attention = (await build_status(rt))["vault"]["attention"]
        assert attention["not_downloaded"] == 1
        os.rename(vault / "Projects/.Atlas.md.icloud", vault / "Projects/Atlas.md")  # downloaded again
        report = await rt.require_sync().sync_vault()
        assert (report.archived, report.not_downloaded) == (0, [])
        assert "attention" not in (await build_status(rt))["vault"]
    assert await active_paths(rt) == set(NOTES)


# --- a large share of the vault gone at once --------------------------------------------------------------------


def many_notes(count: int) -> dict[str, str]:
    return {f"Journal/Day {i:03}.md": f"Day {i} of the journal.\n" for i in range(count)}


async def test_one_pass_that_would_archive_much_of_the_vault_holds_back_until_confirmed(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    notes = many_notes(40)
    fill(vault, notes)
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        sync = rt.require_sync()
        assert (await sync.sync_vault()).created == len(notes)
        shutil.move(vault / "Journal", tmp_path / "Journal")  # e.g. a cloud client that has not synced yet
        dry = await sync.sync_vault(dry_run=True)
        held = await sync.sync_vault()
        assert (dry.archive_held_back, held.archive_held_back, held.archived) == (40, 40, 0)
        assert "--confirm-archive" in (held.archive_hint or "")
        assert len(await active_paths(rt)) == len(notes)
        assert (await build_status(rt))["vault"]["attention"]["archive_held_back"] == 40
        confirmed = await sync.sync_vault(confirm_archive=True)
        assert (confirmed.archive_held_back, confirmed.archived) == (0, 40)
        assert "attention" not in (await build_status(rt))["vault"]


async def test_a_small_vaults_ordinary_deletes_and_a_renamed_folder_go_through(
    vault: Path, db_path: Path
) -> None:
    notes = many_notes(HOLD_BACK_MIN - 1)
    fill(vault, notes)
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        os.rename(vault / "Journal", vault / "Diary")  # every note moves: nothing leaves the graph
        moved = await sync.sync_vault()
        assert (moved.moved, moved.archived, moved.archive_held_back) == (len(notes), 0, 0)
        for path in list((vault / "Diary").iterdir())[: HOLD_BACK_MIN - 2]:
            path.unlink()
        report = await sync.sync_vault()
    assert (report.archived, report.archive_held_back) == (HOLD_BACK_MIN - 2, 0)
    assert HOLD_BACK_SHARE * len(notes) < HOLD_BACK_MIN - 2  # a large share, but few notes: no question


@needs_cli
def test_the_sync_command_holds_back_and_archives_with_confirm_archive(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    fill(vault, many_notes(30))
    cli = [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)]
    assert subprocess.run(cli, capture_output=True, text=True).returncode == 0
    shutil.move(vault / "Journal", tmp_path / "Journal")  # the vault is now an empty folder
    held = subprocess.run(cli, capture_output=True, text=True)
    assert held.returncode == 1, held.stdout + held.stderr
    assert "0 archived" in held.stdout and "archive held back: 30 of the 30 notes" in held.stdout
    assert "--confirm-archive" in held.stdout
    status = subprocess.run(
        [str(COMMAND), "status", "--vault", str(vault), "--db", str(db_path)], capture_output=True, text=True
    )
    assert "archive:  held back: 30 of the 30 notes" in status.stdout, status.stdout
    done = subprocess.run([*cli, "--confirm-archive"], capture_output=True, text=True)
    assert done.returncode == 0 and "30 archived" in done.stdout, done.stdout + done.stderr


@needs_cli
async def test_the_servers_catch_up_holds_back_and_the_tool_confirms(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    notes = many_notes(30)
    fill(vault, notes)
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        await rt.require_sync().sync_vault()
    shutil.move(vault / "Journal", tmp_path / "Journal")  # gone while no server ran
    params = StdioServerParameters(
        command=str(COMMAND),
        args=["serve", "--vault", str(vault), "--db", str(db_path)],
        env=dict(os.environ),
    )
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def held_back() -> dict[str, Any] | None:
                vault_status = (await call(session, "engrama_status", {}))["vault"]
                return vault_status.get("attention")

            attention = await eventually(held_back, timeout=60)
            assert attention["archive_held_back"] == 30
            assert "confirm_archive=true" in attention["archive_hint"]
            assert active_in(db_path) == len(notes)
            report = await call(session, "engrama_sync_vault", {"confirm_archive": True})
            assert (report["archived"], report["archive_held_back"]) == (30, 0)
            assert "attention" not in (await call(session, "engrama_status", {}))["vault"]
    assert active_in(db_path) == 0


def active_in(db_path: Path) -> int:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        sql = "select count(*) from nodes where status = 'active' and path is not null"
        return conn.execute(sql).fetchone()[0]


# --- a folder that cannot be listed (chmod), seen by a real server without root's powers ------------------------


def unprivileged(command: list[str]) -> list[str]:
    """`command` run without the capabilities that let root read any folder (as is, for other users)."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, where chmod does not stop reads, and util-linux setpriv is missing")
    drop = "-dac_override,-dac_read_search"
    probe = subprocess.run([setpriv, "--bounding-set", drop, "--inh-caps", drop, "--", "true"], check=False)
    if probe.returncode != 0:
        pytest.skip("running as root and cannot drop capabilities here")
    return [setpriv, "--bounding-set", drop, "--inh-caps", drop, "--", *command]


@pytest.fixture
def restore_modes(vault: Path) -> Iterator[Callable[[Path, int], None]]:
    changed: list[Path] = []

    def chmod(path: Path, mode: int) -> None:
        changed.append(path)
        path.chmod(mode)

    yield chmod
    for path in changed:
        path.chmod(0o755)


@needs_cli
async def test_a_folder_that_cannot_be_listed_keeps_its_notes_under_the_live_server(
    vault: Path, db_path: Path, tmp_path: Path, restore_modes: Callable[[Path, int], None]
) -> None:
    fill(vault, {"Public.md": "Out in the open.\n", "Shared/a.md": "Alpha.\n", "Shared/b.md": "Beta.\n"})
    command = unprivileged(
        [str(COMMAND), "serve", "--vault", str(vault), "--db", str(db_path), "--log-level", "INFO"]
    )
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    log_file = tmp_path / "stderr.log"

    def said(text: str) -> bool:
        return text in log_file.read_text(encoding="utf-8")

    with open(log_file, "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def synced() -> bool:
                return (await call(session, "engrama_status", {}))["vault"]["note_count"] == 3

            await eventually(synced, timeout=60)
            # The folder keeps its search bit but loses its read bit: notes open, the folder cannot be listed.
            restore_modes(vault / "Shared", 0o311)
            (vault / "Shared/b.md").unlink()
            await eventually(lambda: said("Shared/b.md not archived") or active_in(db_path) < 3, timeout=30)
            assert active_in(db_path) == 3
            # A folder event (a sync tool replacing the folder) for the folder that cannot be listed.
            os.rename(vault / "Shared", vault / "Shared.tmp")
            os.rename(vault / "Shared.tmp", vault / "Shared")
            await eventually(
                lambda: said("notes in folder Shared are left") or active_in(db_path) < 3, timeout=30
            )
            assert active_in(db_path) == 3
            restore_modes(vault / "Shared", 0o755)  # readable again: now b is really gone
            report = await call(session, "engrama_sync_vault", {})
            assert report["archived"] == 1
    assert active_in(db_path) == 2


@needs_cli
def test_a_note_in_a_folder_engrama_may_not_write_is_searchable_without_its_id_line(
    vault: Path, db_path: Path, restore_modes: Callable[[Path, int], None]
) -> None:
    """Review 19b: a note that can be read but not written (a read-only mount, a folder this user may not write,
    a note locked or made immutable) failed the sync, unsearchable, while a note made read-only was indexed."""
    fill(vault, {"Locked/Garden.md": "Plain note about gardening.\n", "Open.md": "Open note.\n"})
    before = (vault / "Locked/Garden.md").read_bytes()
    restore_modes(vault / "Locked", 0o555)  # readable and listable, not writable: no temp file, no rename
    done = subprocess.run(
        unprivileged([str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)]),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "indexed without an id line: Locked/Garden.md" in done.stdout and "0 failed" in done.stdout
    assert (vault / "Locked/Garden.md").read_bytes() == before
    found = subprocess.run(
        [str(COMMAND), "search", "--vault", str(vault), "--db", str(db_path), "--no-sync", "gardening"],
        capture_output=True,
        text=True,
    )
    assert "Locked/Garden.md" in found.stdout, found.stdout + found.stderr
    # Writable again (a mount made read-write, a lock lifted), with nothing in the note changed: the next pass
    # writes its line (review 19d: it stayed without one until the person edited it).
    (vault / "Locked").chmod(0o755)
    again = subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)], capture_output=True, text=True
    )
    assert again.returncode == 0 and "1 ids inserted" in again.stdout, again.stdout + again.stderr
    assert (vault / "Locked/Garden.md").read_bytes().startswith(b"---\nengrama_id: ")
