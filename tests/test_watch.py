"""The debounce and the watcher on their own: a real watchdog observer over a real temporary folder."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    DirMovedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)

from vault_sync.debounce import Debouncer
from vault_sync.watch import FOLDER, NOTE, WATCHED_EVENTS, Change, VaultWatcher, changes_for


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a thread running (watcher threads must be stopped and joined)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 3
    while leaked := _new_threads(before):
        if time.monotonic() > deadline:
            pytest.fail(f"threads left running: {leaked}")
        time.sleep(0.01)


def _new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    # asyncio's default executor threads belong to the test's event loop, which shuts them down itself; the
    # writer's watcher of replaced files (vault_sync.orphans) ends by itself a few seconds after the last write.
    return [
        t
        for t in threading.enumerate()
        if t not in before and not t.name.startswith(("asyncio_", "engrama-orphans"))
    ]


async def eventually(check: Callable[[], object], timeout: float = 5.0) -> None:
    """Poll `check` until it is truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.01)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- debounce ---------------------------------------------------------------------------------------------


def test_a_burst_of_touches_settles_once_after_the_quiet_window() -> None:
    clock = FakeClock()
    debouncer: Debouncer[str] = Debouncer(0.25, clock)  # binary fractions: exact arithmetic
    for _ in range(5):
        debouncer.touch("a.md")
        clock.now += 0.125
    assert debouncer.pop_settled() == []
    assert debouncer.next_delay() == 0.125
    clock.now += 0.125
    assert debouncer.pop_settled() == ["a.md"]
    assert len(debouncer) == 0 and debouncer.next_delay() is None


def test_keys_settle_in_order_of_their_last_touch() -> None:
    clock = FakeClock()
    debouncer: Debouncer[str] = Debouncer(0.1, clock)
    assert debouncer.touch("a") is True  # was empty: the worker needs waking
    assert debouncer.touch("b") is False
    clock.now += 0.05
    debouncer.touch("a")  # touched again: now it settles after b
    clock.now += 0.06
    assert debouncer.pop_settled() == ["b"]
    clock.now += 0.05
    assert debouncer.pop_settled() == ["a"]


def test_pending_memory_is_bounded_by_distinct_keys() -> None:
    debouncer: Debouncer[str] = Debouncer(0.1, FakeClock())
    for i in range(50_000):
        debouncer.touch(f"note-{i % 100}.md")
    assert len(debouncer) == 100
    assert len(debouncer.clear()) == 100 and len(debouncer) == 0


# --- event -> change mapping ------------------------------------------------------------------------------


def test_moves_name_the_destination_before_the_source(tmp_path: Path) -> None:
    event = FileMovedEvent(str(tmp_path / "A.md"), str(tmp_path / "Sub" / "B.md"))
    assert changes_for(tmp_path, event) == [(NOTE, "Sub/B.md"), (NOTE, "A.md")]


def test_atomic_and_vim_saves_map_to_the_note_only(tmp_path: Path) -> None:
    atomic = FileMovedEvent(str(tmp_path / ".A.md.tmp"), str(tmp_path / "A.md"))
    vim_backup = FileMovedEvent(str(tmp_path / "A.md"), str(tmp_path / "A.md~"))
    assert changes_for(tmp_path, atomic) == [(NOTE, "A.md")]
    assert changes_for(tmp_path, vim_backup) == [(NOTE, "A.md")]
    assert changes_for(tmp_path, FileCreatedEvent(str(tmp_path / ".engrama-tmp-ab12.tmp"))) == []
    assert changes_for(tmp_path, FileDeletedEvent(str(tmp_path / "A.md~"))) == []


def test_trash_hidden_folders_and_other_files_are_dropped(tmp_path: Path) -> None:
    to_trash = FileMovedEvent(str(tmp_path / "A.md"), str(tmp_path / ".trash" / "A.md"))
    assert changes_for(tmp_path, to_trash) == [(NOTE, "A.md")]  # the source is gone: archived
    assert changes_for(tmp_path, FileModifiedEvent(str(tmp_path / ".obsidian" / "w.md"))) == []
    assert changes_for(tmp_path, FileModifiedEvent(str(tmp_path / "pic.png"))) == []
    assert changes_for(tmp_path, DirCreatedEvent(str(tmp_path / ".git" / "objects"))) == []


def test_folder_events_become_folder_changes(tmp_path: Path) -> None:
    renamed = DirMovedEvent(str(tmp_path / "Old"), str(tmp_path / "New"))
    assert changes_for(tmp_path, renamed) == [(FOLDER, "New"), (FOLDER, "Old")]
    hidden = DirMovedEvent(str(tmp_path / "Old"), str(tmp_path / ".trash" / "Old"))
    assert changes_for(tmp_path, hidden) == [(FOLDER, "Old")]
    assert changes_for(tmp_path, DirCreatedEvent(str(tmp_path))) == []  # the vault root itself


def test_reads_are_never_asked_of_the_os() -> None:
    # Opens and read-only closes are left out of the inotify mask, so our own reads cannot echo back.
    assert FileOpenedEvent not in WATCHED_EVENTS and FileClosedNoWriteEvent not in WATCHED_EVENTS


# --- the real watcher -------------------------------------------------------------------------------------


async def test_watcher_delivers_an_atomic_save_and_stops_cleanly(tmp_path: Path) -> None:
    seen: list[Change] = []
    overflows: list[bool] = []
    watcher = VaultWatcher(tmp_path, asyncio.get_running_loop(), seen.extend, lambda: overflows.append(True))
    watcher.start()
    try:
        assert watcher.alive
        temp = tmp_path / ".A.md.tmp"
        temp.write_text("hello\n", encoding="utf-8")
        os.replace(temp, tmp_path / "A.md")
        await eventually(lambda: (NOTE, "A.md") in seen)
        (tmp_path / "A.md").read_bytes()  # our own read must not echo back as a change
        os.mkdir(tmp_path / "Folder")
        await eventually(lambda: (FOLDER, "Folder") in seen)
        assert seen.count((NOTE, "A.md")) == 1
    finally:
        watcher.stop()
    assert not watcher.alive and overflows == []


async def test_watchdogs_overflow_warning_reaches_the_callback(tmp_path: Path) -> None:
    overflows: list[bool] = []
    watcher = VaultWatcher(
        tmp_path, asyncio.get_running_loop(), lambda _: None, lambda: overflows.append(True)
    )
    watcher.start()
    try:
        # exactly what watchdog 7.1's inotify reader logs when the kernel reports IN_Q_OVERFLOW
        logging.getLogger("watchdog.observers.inotify_c").warning(
            "Inotify queue overflowed; filesystem events were lost"
        )
        await eventually(lambda: overflows)
    finally:
        watcher.stop()


def test_a_key_settles_with_the_rest_of_its_moment() -> None:
    """git applies a rename as a delete and a create 2 ms apart: when the delete settles, the create (touched
    within `together` after it) goes with it, so the moment is reconciled as one (review 18b); a key touched
    later than that waits for its own window."""
    clock = FakeClock()
    debouncer: Debouncer[str] = Debouncer(0.25, clock)
    debouncer.touch("A.md")
    clock.now += 0.03125
    debouncer.touch("P")
    debouncer.touch("P/A2.md")
    clock.now += 0.125
    debouncer.touch("later.md")
    clock.now += 0.125
    assert debouncer.pop_settled(0.0625) == ["A.md", "P", "P/A2.md"]
    assert debouncer.pop_settled(0.0625) == []
    clock.now += 0.125
    assert debouncer.pop_settled(0.0625) == ["later.md"]
