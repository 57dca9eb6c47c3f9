"""From a stream of vault changes to settled reconciles: a per-key debounce, and the loop that drains it.

Obsidian writes a note several times while a person types, an atomic save is a create followed by a rename,
and a vim save is three events in a row. Reconciling on every event would read the same file again and again;
waiting until a path has been quiet for ~150 ms turns each burst into one reconcile.

Keys live in an insertion-ordered dict, and touching a key moves it to the end. Every key gets the same quiet
window, so the dict is always ordered by deadline: the first key is the next to settle, and finding the settled
ones costs nothing more than walking the front of the dict. Memory is bounded by the number of distinct keys,
however many events arrive.

`LiveReconciler` drains the debouncer into `VaultSync`: settled note paths go to `sync_path`, settled folders
to `sync_vault(folder=...)`, and a full `sync_vault` pass takes over when per-path work would not do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Container, Hashable
from datetime import UTC, datetime
from typing import Generic, TypeVar

from vault_sync import templates
from vault_sync.errors import StoreTrouble, VaultError
from vault_sync.filesystems import remote_file_system
from vault_sync.paths import classify
from vault_sync.reconcile import Later, VaultSync
from vault_sync.report import ARCHIVED, CREATED, NoteOutcome, SyncReport
from vault_sync.scan import Presence, presence
from vault_sync.watch import FOLDER, NOTE, Change, VaultWatcher

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

DEFAULT_QUIET = 0.15  # seconds; long enough to swallow an editor's save burst, short enough to feel live
# Changes touched this soon after one that settles go with it: one operation of a program (git applying a
# rename as a delete and a create 2 ms apart, a sync client moving notes into a new folder) is one moment, and
# its parts must be reconciled together (`_reconcile_each` orders a moment's folders and notes).
MOMENT = 0.05
# Settled note paths from which they are reconciled together (VaultSync.sync_paths), not one by one: every
# note carrying an id is settled before the notes that would take over their path's node, so a note renamed
# while a new one took its old name (a sync client bringing another device's changes) keeps its identity.
BURST = 2
STORM_THRESHOLD = 2000  # pending paths above which one walk of the vault beats reconciling them one by one
WATCH_RETRY = 30.0  # seconds between attempts to start a watcher the OS refused
# A vault folder that is not there (a drive unplugged, a share not mounted) is looked for again this soon: the
# person plugs it back and edits at once (review 22e: it was watched again only ~30 s later).
MISSING_RETRY = 1.0
# A safety net for events lost without a signal (watchdog reports overflows only on inotify): a walk that
# finds nothing changed costs one stat per note, so every 15 minutes is cheap even for a large vault.
RESCAN_EVERY = 900.0
# After the vault's path came to lead to another folder (a share mounted again, a backup put in place), the
# rescan waits until the watcher has reported nothing for this long: a folder still being copied back would
# otherwise be taken for a vault whose notes went, and its notes archived until their copies arrive.
SWAP_QUIET = 2.0
# While the OS refuses a watcher (inotify's per-user limits, which other programs' watchers use up too), the
# vault is walked instead, as often as a walk costs at most POLL_SHARE of one core and at most every POLL_MIN
# seconds: edits reach the graph within seconds rather than at the next safety rescan.
POLL_MIN = 5.0
POLL_MAX = 60.0
POLL_SHARE = 0.05
# A reconcile that fails for a reason other than the note itself (the database locked past its busy timeout, a
# bug) is tried again after RETRY_FIRST seconds, doubling up to RETRY_LAST, at most RETRIES times: the change
# stays pending meanwhile, instead of waiting for the note's next edit or the safety rescan. A change that still
# fails then is left to those (logged), so one that can never succeed does not keep `pending` above 0 for good.
# A change of a batch that failed is tried on its own, so one bad note does not hold back the others.
# A store that refuses every write for a reason of its own (`StoreTrouble`: its disk is full) is waited out
# instead: the changes are tried again every RETRY_LAST seconds for as long as it lasts, and all at once when a
# write succeeds again, so a graph missing notes never reports 0 pending.
RETRY_FIRST = 1.0
RETRY_LAST = 60.0
RETRIES = 6  # 1 + 2 + 4 + 8 + 16 + 32 s: about a minute (a lock held past the 10 s timeout several times)
TROUBLE_SAID_EVERY = 600.0  # seconds between two log lines about the same trouble of the store


class Debouncer(Generic[K]):
    """Collects keys and hands each one out after `quiet` seconds without a new touch.

    Not thread-safe: use it from one thread (the event loop); the watcher bridges its events onto the loop.
    """

    def __init__(self, quiet: float = DEFAULT_QUIET, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet = quiet
        self._clock = clock
        self._last_touch: dict[K, float] = {}

    def __len__(self) -> int:
        return len(self._last_touch)

    def __contains__(self, key: object) -> bool:
        return key in self._last_touch

    def waiting(self) -> list[K]:
        """The keys not handed out yet."""
        return list(self._last_touch)

    def touch(self, key: K) -> bool:
        """(Re)start `key`'s quiet window. True when the debouncer was empty before (a worker may be asleep)."""
        was_empty = not self._last_touch
        self._last_touch.pop(
            key, None
        )  # re-inserting moves the key to the end: the dict stays deadline-ordered
        self._last_touch[key] = self._clock()
        return was_empty

    def next_delay(self) -> float | None:
        """Seconds until the first key settles (0 when one already has); None when nothing is pending."""
        for touched in self._last_touch.values():
            return max(0.0, touched + self.quiet - self._clock())
        return None

    def pop_settled(self, together: float = 0.0) -> list[K]:
        """Remove and return every key that has been quiet for the whole window, oldest first, with the keys
        touched within `together` seconds after the last of them (the rest of its moment)."""
        cutoff = self._clock() - self.quiet
        settled: list[K] = []
        last: float | None = None
        for key, touched in self._last_touch.items():
            if touched > cutoff:
                if last is None or touched > last + together:
                    break
            else:
                last = touched
            settled.append(key)
        for key in settled:
            del self._last_touch[key]
        return settled

    def discard(self, key: K) -> None:
        """Forget `key` (e.g. a wider reconcile is about to cover it)."""
        self._last_touch.pop(key, None)

    def clear(self) -> list[K]:
        """Remove and return every pending key, settled or not."""
        keys = list(self._last_touch)
        self._last_touch.clear()
        return keys


class LiveReconciler:
    """Keeps the graph in step with a changing vault: debounce each path, reconcile it, rescan when needed.

    Work runs on one task, one job at a time (VaultSync's lock would serialise it anyway). A full pass
    (`sync_vault`) replaces per-path work at start-up (catch-up), after the OS dropped events, after the
    watcher had to be restarted, and in an event storm (more than `storm_threshold` paths pending), where one
    walk of the vault is far cheaper than thousands of single reconciles.
    """

    def __init__(
        self,
        sync: VaultSync,
        *,
        watch: bool = True,
        quiet: float = DEFAULT_QUIET,
        storm_threshold: int = STORM_THRESHOLD,
        rescan_every: float = RESCAN_EVERY,
        poll_min: float = POLL_MIN,
        poll: float | None = None,
        on_update: Callable[[], None] = lambda: None,
        on_notes_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.sync = sync
        self.watch = watch
        self.storm_threshold = storm_threshold
        self.rescan_every = rescan_every
        self.poll_min = poll_min
        # Walks of the vault beside the watcher: None decides by the file system (`filesystems`), 0 never,
        # a number of seconds always, at least that far apart.
        self.poll = poll
        self._remote: str | None = None  # the vault's file system type when a watcher there misses changes
        self.last_reconcile_at: datetime | None = None
        self.full_passes = 0  # how many full passes ran (status and tests)
        self._on_update = on_update
        # Told when notes came or went (created, archived, moved), not on edits: the MCP resource list changed.
        self._on_notes_changed = on_notes_changed
        self._debouncer: Debouncer[Change] = Debouncer(quiet)
        self._watcher: VaultWatcher | None = None
        self._looking = False  # a look at the vault's folder is under way (`_check_folder`)
        self._swapped_at: float | None = None  # the folder was found swapped; its rescan waits for quiet
        self._last_change = 0.0  # when the watcher last reported a change (time.monotonic())
        self._next_watch_attempt = 0.0
        self._refused = False  # the OS refused the last attempt to watch (see `polling`)
        self._pass_wanted = False
        self._reported: set[str] = set()  # paths of events a full pass took over (see `_full_pass`)
        self._pass_left = 0
        # Notes the running full pass still has to read (0 outside a pass, and in a pass that finds every note
        # as the graph has it; None before the first walk and while a pass is still walking the vault): how
        # much of the vault a first catch-up has yet to take in.
        self.reading_left: int | None = None
        # Paths of the changes a reconcile is working on: off the queue, not yet done (nor owed again).
        self._working: set[str] = set()
        self._last_pass = time.monotonic()
        self._pass_ended = self._last_pass  # when the last full pass ended
        self._pass_seconds = 0.0  # how long the last one that changed nothing took (what a poll costs)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._come_backs: dict[str, asyncio.TimerHandle] = {}  # one timer per path, the latest wins
        self._retries: dict[Change, asyncio.TimerHandle] = {}  # failed changes, each tried again by a timer
        self._alone: set[Change] = set()  # failed in a batch: tried on their own
        self._failures: dict[Change | None, int] = {}  # failures in a row per change (None: the full pass)
        self._pass_retry: asyncio.TimerHandle | None = None
        # Why the store refused the last reconcile (`StoreTrouble`: its disk is full...), until one succeeds:
        # meanwhile failed changes are tried again however often it takes, never given up.
        self.store_trouble: str | None = None
        # The trouble logged last, and when (a small write may fit between two failures: not said again).
        self._trouble_said: str | None = None
        self._trouble_said_at = 0.0
        self._templates = templates.NONE  # what the settings named when the watcher started (`_on_settings`)
        sync.on_defer = self._come_back  # notes owed their id line are reconciled again once quiet

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.alive

    @property
    def unsettled(self) -> int:
        """Changes seen and not in the graph yet: queued in the quiet window, being reconciled, or a full pass
        wanted or running. Unlike `pending`, not notes already indexed that only owe their id line."""
        passing = self._pass_wanted or self._pass_left or self._swapped_at is not None
        return len(self._debouncer) + len(self._working) + (1 if passing else 0)

    @property
    def pending(self) -> int:
        """Paths waiting to be reconciled: queued, being reconciled now, left in a running full pass, or owing
        their id line until they are quiet. 0 only when the graph and the notes are in step with every change
        seen (what a client waiting on `engrama_status` relies on)."""
        retrying = {rel for _, rel in self._retries}
        queued = {rel for _, rel in self._debouncer.waiting()}
        swapped = 1 if self._swapped_at is not None and not self._pass_left else 0  # its rescan is to come
        # Each path once: a note back from its wait for quiet is queued while still listed as deferred (review
        # 22h: 769 pending for 400 notes).
        return self._pass_left + swapped + len(queued | self._working | self.sync.deferred.keys() | retrying)

    async def start(self) -> None:
        """Start watching and reconciling; the catch-up pass runs in the background."""
        if self.watch and self.poll is None:
            self._remote = await asyncio.to_thread(remote_file_system, self.sync.root)
            if self._remote is not None:
                log.info(
                    "%s is on a %s file system, where changes made on other machines send no event: it is "
                    "also walked for changes every few seconds (ENGRAMA_POLL_SECONDS=0 turns that off)",
                    self.sync.root,
                    self._remote,
                )
        self.request_full_pass("start-up catch-up")
        self._task = asyncio.create_task(self._run(), name="engrama-live-sync")
        self.ensure_watching()

    async def stop(self) -> None:
        """Stop the watcher (threads joined) and the reconcile task. Pending changes wait for the next start."""
        self._swapped_at = None
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        for handle in [*self._come_backs.values(), *self._retries.values()]:
            handle.cancel()
        self._come_backs.clear()
        self._retries.clear()
        self._alone.clear()
        if self._pass_retry is not None:
            self._pass_retry.cancel()
            self._pass_retry = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.sync.stop_writing_again()

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until nothing is pending and no reconcile runs; raises TimeoutError after `timeout` seconds."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    def tick(self) -> None:
        """Periodic upkeep (called about once a second): keep the watcher alive and on the vault's folder,
        rescan now and then, and walk the vault for changes where a watcher cannot be had or misses changes
        (`polling`)."""
        if self.ensure_watching():
            self._check_folder()
        now = time.monotonic()
        if self._swapped_at is not None and now - max(self._swapped_at, self._last_change) >= SWAP_QUIET:
            self._swapped_at = None
            self.request_full_pass("the vault's folder is not the one that was watched")
        if self._pass_wanted:
            return
        if now - self._last_pass > self.rescan_every:
            self.request_full_pass("periodic safety rescan")
        elif (every := self.polling) is not None and now - self._pass_ended >= every:
            self.request_full_pass("walking the vault for changes", quietly=True)

    @property
    def polling(self) -> float | None:
        """Seconds between walks of the vault for changes, when a watcher was asked for and the OS refused it,
        or the vault's file system is one where a watcher misses changes made elsewhere (unless `poll` is 0),
        or the person asked for walks (`poll`, with or without a watcher); None otherwise (`--no-watch` alone
        keeps to the periodic rescan)."""
        refused = self.watch and self._refused and not self.watching  # then walks are the only way, always
        remote = self.watch and self._remote is not None and self.poll is None
        if not (refused or remote or self.poll):
            return None
        least = self.poll or self.poll_min
        return max(least, min(self._pass_seconds / POLL_SHARE, POLL_MAX))

    def ensure_watching(self) -> bool:
        """(Re)start the watcher if it is not running; a restart is followed by a rescan. True when watching."""
        if not self.watch:
            return False
        if self.watching:
            return True
        now = time.monotonic()
        if now < self._next_watch_attempt:
            return False
        restart = self._watcher is not None or self._next_watch_attempt > 0
        if self._watcher is not None:
            log.warning("the file watcher stopped; restarting it and rescanning the vault")
            self._watcher.stop()
            self._watcher = None
        self._templates = templates.rules(self.sync.root)
        watcher = VaultWatcher(
            self.sync.root, asyncio.get_running_loop(), self.changed, self._on_overflow, self._on_settings
        )
        try:
            watcher.start()
        except OSError as exc:
            missing = isinstance(exc, FileNotFoundError | NotADirectoryError)
            self._next_watch_attempt = now + (MISSING_RETRY if missing else WATCH_RETRY)
            if not self._refused and missing:
                log.warning(
                    "cannot watch %s: the vault folder is not there (a drive unplugged, a share not mounted, "
                    "the folder moved); nothing is archived meanwhile, and it is watched again once it is back",
                    self.sync.root,
                )
            elif not self._refused:  # said once, not on every attempt
                log.error(
                    "cannot watch %s (%s); if an inotify limit is reached, raise fs.inotify.max_user_watches "
                    "or fs.inotify.max_user_instances. Meanwhile the vault is walked for changes every few "
                    "seconds; trying to watch again every %.0f s",
                    self.sync.root,
                    exc,
                    WATCH_RETRY,
                )
            self._refused = True
            return False
        self._watcher = watcher
        if self._refused:
            log.warning("watching %s again", self.sync.root)
            self._refused = False
        if restart:
            self.request_full_pass("the watcher restarted; events may have been missed")
        return True

    def _check_folder(self) -> None:
        """Look, off the loop, whether the vault's path still leads to the folder being watched; when it does
        not (a share mounted again, the folder replaced), watch the one there now, and rescan the vault (what
        the person edits) once nothing has changed in it for `SWAP_QUIET` seconds. The look runs on a daemon
        thread of its own, one at a time: a `stat` hung on a dead network mount holds that thread, never the
        loop, another thread, or the server's exit."""
        watcher = self._watcher
        if watcher is None or self._looking:
            return
        self._looking = True
        loop = asyncio.get_running_loop()

        def looked(same: bool) -> None:
            self._looking = False
            if same or self._watcher is not watcher:  # stopped or restarted meanwhile: nothing left to fix
                return
            log.warning(
                "%s no longer leads to the folder being watched (a drive or share unmounted or mounted again, "
                "the folder moved away or replaced); watching what is there now, and rescanning the vault once "
                "it is quiet",
                self.sync.root,
            )
            watcher.stop()
            self._watcher = None
            self._next_watch_attempt = 0.0
            self._swapped_at = time.monotonic()
            self._idle.clear()
            self.ensure_watching()

        def look() -> None:
            same = watcher.same_folder()
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
                loop.call_soon_threadsafe(looked, same)

        threading.Thread(target=look, name="engrama-vault-folder", daemon=True).start()

    def changed(self, changes: list[Change]) -> None:
        """Queue changes (called on the loop by the watcher; tests may call it too)."""
        self._last_change = time.monotonic()
        for change in changes:
            if (retry := self._retries.pop(change, None)) is not None:
                retry.cancel()  # queued now: no timer needs to bring it back
            if self._debouncer.touch(change):
                self._wake.set()
        if changes:
            self._idle.clear()
            self._on_update()

    def _come_back(self, rel: str, delay: float) -> None:
        """Reconcile `rel` again in `delay` seconds (the sync deferred writing its id line until then)."""

        def due() -> None:
            self._come_backs.pop(rel, None)
            self.changed([(NOTE, rel)])

        if (earlier := self._come_backs.pop(rel, None)) is not None:
            earlier.cancel()
        self._come_backs[rel] = asyncio.get_running_loop().call_later(delay, due)
        self._on_update()

    def request_full_pass(self, reason: str, *, quietly: bool = False) -> None:
        """Reconcile the whole vault next (it covers everything pending); `quietly`: logged at debug level (a
        walk repeated every few seconds)."""
        log.log(logging.DEBUG if quietly else logging.INFO, "full vault reconcile requested: %s", reason)
        self._pass_wanted = True
        self._pass_left = max(self._pass_left, 1)
        self._idle.clear()
        self._wake.set()

    def _on_overflow(self) -> None:
        self.request_full_pass("the OS dropped file events (inotify queue overflow)")

    def _on_settings(self) -> None:
        """The vault's template settings were written: when they name other templates, a full pass archives
        the notes that became templates and takes in the templates that became notes."""
        found = templates.rules(self.sync.root)
        if found != self._templates:
            self._templates = found
            self.request_full_pass(f"the vault's templates changed (now: {found.describe()})")

    # --- the worker ----------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            if self._pass_wanted:
                self._pass_wanted = False
                # The pass covers them; events arriving during it queue up again.
                self._reported.update(rel for _, rel in self._debouncer.clear())
                if await self._guarded(self._full_pass(), "full vault reconcile"):
                    self._forget_retries()  # the pass read every note whose file differs from the graph
                else:
                    self._retry_pass()
                continue
            delay = self._debouncer.next_delay()
            if delay is None:
                if self._swapped_at is None:  # else the rescan of the folder now there is still to come
                    self._idle.set()
                self._on_update()
                await self._wake.wait()
            elif delay > 0:  # only an earlier deadline or a pass request can cut this short
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
            else:
                settled = self._debouncer.pop_settled(MOMENT)
                if len(settled) + len(self._debouncer) >= self.storm_threshold:
                    self._reported.update(rel for _, rel in settled)
                    self.request_full_pass(f"event storm ({len(settled) + len(self._debouncer)} paths)")
                    continue
                self._working = {rel for _, rel in settled}
                try:
                    await self._reconcile(settled)
                finally:
                    self._working = set()
                    self._on_update()

    async def _reconcile(self, changes: list[Change]) -> None:
        """Reconcile the changes of one settled moment. The notes that would take over their path's node (or
        may be copies) are decided last (`VaultSync.settle_later`): a note renamed into a new folder while a
        new note took its old name reaches the graph as a folder change and a note change, and the renamed
        note must keep its identity whichever comes first."""
        later: Later = {}
        await self._reconcile_each(_coalesce(changes), later)
        if later:
            await self._guarded(self._settle_later(later), f"{len(later)} notes decided last")

    async def _settle_later(self, later: Later) -> None:
        paths = list(later)
        try:
            self._saw(await self.sync.settle_later(later))
        except Exception:
            self.changed([(NOTE, rel) for rel in paths])  # decided with the next moment's changes instead
            raise

    async def _reconcile_each(self, changes: list[Change], later: Later) -> None:
        """Reconcile a moment's changes so that nothing is archived before everything there has found its place:
        folders that are there now (made, moved or renamed in) first, then the notes that are there, then the
        notes decided last (`VaultSync.settle_later`: a note whose id's node sits at a path that went), then
        the notes and folders that are gone. Notes moved into a new folder carry their ids, so their nodes are
        at the new paths before their old paths are found empty, and notes moved out of a folder then removed
        are at theirs before the folder's notes are archived: none is archived (its relations closed) only to
        come back a moment later (review 17b: two notes moved into a new folder; review 18b: git writing a
        rename into a new folder as a delete and a create)."""
        folders = [rel for kind, rel in changes if kind == FOLDER]
        # Looked at off the loop, and only when the moment holds more than one change (not on every edit).
        asked = [rel for kind, rel in changes if kind == NOTE] if len(changes) > 1 else []
        root = self.sync.root
        there, missing = (
            await asyncio.to_thread(
                lambda: (
                    {r for r in folders if (root / r).is_dir()},
                    {r for r in asked if not os.path.lexists(root / r)},
                )
            )
            if folders or asked
            else (set(), set())
        )
        arriving = [change for change in changes if change[0] == FOLDER and change[1] in there]
        leaving = [change for change in changes if change[0] == FOLDER and change[1] not in there]
        gone = [change for change in changes if change[0] == NOTE and change[1] in missing]
        others = [change for change in changes if change[0] != FOLDER and change not in gone]
        if not await self._one_by_one(arriving, later, then=others + gone + leaving):
            return
        if not await self._in_turn(others, later, then=gone + leaving):
            return
        if later and gone:
            await self._guarded(self._settle_later(later), f"{len(later)} notes decided last")
            later.clear()
        if await self._in_turn(gone, later, then=leaving):
            await self._one_by_one(leaving, later, then=[])

    async def _in_turn(self, changes: list[Change], later: Later, then: list[Change]) -> bool:
        """`_one_by_one`, except that BURST or more notes are read and applied in batches, as a full pass does,
        not one transaction each."""
        notes = [
            rel
            for kind, rel in changes
            if kind == NOTE and classify(rel) == "note" and (kind, rel) not in self._alone
        ]
        if len(notes) >= BURST:
            done = await self._guarded(self._sync_notes(notes, later), f"{len(notes)} notes")
            self._settled([(NOTE, rel) for rel in notes], done)
            self._on_update()
            batched = set(notes)
            changes = [change for change in changes if change[0] != NOTE or change[1] not in batched]
        return await self._one_by_one(changes, later, then)

    async def _one_by_one(self, changes: list[Change], later: Later, then: list[Change]) -> bool:
        """Reconcile `changes` one at a time; False when a full pass was requested meanwhile: it covers them
        and the changes `then` still to do, as changes the watcher reported (a note among them that is gone is
        archived, however many went), so they go back in the queue."""
        for index, (kind, rel) in enumerate(changes):
            if self._pass_wanted:
                self.changed(changes[index:] + then)
                return False
            if kind == NOTE:
                done = await self._guarded(self._sync_note(rel, later), rel)
            else:
                done = await self._guarded(self._sync_folder(rel, later), f"folder {rel}")
            self._settled([(kind, rel)], done)
            self._on_update()
        return True

    def _settled(self, changes: list[Change], done: bool) -> None:
        """After a job: forget the failures of its changes, or try them again later (`RETRY_FIRST`); after
        RETRIES failures a change is left to its note's next edit or the safety rescan."""
        for change in changes:
            if (earlier := self._retries.pop(change, None)) is not None:
                earlier.cancel()
            if done:
                self._failures.pop(change, None)
                self._alone.discard(change)
                continue
            failures = self._failures[change] = self._failures.get(change, 0) + 1
            if failures > RETRIES and self.store_trouble is None:
                self._failures.pop(change, None)
                self._alone.discard(change)
                log.error(
                    "gave up reconciling %s after %d attempts; it is tried again when it changes or at the "
                    "next full reconcile",
                    change[1],
                    failures,
                )
                continue
            if len(changes) > 1:
                self._alone.add(change)

            def again(change: Change = change) -> None:
                self._retries.pop(change, None)
                self.changed([change])

            self._retries[change] = asyncio.get_running_loop().call_later(_backoff(failures), again)

    def _forget_retries(self) -> None:
        for handle in self._retries.values():
            handle.cancel()
        self._retries.clear()
        self._failures.clear()
        self._alone.clear()

    def _retry_pass(self) -> None:
        """A full pass failed: it is requested again after a while (`RETRY_FIRST`), pending meanwhile, at most
        RETRIES times (then the periodic rescan is the next)."""
        failures = self._failures[None] = self._failures.get(None, 0) + 1
        if self._pass_retry is not None:
            self._pass_retry.cancel()
            self._pass_retry = None
        if failures > RETRIES and self.store_trouble is None:
            self._failures.pop(None, None)
            log.error(
                "gave up the full reconcile after %d attempts; the periodic rescan tries again", failures
            )
            return
        self._pass_left = max(self._pass_left, 1)
        self._pass_retry = asyncio.get_running_loop().call_later(
            _backoff(failures), self.request_full_pass, "retrying a full pass that failed"
        )

    async def _sync_notes(self, rels: list[str], later: Later) -> None:
        report = await self.sync.sync_paths(rels, later=later)
        self._saw(report)
        log.debug("%d notes reconciled together: %d errors", len(rels), len(report.errors))

    async def _sync_note(self, rel: str, later: Later) -> None:
        outcome = await self.sync.sync_path(rel, later=later)
        self._saw(outcome)
        log.debug("%s: %s", rel, outcome.action)
        if classify(rel) == "conflict":  # listed for the person while it is there (engrama_status)
            await self.sync.note_conflict_copy(rel)

    async def _sync_folder(self, rel: str, later: Later) -> None:
        """Reconcile everything under a folder that appeared, vanished, or was renamed.

        Only a folder that is really gone archives the notes the graph knew in it (each one checked again by
        `VaultSync._archive`): a folder that is there but cannot be listed, or a vault root that went away
        (an unplugged drive), leaves them as they were."""
        seen = await asyncio.to_thread(presence, self.sync.root, rel, folder=True)
        if seen.state == "there":
            try:
                self._saw(await self.sync.sync_vault(folder=rel, later=later))
                return
            except VaultError as exc:  # gone again since the look, or it cannot be listed after all
                seen = await asyncio.to_thread(presence, self.sync.root, rel, folder=True)
                if seen.state == "there":
                    seen = Presence("unseen", str(exc))
        if seen.state == "unseen":
            log.warning("the notes in folder %s are left as they were: %s", rel, seen.reason)
            return
        known = await self.sync.graph.file_states()
        for path in sorted(p for p in known if _under(rel, p)):
            self._saw(await self.sync.sync_path(path, later=later))

    async def _full_pass(self) -> None:
        self._last_pass = time.monotonic()
        # What the watcher reported is archived when gone, however many went (a folder deleted while the
        # server watched is no partial view of the vault); the pass holds back only what nobody saw go.
        taken, self._reported = self._reported, set()
        reported = _Reported(taken, self._debouncer)
        self.reading_left = None  # not known until the walk is done (`_progress`)
        try:
            report = await self.sync.sync_vault(progress=self._progress, reported=reported)
        except BaseException:
            self._reported |= taken  # still reported when the pass is tried again
            raise
        finally:
            self._pass_left = 1 if self._pass_wanted else 0
            self.reading_left = 0
            self._pass_ended = time.monotonic()
        self._saw(report)
        self.full_passes += 1
        changed = report.created + report.updated + report.archived
        if not changed:  # a walk that found nothing: what polling costs (applying changes is not polling's)
            self._pass_seconds = self._pass_ended - self._last_pass
        log.log(
            logging.INFO if changed or report.errors or self.polling is None else logging.DEBUG,
            "vault reconciled: %d notes scanned, %d changed, %d errors",
            report.scanned,
            changed,
            len(report.errors),
        )

    def _saw(self, done: NoteOutcome | SyncReport) -> None:
        """Tell `on_notes_changed` when a reconcile created, archived or moved a note."""
        if isinstance(done, NoteOutcome):
            came_or_went = done.action in (CREATED, ARCHIVED) or done.moved_from is not None
        else:
            came_or_went = bool(done.created or done.archived or done.moved)
        if came_or_went:
            self._on_notes_changed()

    def _progress(self, done: int, total: int) -> None:
        # At least 1 until the pass ends: after its last batch it still decides postponed notes and archives
        # the notes that are gone.
        self._pass_left = max(total - done, 1)
        self.reading_left = max(total - done, 0)
        self._on_update()

    async def _guarded(self, job: Awaitable[None], what: str) -> bool:
        """Run one reconcile job; a failure is logged and the watcher carries on (outermost handler). False when
        it failed for a reason other than the vault's (`VaultError`: the note or folder itself, said once),
        which the caller tries again."""
        try:
            await job
        except VaultError as exc:
            log.warning("cannot sync %s: %s", what, exc)
        except StoreTrouble as exc:  # every job fails alike meanwhile: said once (again after a while)
            now = time.monotonic()
            if str(exc) != self._trouble_said or now - self._trouble_said_at >= TROUBLE_SAID_EVERY:
                log.error("the graph cannot take in changes: %s; they wait and are tried again", exc)
                self._trouble_said, self._trouble_said_at = str(exc), now
            self.store_trouble = str(exc)
            return False
        except Exception:
            log.exception("live sync of %s failed; it is tried again shortly", what)
            return False
        else:
            self.last_reconcile_at = datetime.now(UTC)
            if self.store_trouble is not None:
                log.info("the graph takes in changes again; those that waited are taken in now")
                self.store_trouble = None
                self._try_again_now()
        return True

    def _try_again_now(self) -> None:
        """The store takes writes again: every change waiting for its next attempt (and a full pass) is tried
        now rather than when its timer comes, up to a minute later."""
        waiting = list(self._retries)
        for change in waiting:
            self._retries.pop(change).cancel()
        if waiting:
            self.changed(waiting)
        if self._pass_retry is not None:
            self._pass_retry.cancel()
            self._pass_retry = None
            self.request_full_pass("the database takes writes again")


def _backoff(failures: int) -> float:
    """Seconds before the next attempt after `failures` failures in a row: RETRY_FIRST, doubling to RETRY_LAST."""
    return min(RETRY_FIRST * 2 ** (failures - 1), RETRY_LAST)


def _coalesce(changes: list[Change]) -> list[Change]:
    """Drop changes that a folder change in the same batch covers (its notes and sub-folders)."""
    folders = {rel for kind, rel in changes if kind == FOLDER}
    if not folders:
        return changes
    return [(kind, rel) for kind, rel in changes if not _has_ancestor(rel, folders)]


def _has_ancestor(rel: str, folders: set[str]) -> bool:
    parts = rel.split("/")
    return any("/".join(parts[:i]) in folders for i in range(1, len(parts)))


def _under(folder: str, rel: str) -> bool:
    return rel.startswith(folder + "/")


class _Reported(Container[str]):
    """The paths the watcher reported, as a full pass asks at its end: those it took over when it began
    (`taken`), and those whose events arrived while it ran (still `pending`: a folder deleted as the pass
    starts reports its last notes a moment later)."""

    def __init__(self, taken: set[str], pending: Debouncer[Change]) -> None:
        self._taken = taken
        self._pending = pending

    def __contains__(self, rel: object) -> bool:
        return isinstance(rel, str) and (
            rel in self._taken or (NOTE, rel) in self._pending or (FOLDER, rel) in self._pending
        )
