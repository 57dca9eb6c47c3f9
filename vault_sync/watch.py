"""Watch a vault with watchdog and hand its changes to the event loop (DESIGN.md section 2).

The watchdog threads never reconcile anything. They turn each file-system event into *changes* — a note
path, or a folder whose contents must be looked at again — and queue them for the event loop, where the
`LiveReconciler` (`vault_sync.debounce`) debounces and reconciles them. What each event becomes:

- a file created, modified, closed after writing, or deleted: that note path (if it is a note at all);
- a file moved or renamed: the destination, then the source. The reconcile recognises a move by the
  `engrama_id` in the file, so an atomic save (temp file -> note), a vim save (note -> note~, new note,
  delete note~), a rename, and a move into `.trash` (the source is gone: archived) all come out right;
- a folder created, deleted, moved or renamed: the new folder and then the old one, to be reconciled as a
  whole (watchdog also reports the files inside, but a folder moved in or out of the vault may not be);
- events inside dot-folders (`.git`, `.obsidian`, `.trash`), on scratch files and on our own temp files are
  dropped here, except a change of the settings that name the vault's templates (`.obsidian/templates.json`
  and the like: `vault_sync.templates`), which calls `on_settings`; opens and read-only closes are never even
  asked of the OS, so our own reads cause nothing.

Changes pass from the watchdog thread through a small locked inbox keyed by change: a storm of events costs
one loop callback per batch, and memory is bounded by the number of distinct paths.

When the OS drops events (inotify's queue overflowed), watchdog 7.1 rebuilds its watches and only logs a
warning ("Inotify queue overflowed; ..."); that warning is the one signal there is, so a log handler listens
for it and asks for a full rescan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from vault_sync.errors import PathOutsideVault
from vault_sync.paths import classify, to_rel
from vault_sync.scan import utf8_name
from vault_sync.templates import is_settings_path

log = logging.getLogger(__name__)

ChangeKind = Literal["note", "folder"]
Change = tuple[ChangeKind, str]  # ("note", "Projects/Engrama.md") or ("folder", "Projects")
NOTE: ChangeKind = "note"
FOLDER: ChangeKind = "folder"

# Only what can change a note; leaving out opens and read-only closes keeps our own reads from echoing back.
WATCHED_EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
OVERFLOW_LOGGER = "watchdog.observers.inotify_c"
OVERFLOW_MESSAGE = "Inotify queue overflowed"
JOIN_TIMEOUT = 5.0


def changes_for(root: Path, event: FileSystemEvent) -> list[Change]:
    """The changes one watchdog event stands for (destination first for moves); [] when none matter."""
    paths = [event.src_path]
    if isinstance(event, FileMovedEvent | DirMovedEvent):
        paths.insert(0, event.dest_path)
    changes: list[Change] = []
    for path in paths:
        rel = _rel(root, path)
        if rel is None or rel == "":
            continue
        if event.is_directory:
            if not any(part.startswith(".") for part in rel.split("/")):
                changes.append((FOLDER, rel))
        elif classify(rel) in ("note", "conflict"):  # a conflict copy: listed for the person, never synced
            changes.append((NOTE, rel))
    return changes


def _rel(root: Path, path: bytes | str) -> str | None:
    if not path:
        return None  # a move reported from or to outside the watched tree
    try:
        rel = to_rel(root, path if isinstance(path, str) else path.decode("utf-8", "surrogateescape"))
    except PathOutsideVault:
        return None
    # A name that is not UTF-8 cannot be stored or sent: the walk reports it to the person (scan.misnamed).
    return rel if utf8_name(rel) else None


class _Inbox:
    """Changes handed from watchdog's thread to the event loop: one loop callback per batch, not per event."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[list[Change]], None]) -> None:
        self._loop = loop
        self._deliver = deliver
        self._lock = threading.Lock()
        self._changes: dict[Change, None] = {}  # an ordered set: moves keep destination-before-source order
        self._flush_scheduled = False

    def offer(self, changes: Iterable[Change]) -> None:
        """Called on watchdog's thread."""
        with self._lock:
            self._changes.update(dict.fromkeys(changes))
            if self._flush_scheduled or not self._changes:
                return
            self._flush_scheduled = True
        # RuntimeError: the loop closed during shutdown; nothing is listening any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self._lock:
            changes, self._changes = list(self._changes), {}
            self._flush_scheduled = False
        self._deliver(changes)


class _Handler(FileSystemEventHandler):
    def __init__(
        self,
        root: Path,
        inbox: _Inbox,
        on_settings: Callable[[], None] | None = None,
        same_folder: Callable[[], bool] = lambda: True,
    ) -> None:
        self._root = root
        self._inbox = inbox
        self._on_settings = on_settings
        self._same_folder = same_folder

    def dispatch(self, event: FileSystemEvent) -> None:
        # Watches follow the folder, not its path: once the vault's folder was moved away (a backup put in its
        # place), what happens in the old folder is reported under the vault's paths, and a note read there by
        # the copy (its access time) was taken for one gone from the new folder. Such events are dropped; the
        # look at the folder (`LiveReconciler._check_folder`) watches the new one within a second. One `stat`
        # of the vault folder per event, on watchdog's thread.
        if not self._same_folder():
            return
        changes = changes_for(self._root, event)
        if changes:
            self._inbox.offer(changes)
        elif self._on_settings is not None and touches_settings(self._root, event):
            self._on_settings()


def touches_settings(root: Path, event: FileSystemEvent) -> bool:
    """Whether `event` changed one of the vault settings that name its templates (vault_sync.templates)."""
    if event.is_directory:
        return False
    paths = [event.src_path, getattr(event, "dest_path", "")]
    return any((rel := _rel(root, path)) is not None and is_settings_path(rel) for path in paths)


class _OverflowSignal(logging.Handler):
    """Turns watchdog's "queue overflowed" warning into a callback (it is watchdog's only overflow signal)."""

    def __init__(self, callback: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self._callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith(OVERFLOW_MESSAGE):
            self._callback()


class VaultWatcher:
    """A watchdog observer over one vault that delivers `Change` batches to `on_changes` on the event loop.

    `on_overflow` is called (on the loop) when the OS reports that it dropped events, and `on_settings` when one
    of the vault's settings that name its templates changed (`vault_sync.templates`). `start()` raises
    `OSError` when the OS refuses to watch (e.g. the inotify watch limit); `stop()` joins every thread.
    """

    def __init__(
        self,
        root: Path,
        loop: asyncio.AbstractEventLoop,
        on_changes: Callable[[list[Change]], None],
        on_overflow: Callable[[], None],
        on_settings: Callable[[], None] | None = None,
    ) -> None:
        self.root = root
        self._loop = loop
        self._inbox = _Inbox(loop, on_changes)
        self._overflow = _OverflowSignal(lambda: self._call_on_loop(on_overflow))
        self._on_settings = (lambda: self._call_on_loop(on_settings)) if on_settings is not None else None
        self._observer: BaseObserver | None = None
        self._folder: tuple[int, int] | None = None  # (device, inode) of the folder the watches were put on

    @property
    def alive(self) -> bool:
        """True while the observer and all its emitter threads run (an emitter stops if the vault vanishes)."""
        observer = self._observer
        return (
            observer is not None
            and observer.is_alive()
            and all(emitter.is_alive() for emitter in observer.emitters)
        )

    def same_folder(self) -> bool:
        """Whether the vault's path still leads to the folder being watched. A share or drive mounted again on
        the vault's path, or a vault folder moved away and another put in its place (a backup restored, a
        fresh clone), leaves the watches on the folder that was there: they stay alive and report nothing of
        the vault the person now edits. False too when the path leads nowhere. Reads the file system (one
        `stat`), so callers keep it off the event loop."""
        try:
            found = os.stat(self.root)
        except OSError:
            return False
        return self._folder == (found.st_dev, found.st_ino)

    def start(self) -> None:
        folder = os.stat(self.root)  # before the watches: a folder put in its place after this is told apart
        self._folder = (folder.st_dev, folder.st_ino)
        # The folder the path leads to now: a vault folder replaced by a symlink (to a restored backup) is
        # watched where the link points; the events there are the vault's, and are told relative to it.
        watched = Path(os.path.realpath(self.root))
        overflow_log = logging.getLogger(OVERFLOW_LOGGER)
        if not overflow_log.isEnabledFor(logging.WARNING):
            overflow_log.setLevel(logging.WARNING)  # a quieter root level must not hide the overflow signal
        overflow_log.addHandler(self._overflow)
        observer = Observer()
        observer.schedule(
            _Handler(watched, self._inbox, self._on_settings, self.same_folder),
            str(watched),
            recursive=True,
            event_filter=WATCHED_EVENTS,
        )
        try:
            observer.start()
        except BaseException:
            overflow_log.removeHandler(self._overflow)
            observer.stop()
            raise
        self._observer = observer
        log.info("watching %s for changes", self.root)

    def stop(self) -> None:
        """Stop the observer and wait for its threads; safe to call more than once."""
        logging.getLogger(OVERFLOW_LOGGER).removeHandler(self._overflow)
        observer, self._observer = self._observer, None
        if observer is None:
            return
        emitters = list(observer.emitters)
        observer.stop()
        observer.join(JOIN_TIMEOUT)
        for emitter in emitters:  # the observer stops them; joining makes sure no thread outlives us
            emitter.join(JOIN_TIMEOUT)
        if observer.is_alive():
            log.warning("the file watcher thread did not stop within %.0f s", JOIN_TIMEOUT)

    def _call_on_loop(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(callback)
