"""Live sync on a real temporary vault with the real watchdog observer: every save style reaches the graph."""

from __future__ import annotations

import asyncio
import errno
import inspect
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from server.live import LiveSync, live_sync
from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.services.remember import remember
from server.settings import Settings
from server.status import build_status
from server.store import database
from vault_sync import debounce, watch
from vault_sync.debounce import LiveReconciler

ID_LINE = re.compile(r"^engrama_id: (\S+)$", re.MULTILINE)


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a thread running (watcher threads must be stopped and joined). The writer's
    one watcher of replaced files (`vault_sync.orphans`) is process-wide and ends by itself a few seconds after
    the last write; it is checked in tests/test_orphans.py. So is the pool tool writes wait on (`engrama-write`),
    like asyncio's own."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 3
    while leaked := [
        t
        for t in threading.enumerate()
        if t not in before and not t.name.startswith(("asyncio_", "engrama-orphans", "engrama-write"))
    ]:
        if time.monotonic() > deadline:
            pytest.fail(f"threads left running: {leaked}")
        time.sleep(0.01)


async def eventually(check: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll `check` (sync or async) until it returns something truthy, and return it; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not met within {timeout} s")
        await asyncio.sleep(0.01)


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as runtime:
        yield runtime


@pytest.fixture
async def live(rt: Runtime) -> AsyncIterator[LiveSync]:
    async with live_sync(rt, quiet=0.05) as running:
        await running.wait_idle()
        yield running


# --- helpers that read the graph --------------------------------------------------------------------------


async def node_at(rt: Runtime, path: str) -> Any:
    sql = "select id, name, status, path from nodes where path = ?"
    return await rt.store.read(lambda c: c.execute(sql, (path,)).fetchone())


async def active_note_nodes(rt: Runtime) -> list[Any]:
    sql = "select id, path from nodes where status = 'active' and path is not null order by path"
    return await rt.store.read(lambda c: c.execute(sql).fetchall())


async def searchable(rt: Runtime, word: str) -> list[str]:
    sql = (
        "select distinct c.node_id from chunks_fts f join chunks c on c.id = f.rowid where chunks_fts match ?"
    )
    rows = await rt.store.read(lambda c: c.execute(sql, (f'"{word}"',)).fetchall())
    return [r[0] for r in rows]


def id_lines(path: Path) -> list[str]:
    return ID_LINE.findall(path.read_text(encoding="utf-8"))


async def new_note(rt: Runtime, vault: Path, rel: str, body: str) -> str:
    """Write a note as a person would and wait until it is in the graph with its injected id."""
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    row = await eventually(lambda: node_at(rt, rel))
    await eventually(lambda: id_lines(path) == [row["id"]])
    return row["id"]


def rewrite(path: Path, old: str, new: str) -> str:
    """The note's text with one word replaced (what the person typed)."""
    return path.read_text(encoding="utf-8").replace(old, new)


# --- every save style -------------------------------------------------------------------------------------


async def test_an_edit_in_place_updates_the_node(rt: Runtime, vault: Path, live: LiveSync) -> None:
    node_id = await new_note(rt, vault, "Plan.md", "# Plan\nfirst draft mentions aardvark\n")
    path = vault / "Plan.md"
    text = rewrite(path, "aardvark", "bandicoot")
    with open(path, "r+", encoding="utf-8") as handle:  # truncate and write the same inode, twice
        handle.truncate(0)
        handle.write(text[:10])
        handle.flush()
        handle.seek(0)
        handle.write(text)
    assert await eventually(lambda: searchable(rt, "bandicoot")) == [node_id]
    assert await searchable(rt, "aardvark") == []


async def test_an_edit_keeping_size_and_time_is_seen(rt: Runtime, vault: Path, live: LiveSync) -> None:
    """Found by review: a note edited without a change of size or modification time (a 2-second clock on a
    FAT or exFAT drive, a tool that sets the time back) stayed stale, even through engrama_sync_note."""
    node_id = await new_note(rt, vault, "Pets.md", "# Pets\nmy cat is named felixcat\n")
    path = vault / "Pets.md"
    before = path.stat()
    path.write_text(rewrite(path, "felixcat", "tomkitty"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert await eventually(lambda: searchable(rt, "tomkitty")) == [node_id]
    assert await searchable(rt, "felixcat") == []
    # The same through a tool's single-path sync, with no watcher to tell it.
    await live.stop()
    path.write_text(rewrite(path, "tomkitty", "garfield"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (await rt.require_sync().sync_path("Pets.md")).action == "updated"
    assert await searchable(rt, "garfield") == [node_id]


async def test_an_atomic_save_updates_the_node(rt: Runtime, vault: Path, live: LiveSync) -> None:
    node_id = await new_note(rt, vault, "Plan.md", "# Plan\ncapybara\n")
    temp = vault / ".Plan.md.tmp-123"
    temp.write_text(rewrite(vault / "Plan.md", "capybara", "dugong"), encoding="utf-8")
    os.replace(temp, vault / "Plan.md")
    assert await eventually(lambda: searchable(rt, "dugong")) == [node_id]
    assert id_lines(vault / "Plan.md") == [node_id]


async def test_a_vim_style_save_updates_the_node(rt: Runtime, vault: Path, live: LiveSync) -> None:
    node_id = await new_note(rt, vault, "Plan.md", "# Plan\nechidna\n")
    path, backup = vault / "Plan.md", vault / "Plan.md~"
    text = rewrite(path, "echidna", "fossa")
    os.rename(path, backup)
    path.write_text(text, encoding="utf-8")
    backup.unlink()
    assert await eventually(lambda: searchable(rt, "fossa")) == [node_id]
    assert (await node_at(rt, "Plan.md"))["status"] == "active"


async def test_a_rename_keeps_the_id_and_makes_no_duplicate(rt: Runtime, vault: Path, live: LiveSync) -> None:
    node_id = await new_note(rt, vault, "Plan.md", "# Plan\ngerenuk\n")
    (vault / "Projects").mkdir()
    os.rename(vault / "Plan.md", vault / "Projects" / "Roadmap.md")
    row = await eventually(lambda: node_at(rt, "Projects/Roadmap.md"))
    assert row["id"] == node_id and row["status"] == "active"
    await live.wait_idle()
    assert [tuple(r) for r in await active_note_nodes(rt)] == [(node_id, "Projects/Roadmap.md")]
    assert id_lines(vault / "Projects" / "Roadmap.md") == [node_id]


async def test_a_note_renamed_as_a_new_one_takes_its_old_name_keeps_its_id(
    rt: Runtime, vault: Path, live: LiveSync
) -> None:
    """A sync client brings another device's changes at once: Ideas.md renamed into Zettel/, and a new
    Ideas.md with file times from that device (so it is quiet, and may take an id at once). Found by review:
    the watcher reconciled the new Ideas.md first, wrote the renamed note's id into it, and then took the
    renamed note, which carries that id, for a copy and gave it a fresh one."""
    node_id = await new_note(rt, vault, "Ideas.md", "# Ideas\ntomatoes on the balcony\n")
    assert rt.sync is not None
    rt.sync.settle = 1.0  # the production window is 3 s (the suite turns it off)
    rt.sync.reader = replace(rt.sync.reader, settle=1.0)
    renamed = (vault / "Ideas.md").read_bytes()
    (vault / "Zettel").mkdir()
    os.rename(vault / "Ideas.md", vault / "Zettel" / "Ideas.md")
    incoming = vault / ".syncthing.Ideas.md.tmp"  # as Syncthing brings a file: its time set, then renamed in
    incoming.write_text("# Ideas\nchess openings\n", encoding="utf-8")
    hour_ago = time.time() - 3600
    os.utime(incoming, (hour_ago, hour_ago))
    os.rename(incoming, vault / "Ideas.md")
    await eventually(lambda: id_lines(vault / "Ideas.md"))
    await live.wait_idle()
    assert (vault / "Zettel" / "Ideas.md").read_bytes() == renamed
    [fresh] = id_lines(vault / "Ideas.md")
    assert fresh != node_id
    assert [tuple(r) for r in await active_note_nodes(rt)] == [
        (fresh, "Ideas.md"),
        (node_id, "Zettel/Ideas.md"),
    ]


async def test_a_deleted_note_is_archived(rt: Runtime, vault: Path, live: LiveSync) -> None:
    (vault / ".obsidian").mkdir(exist_ok=True)  # a vault emptied of notes, not an empty mount point
    await new_note(rt, vault, "Plan.md", "# Plan\nhyrax\n")
    (vault / "Plan.md").unlink()
    await eventually(lambda: _status_is(rt, "Plan.md", "archived"))


async def test_moving_a_note_to_obsidian_trash_archives_it(rt: Runtime, vault: Path, live: LiveSync) -> None:
    node_id = await new_note(rt, vault, "Plan.md", "# Plan\nibex\n")
    (vault / ".trash").mkdir()
    os.rename(vault / "Plan.md", vault / ".trash" / "Plan.md")
    await eventually(lambda: _status_is(rt, "Plan.md", "archived"))
    os.rename(vault / ".trash" / "Plan.md", vault / "Plan.md")  # restored: the same node comes back
    await eventually(lambda: _status_is(rt, "Plan.md", "active"))
    assert (await node_at(rt, "Plan.md"))["id"] == node_id


async def test_a_renamed_folder_keeps_every_id(rt: Runtime, vault: Path, live: LiveSync) -> None:
    ids = {name: await new_note(rt, vault, f"Old/{name}.md", f"# {name}\n") for name in ("A", "B", "C")}
    os.rename(vault / "Old", vault / "New")
    for name, node_id in ids.items():
        row = await eventually(lambda name=name: node_at(rt, f"New/{name}.md"))
        assert row["id"] == node_id and row["status"] == "active"
    await live.wait_idle()
    assert sorted(r["id"] for r in await active_note_nodes(rt)) == sorted(ids.values())


async def test_a_folder_moved_out_of_the_vault_is_archived(
    rt: Runtime, vault: Path, live: LiveSync, tmp_path: Path
) -> None:
    (vault / ".obsidian").mkdir(exist_ok=True)  # a vault emptied of notes, not an empty mount point
    for name in ("A", "B"):
        await new_note(rt, vault, f"Gone/{name}.md", f"# {name}\n")
    os.rename(vault / "Gone", tmp_path / "elsewhere")  # watchdog reports this as a delete after 0.5 s
    await eventually(lambda: _status_is(rt, "Gone/A.md", "archived"))
    await eventually(lambda: _status_is(rt, "Gone/B.md", "archived"))


async def test_a_note_replaced_by_a_folder_of_its_name_is_archived_and_the_notes_inside_arrive(
    rt: Runtime, vault: Path, live: LiveSync
) -> None:
    """`Ideas.md` deleted and a folder `Ideas.md/` made in its place (review 17a): the note stayed active and
    searchable for good, through the watcher, full passes and restarts (the folder was taken for the note being
    there, and reading it for a failure), though a rebuild has no such note."""
    await new_note(rt, vault, "Ideas.md", "# Ideas\nwombat\n")
    os.unlink(vault / "Ideas.md")
    (vault / "Ideas.md").mkdir()
    (vault / "Ideas.md" / "Inner.md").write_text("# Inner\nquokka\n", encoding="utf-8")
    await eventually(lambda: _status_is(rt, "Ideas.md", "archived"))
    await eventually(lambda: node_at(rt, "Ideas.md/Inner.md"))
    await live.wait_idle()
    assert [h.path for h in (await search(rt, "wombat")).results] == []
    assert [h.path for h in (await search(rt, "quokka")).results] == ["Ideas.md/Inner.md"]
    assert live.reconciler is not None
    live.reconciler.request_full_pass("test")  # a walk of the vault agrees
    await live.wait_idle()
    assert [r["path"] for r in await active_note_nodes(rt)] == ["Ideas.md/Inner.md"]


async def test_a_folder_replaced_by_a_file_of_its_name_has_its_notes_archived_at_once(
    rt: Runtime, vault: Path, live: LiveSync
) -> None:
    """`Base/` removed and a plain file `Base` put in its place (review 17a): reading `Base/A.md` failed with
    "Not a directory", so its notes stayed active and searchable until the 15-minute rescan."""
    for name in ("A", "B"):
        await new_note(rt, vault, f"Base/{name}.md", f"# {name}\nnumbat\n")
    shutil.rmtree(vault / "Base")
    (vault / "Base").write_text("a plain file now\n", encoding="utf-8")
    await eventually(lambda: _status_is(rt, "Base/A.md", "archived"))
    await eventually(lambda: _status_is(rt, "Base/B.md", "archived"))
    await live.wait_idle()
    assert [h.path for h in (await search(rt, "numbat")).results] == []


async def test_a_folder_moved_into_the_vault_is_picked_up(
    rt: Runtime, vault: Path, live: LiveSync, tmp_path: Path
) -> None:
    outside = tmp_path / "incoming" / "Deep"
    outside.mkdir(parents=True)
    for name in ("A", "B"):
        (outside / f"{name}.md").write_text(f"# {name}\njackal\n", encoding="utf-8")
    os.rename(tmp_path / "incoming", vault / "Incoming")
    await eventually(lambda: node_at(rt, "Incoming/Deep/A.md"))
    await eventually(lambda: node_at(rt, "Incoming/Deep/B.md"))
    await live.wait_idle()
    assert len(await searchable(rt, "jackal")) == 2
    assert len(id_lines(vault / "Incoming" / "Deep" / "A.md")) == 1


async def test_our_own_id_write_comes_back_unchanged(rt: Runtime, vault: Path, live: LiveSync) -> None:
    assert rt.sync is not None
    outcomes: list[tuple[str, str]] = []
    sync_path = rt.sync.sync_path

    async def recording(rel: str, **kwargs: Any) -> Any:
        outcome = await sync_path(rel, **kwargs)
        outcomes.append((rel, outcome.action))
        return outcome

    rt.sync.sync_path = recording  # type: ignore[method-assign]
    await new_note(rt, vault, "Plan.md", "# Plan\nkiwi\n")
    # The id we inserted arrives as one more event; its checksum matches, so it ends there: no loop.
    await eventually(lambda: len(outcomes) >= 2)
    await live.wait_idle()
    assert outcomes[0] == ("Plan.md", "created")
    assert set(outcomes[1:]) == {("Plan.md", "unchanged")}


# --- catch-up, status, storms, overflow -------------------------------------------------------------------


async def test_changes_made_while_stopped_are_caught_up_at_start(rt: Runtime, vault: Path) -> None:
    async with live_sync(rt, quiet=0.05) as running:
        ids = {name: await new_note(rt, vault, f"{name}.md", f"# {name}\nlemur\n") for name in "ABC"}
        await running.wait_idle()
    (vault / "A.md").write_text(rewrite(vault / "A.md", "lemur", "margay"), encoding="utf-8")
    os.rename(vault / "B.md", vault / "B2.md")
    (vault / "C.md").unlink()
    (vault / "D.md").write_text("# D\nnarwhal\n", encoding="utf-8")
    async with live_sync(rt, quiet=0.05) as running:
        await running.wait_idle()
    assert await searchable(rt, "margay") == [ids["A"]]
    assert (await node_at(rt, "B2.md"))["id"] == ids["B"]
    assert (await node_at(rt, "C.md"))["status"] == "archived"
    assert len(await searchable(rt, "narwhal")) == 1
    assert len(await active_note_nodes(rt)) == 3


async def test_entering_returns_before_the_catch_up_and_status_shows_it(rt: Runtime, vault: Path) -> None:
    for i in range(200):
        (vault / f"N{i:03}.md").write_text(f"# N{i}\nokapi\n", encoding="utf-8")
    async with live_sync(rt) as running:
        assert rt.state["lease"] == "holder" and rt.state["watching"] is True
        assert rt.state["pending"] != 0  # the catch-up has not run yet: entering never waits for it
        await running.wait_idle()
        status = (await build_status(rt))["vault"]
        assert status["watching"] is True and status["pending"] == 0
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", status["last_reconcile_at"])
        assert len(await active_note_nodes(rt)) == 200
    assert rt.state["watching"] is False


async def test_an_event_storm_converges_with_a_full_pass(rt: Runtime, vault: Path) -> None:
    folder = vault / "Storm"
    ids = [str(uuid.uuid4()) for _ in range(2000)]

    def checkout() -> None:  # what a git checkout or a sync client catching up looks like
        # Written beside the vault and moved in at once, so the 2,000 events arrive as one burst however
        # loaded the machine is (written one by one into the vault, a busy disk spreads them out).
        staging = vault.parent / "staging"
        staging.mkdir()
        for i, node_id in enumerate(ids):
            text = f"---\nengrama_id: {node_id}\n---\n# S{i}\nquokka\n"
            (staging / f"S{i:04}.md").write_text(text, encoding="utf-8")
        staging.rename(folder)

    async with live_sync(rt, quiet=0.05, storm_threshold=500) as running:
        await running.wait_idle()
        assert running.reconciler is not None
        passes = running.reconciler.full_passes
        await asyncio.to_thread(checkout)
        await eventually(lambda: _count_active(rt, len(ids)), timeout=30)
        await running.wait_idle(timeout=30)
        assert running.reconciler.full_passes > passes  # one walk instead of 2,000 single reconciles
        assert running.reconciler.pending == 0
    assert sorted(r["id"] for r in await active_note_nodes(rt)) == sorted(ids)


async def test_a_big_folder_deleted_while_watching_is_archived_even_when_its_events_end_in_a_full_pass(
    rt: Runtime, vault: Path
) -> None:
    """Found by review: deleting a folder of most of the vault made an event storm, the full pass that took
    it over found three quarters of the vault gone at once and held the archive back (as for an unmounted
    share), so the deleted notes stayed in search. The watcher saw them go: they are archived."""
    for i in range(60):
        (vault / "Big").mkdir(exist_ok=True)
        (vault / "Big" / f"B{i:02}.md").write_text(f"# B{i}\nbigword\n", encoding="utf-8")
    for i in range(10):
        (vault / f"K{i}.md").write_text(f"# K{i}\nkeepword\n", encoding="utf-8")
    async with live_sync(rt, quiet=0.05, storm_threshold=20) as running:
        await running.wait_idle()
        assert len(await active_note_nodes(rt)) == 70
        assert running.reconciler is not None
        passes = running.reconciler.full_passes
        await asyncio.to_thread(shutil.rmtree, vault / "Big")
        await eventually(lambda: running.reconciler is not None and running.reconciler.full_passes > passes)
        await running.wait_idle(timeout=30)
        await eventually(lambda: _count_active(rt, 10), timeout=10)  # a straggling event: archived after
        assert (await search(rt, "bigword")).results == []
        assert len((await search(rt, "keepword", limit=20)).results) == 10


async def test_an_overflow_rescan_recovers_lost_events(
    rt: Runtime, vault: Path, live: LiveSync, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[str] = []
    monkeypatch.setattr(watch, "changes_for", lambda root, event: lost.append(event.src_path) or [])
    (vault / "Lost.md").write_text("# Lost\nrheas\n", encoding="utf-8")
    await eventually(lambda: any(p.endswith("Lost.md") for p in lost))  # the OS "dropped" it
    monkeypatch.undo()
    assert live.reconciler is not None and await node_at(rt, "Lost.md") is None
    passes = live.reconciler.full_passes
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    await eventually(lambda: node_at(rt, "Lost.md"))
    assert live.reconciler.full_passes == passes + 1


async def test_a_vault_folder_replaced_while_watched_is_watched_again(
    rt: Runtime, vault: Path, live: LiveSync, tmp_path: Path
) -> None:
    """A share mounted again on the vault's path, or the vault folder moved away and another put in its place
    (a backup restored, a fresh clone), left the watches on the folder that was there: they stayed alive and
    reported nothing of the notes the person then wrote, until the periodic rescan 15 minutes later. (Mounting
    needs privileges a test run may not have; moving the folder away leaves the watches behind the same way.)"""
    first = await new_note(rt, vault, "Alpha.md", "# Alpha\nwombats\n")
    reconciler = live.reconciler
    assert reconciler is not None
    passes = reconciler.full_passes
    os.rename(vault, tmp_path / "vault.old")
    vault.mkdir()
    shutil.copy2(tmp_path / "vault.old" / "Alpha.md", vault / "Alpha.md")
    await eventually(lambda: reconciler.full_passes > passes, 10, what="a rescan of the new folder")
    await live.wait_idle()
    # Now what is written in the vault's folder is seen as it is written, and the old folder is not the vault.
    (tmp_path / "vault.old" / "Stale.md").write_text("# Stale\nquokkas\n", encoding="utf-8")
    await new_note(rt, vault, "Beta.md", "# Beta\nquokkas\n")
    await live.wait_idle()
    assert (await node_at(rt, "Alpha.md"))["id"] == first
    assert await node_at(rt, "Stale.md") is None and len(await searchable(rt, "quokkas")) == 1
    assert reconciler.watching


async def test_a_vault_folder_copied_back_note_by_note_is_rescanned_once_the_copy_is_done(
    rt: Runtime, vault: Path, live: LiveSync, tmp_path: Path
) -> None:
    """Review 20a: a backup copied back into a new vault folder was rescanned as soon as the new folder was
    noticed, half copied: the notes not copied yet were archived and their relations closed, then revived as
    their copies arrived. The rescan now waits until the folder has been quiet for `SWAP_QUIET` seconds."""
    names = [f"Note {i}" for i in range(8)]
    for i, name in enumerate(names):
        (vault / f"{name}.md").write_text(f"# {name}\nsee [[{names[(i + 1) % 8]}]]\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    await live.wait_idle()
    reconciler = live.reconciler
    assert reconciler is not None and await _closed_edges(rt) == 0
    passes = reconciler.full_passes
    os.rename(vault, tmp_path / "backup")
    vault.mkdir()
    for name in names:  # a copy slower than the look at the folder (once a second)
        shutil.copy2(tmp_path / "backup" / f"{name}.md", vault / f"{name}.md")
        await asyncio.sleep(0.4)
    await eventually(lambda: reconciler.full_passes > passes, 10, what="a rescan of the folder copied back")
    await live.wait_idle()
    assert await _closed_edges(rt) == 0 and len(await active_note_nodes(rt)) == 8


async def test_what_happens_in_a_vault_folder_moved_away_is_not_taken_for_the_vault(
    rt: Runtime, vault: Path, live: LiveSync, tmp_path: Path
) -> None:
    """CI of a35c61e (1 failure in a run): watches follow the folder, not its path, so an edit in the folder
    moved away, or a backup tool reading a note there (its access time), was reported under the vault's path;
    the note, not copied into the new folder yet, was archived and its relations closed, then revived."""
    names = [f"Note {i}" for i in range(4)]
    for i, name in enumerate(names):
        (vault / f"{name}.md").write_text(f"# {name}\nsee [[{names[(i + 1) % 4]}]]\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    await live.wait_idle()
    assert await _closed_edges(rt) == 0
    os.rename(vault, tmp_path / "old")
    vault.mkdir()
    shutil.copy2(tmp_path / "old" / "Note 0.md", vault / "Note 0.md")  # the copy back has begun
    with open(tmp_path / "old" / "Note 2.md", "a", encoding="utf-8") as note:  # edited where it was
        note.write("an afterthought\n")
    await asyncio.sleep(0.5)  # the old watches report it as Note 2.md of the vault
    for name in names[1:]:
        shutil.copy2(tmp_path / "old" / f"{name}.md", vault / f"{name}.md")
    await eventually(lambda: live.reconciler is not None and live.reconciler.watching, 10)
    await asyncio.sleep(debounce.SWAP_QUIET + 1.5)
    await live.wait_idle()
    assert await _closed_edges(rt) == 0 and len(await active_note_nodes(rt)) == 4


async def test_a_vault_folder_replaced_by_a_symlink_is_watched_where_it_leads(
    rt: Runtime, vault: Path, live: LiveSync, tmp_path: Path
) -> None:
    """Review 20a: `mv vault vault.old; ln -s backups/vault vault` was noticed, but the new watches sat on the
    link itself and reported nothing of the notes written through it."""
    await new_note(rt, vault, "Alpha.md", "# Alpha\nwombats\n")
    restored = tmp_path / "backups" / "vault"
    shutil.copytree(vault, restored)
    reconciler = live.reconciler
    assert reconciler is not None
    passes = reconciler.full_passes
    os.rename(vault, tmp_path / "vault.old")
    vault.symlink_to(restored, target_is_directory=True)
    await eventually(lambda: reconciler.full_passes > passes, 10, what="a rescan of the folder linked")
    await live.wait_idle()
    (vault / "Beta.md").write_text("# Beta\nnumbats\n", encoding="utf-8")
    await eventually(lambda: node_at(rt, "Beta.md"), what="the note written through the link")
    assert reconciler.full_passes == passes + 1  # the watcher saw it, not a rescan


def test_a_vault_folder_that_hangs_keeps_no_server_from_exiting(vault: Path, db_path: Path) -> None:
    """Review 20a: the look at the vault's folder ran on asyncio's default executor, which a process waits for
    at exit; a `stat` hung on a dead network mount kept the server from exiting when its client closed."""
    script = f"""
import asyncio, threading
from pathlib import Path
from server.live import live_sync
from server.runtime import open_runtime
from server.settings import Settings
from vault_sync import watch

watch.VaultWatcher.same_folder = lambda self: threading.Event().wait()  # a stat that never returns

async def main():
    settings = Settings(vault=Path({str(vault)!r}), db_path=Path({str(db_path)!r}))
    async with open_runtime(settings) as rt, live_sync(rt, quiet=0.05) as live:
        await live.wait_idle()
        await asyncio.sleep(2.5)  # the supervisor's ticks look at the folder
    print("stopped", flush=True)

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[1],
    )
    assert done.returncode == 0 and "stopped" in done.stdout, done.stderr[-2000:]


async def test_a_vault_folder_gone_for_a_while_is_said_so_and_watched_again_when_back(
    rt: Runtime,
    vault: Path,
    live: LiveSync,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Review 20a: a vault folder gone (a drive unplugged) was reported as a watcher the OS refused, with advice
    on inotify limits. Review 22e: once back, it was watched again only after the 30 s a refused watcher
    waits (edits then took seconds to be found); it is looked for every second."""
    await new_note(rt, vault, "Alpha.md", "# Alpha\nwombats\n")
    reconciler = live.reconciler
    assert reconciler is not None
    caplog.set_level(logging.WARNING, logger="vault_sync.debounce")
    os.rename(vault, tmp_path / "unplugged")
    await eventually(lambda: "the vault folder is not there" in caplog.text, 10, what="the folder said gone")
    assert "inotify" not in caplog.text
    os.rename(tmp_path / "unplugged", vault)
    await eventually(lambda: reconciler.watching, 5, what="watching again")
    await new_note(rt, vault, "Beta.md", "# Beta\nnumbats\n")
    assert (await node_at(rt, "Alpha.md"))["status"] == "active"


async def test_a_server_stopping_lets_the_lease_go_only_once_its_writes_are_done_or_given_up(
    vault: Path, db_path: Path
) -> None:
    """Review 20c: a remember waiting for a note the person was typing in (the settle window) went on, on its
    thread, after the client went away: the note was written 4 s after the lease had gone to another server,
    two processes writing one vault. Now the waiting write gives up and the lease goes after it."""
    (vault / "Plan.md").write_text("# Plan\nfirst draft\n", encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path, settle=3.0)
    async with open_runtime(settings) as rt:
        live = LiveSync(rt, quiet=0.05)
        await live.start()
        await eventually(lambda: id_lines(vault / "Plan.md"), 10, what="the note's id line")
        text = (vault / "Plan.md").read_text(encoding="utf-8")
        (vault / "Plan.md").write_text(text + "typed on\n", encoding="utf-8")  # the person is typing
        call = asyncio.create_task(remember(rt, "Note", "Plan", {}, "written after the client left"))
        await asyncio.sleep(0.5)  # the call waits for the note to be quiet
        call.cancel()  # the client went away: the server cancels its calls and stops
        await live.stop()
        assert not live.lease.held
        released = (vault / "Plan.md").read_bytes()
        await asyncio.sleep(4)
    assert (vault / "Plan.md").read_bytes() == released
    assert b"written after the client left" not in released


async def test_a_write_that_reaches_the_writer_after_the_lease_went_is_refused(
    vault: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 20e: a remember past its checks (this process held the lease) that reached the writer only after
    the server had let the lease go wrote into the vault all the same."""
    (vault / "Plan.md").write_text("# Plan\nfirst draft\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        live = LiveSync(rt, quiet=0.05)
        await live.start()
        await eventually(lambda: id_lines(vault / "Plan.md"), 10, what="the note's id line")
        before = (vault / "Plan.md").read_bytes()
        slow = rt.quiet_rule

        async def held_up(rel: str) -> Any:  # the call is held up just before it writes
            await asyncio.sleep(1.0)
            return await slow(rel)

        monkeypatch.setattr(rt, "quiet_rule", held_up)
        call = asyncio.create_task(remember(rt, "Note", "Plan", {}, "written after the lease went"))
        await asyncio.sleep(0.3)
        await live.stop()
        assert not live.lease.held
        with pytest.raises(Exception, match="stopping"):
            await call
    assert (vault / "Plan.md").read_bytes() == before


async def test_with_watching_off_the_catch_up_still_runs(vault: Path, db_path: Path) -> None:
    (vault / "A.md").write_text("# A\n", encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False)
    async with open_runtime(settings) as runtime, live_sync(runtime) as running:
        await running.wait_idle()
        assert runtime.state["lease"] == "holder" and runtime.state["watching"] is False
        assert await node_at(runtime, "A.md")


async def test_a_periodic_rescan_finds_what_no_event_reported(rt: Runtime, vault: Path) -> None:
    assert rt.sync is not None
    reconciler = LiveReconciler(rt.sync, watch=False, rescan_every=0.0)
    await reconciler.start()
    try:
        await reconciler.wait_idle()
        (vault / "Quiet.md").write_text("# Quiet\n", encoding="utf-8")
        reconciler.tick()
        await reconciler.wait_idle()
        assert await node_at(rt, "Quiet.md")
    finally:
        await reconciler.stop()


@pytest.mark.parametrize("poll", [None, 0.0])
async def test_on_a_share_changed_elsewhere_the_vault_is_also_walked_unless_the_person_says_not(
    rt: Runtime, vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, poll: float | None
) -> None:
    """What the file system is comes from the OS (here: said to be NFS); a change made where the watcher cannot
    see it (through a hard link from outside the vault) is found by a walk beside the watcher."""
    monkeypatch.setattr(debounce, "remote_file_system", lambda root: "nfs4")
    assert rt.sync is not None
    (vault / "Shared.md").write_text(f"---\nengrama_id: {uuid.uuid4()}\n---\nA note.\n", encoding="utf-8")
    os.link(vault / "Shared.md", tmp_path / "Shared.md")
    reconciler = LiveReconciler(rt.sync, poll=poll, poll_min=0.0)
    await reconciler.start()
    try:
        await reconciler.wait_idle()
        assert reconciler.watching
        assert (reconciler.polling is not None) == (poll is None)
        with open(tmp_path / "Shared.md", "a", encoding="utf-8") as f:
            f.write("Changed on the file server: zorbel.\n")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not await searchable(rt, "zorbel"):
            await asyncio.sleep(0.1)
            reconciler.tick()  # what the server's clock does once a second
            await reconciler.wait_idle()
        assert bool(await searchable(rt, "zorbel")) == (poll is None)
    finally:
        await reconciler.stop()


async def test_a_database_path_that_cannot_be_looked_at_for_a_moment_is_not_taken_for_lost(
    rt: Runtime, vault: Path, live: LiveSync, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: one failed look at the database's path (a stale NFS handle, a dropped mount) ended the
    lease upkeep for good (no watcher restarts, no polling, no queued writes) and made the stop raise."""

    def stale(path: Path) -> tuple[int, int] | None:
        raise OSError(errno.ESTALE, "Stale file handle", str(path))

    with monkeypatch.context() as patched:
        patched.setattr(database, "_file_id", stale)
        await asyncio.sleep(2.5)  # two looks of the supervisor, once a second
    assert live.role == "holder" and rt.store.db.check_file() is None
    (vault / "After.md").write_text("# After\nwritten once the path answered again\n", encoding="utf-8")
    await eventually(lambda: node_at(rt, "After.md"), what="the note reconciled")


async def test_a_refused_watcher_still_catches_up(
    rt: Runtime, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class RefusingObserver(watch.Observer):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    monkeypatch.setattr(watch, "Observer", RefusingObserver)
    (vault / "A.md").write_text("# A\n", encoding="utf-8")
    async with live_sync(rt) as running:
        await running.wait_idle()
        assert rt.state["lease"] == "holder" and rt.state["watching"] is False
        assert await node_at(rt, "A.md")


async def test_without_a_vault_live_sync_does_nothing(db_path: Path) -> None:
    async with open_runtime(Settings(vault=None, db_path=db_path)) as runtime, live_sync(runtime) as running:
        assert running.role == "off" and runtime.state == {}
        await running.wait_idle()


async def test_a_second_runtime_follows_and_takes_over(rt: Runtime, vault: Path, db_path: Path) -> None:
    async with (
        open_runtime(Settings(vault=vault, db_path=db_path)) as other,
        live_sync(rt, quiet=0.05) as holder,
        live_sync(other, quiet=0.05, retry=0.05) as follower,
    ):
        assert holder.is_holder and follower.role == "follower"
        assert other.sync is not None and other.sync.writable is False
        assert other.state["lease"] == "follower" and other.state["watching"] is False
        await holder.wait_idle()
        await holder.stop()  # the holder leaves; the follower takes over within its retry
        await eventually(lambda: follower.is_holder)
        assert other.sync.writable is True
        await new_note(other, vault, "After.md", "# After\nsaiga\n")


async def _status_is(rt: Runtime, path: str, status: str) -> bool:
    row = await node_at(rt, path)
    return row is not None and row["status"] == status


async def _count_active(rt: Runtime, expected: int) -> bool:
    return len(await active_note_nodes(rt)) == expected


async def test_a_database_locked_while_a_moment_is_decided_never_stops_live_sync(
    vault: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: the notes a watcher moment decides last were settled outside the reconcile's error
    handling, so a database another program held at that instant ended the live reconcile task for good: the
    status still said watching, and no later edit reached the graph."""
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 200)  # production waits 10 s for a lock
    async with (
        open_runtime(Settings(vault=vault, db_path=db_path)) as rt,
        live_sync(rt, quiet=0.05) as live,
    ):
        await live.wait_idle()
        node_id = await new_note(rt, vault, "Ideas.md", "# Ideas\ntomatoes\n")
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], timeout=0); "
                "c.execute('begin immediate'); print('locked', flush=True); time.sleep(1.5); c.rollback()",
                str(db_path),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            # Its id line taken out: the note would take over its path's node, decided at the moment's end.
            (vault / "Ideas.md").write_text("# Ideas\ntomatoes and basil\n", encoding="utf-8")
            await asyncio.sleep(0.8)
        finally:
            holder.wait(timeout=10)
        assert live.reconciler is not None and live.reconciler._task is not None
        assert not live.reconciler._task.done()
        (vault / "Later.md").write_text("# Later\nwritten after the lock\n", encoding="utf-8")
        await eventually(lambda: node_at(rt, "Later.md"), timeout=10, what="a later note in the graph")
        await eventually(lambda: id_lines(vault / "Ideas.md") == [node_id], timeout=10, what="the id back")
        assert "basil" in (vault / "Ideas.md").read_text(encoding="utf-8")


async def test_an_edit_whose_reconcile_failed_stays_pending_and_reaches_the_graph_once_it_can(
    vault: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 17a: a reconcile that failed (here the database held by another program past the busy timeout)
    had taken the watcher's paths off the queue and dropped them: `pending` read 0 and the edit stayed out of
    the graph until the note changed again or the 15-minute rescan. Now the change stays pending and is tried
    again (after 1 s, doubling), so it arrives once the database is free."""
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 200)  # production waits 10 s for a lock
    async with (
        open_runtime(Settings(vault=vault, db_path=db_path)) as rt,
        live_sync(rt, quiet=0.05) as live,
    ):
        await live.wait_idle()
        await new_note(rt, vault, "Plan.md", "# Plan\nfirst draft\n")
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], timeout=0); "
                "c.execute('begin immediate'); print('locked', flush=True); sys.stdin.readline(); c.rollback()",
                str(db_path),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            with open(vault / "Plan.md", "a", encoding="utf-8") as note:
                note.write("and a paragraph about the kinkajou\n")
            await asyncio.sleep(1.0)  # the reconcile ran into the lock (several times) and failed
            assert rt.state["pending"] >= 1
            assert live.reconciler is not None and live.reconciler.pending >= 1
        finally:
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.close()
            holder.wait(timeout=10)
        await eventually(lambda: searchable(rt, "kinkajou"), timeout=10, what="the edit in the graph")
        await eventually(lambda: live.reconciler is not None and live.reconciler.pending == 0, timeout=5)


async def test_a_folder_deleted_in_a_moment_a_full_pass_cut_short_is_still_archived(
    rt: Runtime, vault: Path
) -> None:
    """Review 17a: a full pass requested while a moment's changes were reconciled (the periodic rescan, a poll
    walk, a watcher restart) dropped the changes not reached yet. The pass then took a folder the person
    deleted for part of the vault not being there, and held its notes back (active, searchable) instead of
    archiving them. The changes not reached go back in the queue, and the pass takes them as reported."""
    (vault / "Big").mkdir()
    for i in range(25):
        (vault / "Big" / f"B{i}.md").write_text(f"# B{i}\naardwolf {i}\n", encoding="utf-8")
    for i in range(40):
        (vault / f"O{i}.md").write_text(f"# O{i}\nother {i}\n", encoding="utf-8")
    calls: list[int] = []
    live: LiveReconciler | None = None

    def on_update() -> None:
        # The first call after the changes are queued is `changed` itself; the next comes after the two edited
        # notes are reconciled, with the folder still to do: a full pass is requested there.
        if calls:
            calls.append(1)
            if len(calls) == 3 and live is not None:
                live.request_full_pass("test: the periodic rescan fires now")

    live = LiveReconciler(rt.require_sync(), watch=False, quiet=0.05, on_update=on_update)
    await live.start()
    try:
        await live.wait_idle()
        for i in (0, 1):
            with open(vault / f"O{i}.md", "a", encoding="utf-8") as note:
                note.write("edited\n")
        shutil.rmtree(vault / "Big")
        calls.append(1)
        live.changed([(watch.NOTE, "O0.md"), (watch.NOTE, "O1.md"), (watch.FOLDER, "Big")])
        await eventually(lambda: live.full_passes >= 2 and live.pending == 0, timeout=10)
        assert len(calls) >= 3  # the pass was requested where meant
        assert [h.path for h in (await search(rt, "aardwolf")).results] == []
        assert all([await _status_is(rt, f"Big/B{i}.md", "archived") for i in range(25)])
    finally:
        await live.stop()


def test_a_holders_shared_facts_count_only_for_the_process_holding_the_lease() -> None:
    """What a follower reports as the holder's (`server.live.shared_facts`): the facts of the process the lease
    file names, and nothing from one that let the vault go or from another process; then the follower says 1
    pending rather than a 0 nobody vouches for (`status._vault_status`)."""
    from server.live import shared_facts

    row = '{"watching": true, "pending": 3, "pid": 7}'
    assert shared_facts(row, holder_pid=7) == {"watching": True, "pending": 3, "pid": 7}
    assert shared_facts(row, holder_pid=8) is None  # a holder killed; another took the lease since
    assert shared_facts(row, holder_pid=None) is None  # the lease released: nobody holds the vault
    assert shared_facts('{"released": true, "pid": 7}', holder_pid=7) is None
    assert (
        shared_facts(None, 7) is None
        and shared_facts("not json", 7) is None
        and shared_facts("[1]", 7) is None
    )


async def _closed_edges(rt: Runtime) -> int:
    sql = "select count(*) from edges where valid_to is not null"
    return int((await rt.store.read(lambda c: c.execute(sql).fetchone()))[0])


async def test_notes_moved_into_a_new_folder_or_out_of_a_removed_one_keep_their_relations_open(
    rt: Runtime, vault: Path, live: LiveSync
) -> None:
    """Review 17a/17b: `mkdir New; mv A.md B.md New/` often reached the graph as the two old paths first (found
    empty: archived, every relation closed) and then the folder (the notes back, relations opened again): the
    final graph was right, its history churned (2 of 6 runs on the code before). Folders that are there are now
    reconciled before the moment's notes, folders that are gone after them; the reverse move likewise."""
    ids = {
        name: await new_note(rt, vault, f"{name}.md", f"# {name}\nsee [[C]] and [[{other}]]\n")
        for name, other in (("A", "B"), ("B", "A"))
    }
    await new_note(rt, vault, "C.md", "# C\n")
    await live.wait_idle()
    assert await _closed_edges(rt) == 0
    (vault / "New").mkdir()
    os.rename(vault / "A.md", vault / "New" / "A.md")
    os.rename(vault / "B.md", vault / "New" / "B.md")
    for name, node_id in ids.items():
        row = await eventually(lambda name=name: node_at(rt, f"New/{name}.md"))
        assert row["id"] == node_id and row["status"] == "active"
    await live.wait_idle()
    assert await _closed_edges(rt) == 0
    os.rename(vault / "New" / "A.md", vault / "A.md")  # and back out, the folder removed with it
    os.rename(vault / "New" / "B.md", vault / "B.md")
    os.rmdir(vault / "New")
    for name, node_id in ids.items():
        row = await eventually(lambda name=name: node_at(rt, f"{name}.md"))
        assert row["id"] == node_id and row["status"] == "active"
    await live.wait_idle()
    assert await _closed_edges(rt) == 0


async def test_a_rename_written_as_a_delete_and_a_create_in_a_new_folder_keeps_its_relations_open(
    rt: Runtime, vault: Path, live: LiveSync
) -> None:
    """Review 18b: git applies a pulled rename into a new folder as a delete and, ~1 ms later, a folder and a
    file created. The delete settled alone (its own window ended first), so the note was archived and every
    relation closed, then brought back with new relation rows by the create (3 of 3 runs on the code before).
    A moment's changes now settle together (`MOMENT`)."""
    node_id = await new_note(rt, vault, "A.md", "# A\nsee [[C]] and [[D]]\n")
    await new_note(rt, vault, "C.md", "# C\n")
    await new_note(rt, vault, "D.md", "# D\n")
    await live.wait_idle()
    assert await _closed_edges(rt) == 0
    for round_ in range(3):
        old, new = ("A.md", f"P{round_}/A.md") if round_ == 0 else (f"P{round_ - 1}/A.md", f"P{round_}/A.md")
        data = (vault / old).read_bytes()
        (vault / old).unlink()
        time.sleep(0.001)
        (vault / new).parent.mkdir()
        (vault / new).write_bytes(data)
        row = await eventually(lambda new=new: node_at(rt, new))
        assert row["id"] == node_id and row["status"] == "active"
        await live.wait_idle()
        assert await _closed_edges(rt) == 0, f"relations closed and reopened in round {round_}"


async def test_a_change_that_can_never_be_reconciled_holds_back_neither_its_moment_nor_pending(
    rt: Runtime, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 17b: a change that fails every time (a file name that is not UTF-8, which Linux allows and the
    database cannot store) was retried for good: `pending` never reached 0, and the good notes of its moment,
    retried as one batch with it, never reached the graph. Now a failed batch's notes are tried on their own,
    and a change is given up after RETRIES attempts (logged; tried again when it changes)."""
    monkeypatch.setattr(debounce, "RETRIES", 2)
    monkeypatch.setattr(debounce, "RETRY_FIRST", 0.1)
    live = LiveReconciler(rt.require_sync(), watch=False, quiet=0.05)
    await live.start()
    try:
        await live.wait_idle()
        bad = os.fsencode(vault) + b"/Bad \xff name.md"
        with open(bad, "wb") as note:
            note.write(b"# Bad\nunstorable name\n")
        for name in ("Good A", "Good B", "Good C"):
            (vault / f"{name}.md").write_text(f"# {name}\nokapi\n", encoding="utf-8")
        names = ["Good A.md", "Good B.md", "Good C.md", os.fsdecode(b"Bad \xff name.md")]
        live.changed([(watch.NOTE, name) for name in names])
        await eventually(lambda: _count_found(rt, "okapi", 3), 10, what="the good notes in the graph")
        await eventually(lambda: live.pending == 0, timeout=10, what="pending back to 0")
    finally:
        await live.stop()


async def _count_found(rt: Runtime, word: str, expected: int) -> bool:
    return len(await searchable(rt, word)) == expected


async def test_a_note_queued_again_while_it_waits_for_quiet_counts_once_as_pending(rt: Runtime) -> None:
    """Review 22h: a note back from its wait for quiet was queued while still listed as waiting, and
    `pending` counted it twice (769 pending for 400 notes): a client waiting for 0 saw numbers that said
    nothing."""
    async with live_sync(rt, quiet=30) as live:  # what is queued stays queued during the test
        await live.wait_idle()
        reconciler = live.reconciler
        assert reconciler is not None and reconciler.pending == 0
        rt.require_sync().deferred["Topic.md"] = time.monotonic() + 60  # waits for quiet
        reconciler.changed([("note", "Topic.md")])  # and is touched again
        reconciler.changed([("note", "Other.md")])
        assert reconciler.pending == 2
