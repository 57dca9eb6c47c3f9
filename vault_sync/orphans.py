"""Watching the files a swap replaced, so an editor's late write into one of them is not lost.

`os.replace` gives a note a new inode. An editor that opened the old one just before (a save in place: open,
truncate, write) still writes into it, and those bytes land in a file no name points to: the person's text is
gone the moment the editor closes it. The writer's quiet rule keeps tool edits away from notes being saved, but
the re-read that guards a swap and the swap itself are two system calls, and a save can start between them.

So on POSIX the writer keeps the replaced file open for a while after a swap (`watch`): after every swap where
the system cannot tell whether a program has the file open for writing, and on Linux only when one has (then
the file also keeps its temp name until the watch ends, so a crash leaves the save on disk: `leftovers`). Its
bytes stay readable through that descriptor however it was unlinked. A background thread looks at each one every
`POLL` seconds; when one changed since the swap (an editor wrote into it) and has then been still for
`STILL`, its bytes go to `recovered` (the writer puts them back into the note, see `writer._Recovery`). A
file nobody wrote into is let go after `WATCH` seconds, one still being written is kept up to `LONGEST`. A
put-back is provisional: the file is watched `WATCH` seconds more, and when the editor writes more into it
(it had paused in the middle of its save), the whole of it is put back again over the first part.

- The descriptor is closed only once `recovered` says the bytes are stored somewhere (the note, or a conflict
  copy); a failure (the note's folder renamed that instant, a full disk) is tried again `RETRY` seconds later,
  up to `ATTEMPTS` times, and the process's last look (`settle_all`, at exit) tries once more.
- Bytes still being written when the watch must end (the process exits, or `LONGEST` passed) are handed over
  as unfinished: the writer keeps them as a conflict copy and never puts a half-written save over the note.
- At most `MAX_WATCHED` descriptors are held, a share of the process's limit on open files: past it, the
  oldest files nothing was written into are let go at once, in `watch` (a first sync swaps thousands of notes
  faster than the thread looks).

Windows cannot replace a file that is open, and there a replaced file's name keeps pointing to the editor's
handle until it closes; nothing is watched there.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

POLL = 0.05
STILL = 0.3  # an editor's write is taken as finished once the file has been still this long
WATCH = 3.0  # how long a replaced file is watched when nothing writes into it (the sync's settle window)
LONGEST = 30.0  # however long an editor keeps writing into it
RETRY = 1.0  # seconds between attempts to store recovered bytes that could not be stored
ATTEMPTS = 10
SUPPORTED = os.name == "posix"


def _max_watched() -> int:
    """Descriptors held at once at most: an eighth of the process's limit on open files, at most 256 (macOS
    gives apps 256 in all), so the database, the vault's reads and the client's pipes never run short."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 32
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 256
    return max(4, min(256, soft // 8))


MAX_WATCHED = _max_watched()


@dataclass(eq=False)  # compared by identity: the watcher removes finished items from its list
class _Watched:
    fd: int
    rel: str
    state: tuple[int, int]  # (size, mtime_ns) as last looked at
    recovered: Callable[[bytes, bool], bool]  # (bytes, finished) -> stored somewhere
    done: Callable[[], None] | None
    whole: bool  # a complete save (one a rename put in place): finished as it is, even empty
    until: float  # let go by then when nothing was written into it
    stop_by: float  # let go by then in any case (after one last look)
    changed_at: float | None = None
    failures: int = 0
    retry_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[_Watched] = []
        self._thread: threading.Thread | None = None
        self._closing = False  # the process is exiting: nothing new is watched

    def watch(
        self,
        fd: int,
        rel: str,
        seen: tuple[int, int],
        recovered: Callable[[bytes, bool], bool],
        done: Callable[[], None] | None = None,
        *,
        whole: bool = False,
    ) -> None:
        """Own `fd` (the file a swap just replaced at `rel`, read at `seen` before the swap) from now on.

        `recovered(data, finished)` gets what was written into it and says whether it stored it somewhere;
        `finished` is False when the writing had not ended (see the module's docstring). `done` is called
        once the file is let go, whichever way. `whole`: the file is a complete save as it stands."""
        now = time.monotonic()
        item = _Watched(fd, rel, seen, recovered, done, whole, now + WATCH, now + LONGEST)
        with self._lock:
            closing = self._closing
            if not closing:
                self._items.append(item)
                oldest = _oldest_untouched(self._items, len(self._items) - MAX_WATCHED)
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="engrama-orphans", daemon=True)
                    self._thread.start()
        if closing:  # the process is exiting
            os.close(fd)
            _finished(item)
            return
        let_go = [old for old in oldest if self._let_go_if_untouched(old)]
        if let_go:
            with self._lock:
                gone = {id(old) for old in let_go}
                self._items = [old for old in self._items if id(old) not in gone]
            for old in let_go:
                _finished(old)

    def _let_go_if_untouched(self, item: _Watched) -> bool:
        """Close `item` now if nothing was written into it (one last look); False when it was, or when the
        watcher's thread is looking at it (the thread then decides)."""
        if not item.lock.acquire(blocking=False):
            return False
        try:
            state = self._state(item)
            if state is None:
                return True
            if state != item.state:
                return False
            self._close(item)
            return True
        finally:
            item.lock.release()

    def pending(self) -> int:
        with self._lock:
            return len(self._items)

    def settle_all(self) -> None:
        """One last look at every watched file, recovering what was written into them (process exit)."""
        with self._lock:
            items, self._items = self._items, []
            self._closing = True
        for item in items:
            self._look(item, time.monotonic(), final=True)

    def _run(self) -> None:
        while True:
            time.sleep(POLL)
            if not self._look_at_all():
                return

    def _look_at_all(self) -> bool:
        """One look at every watched file; False when none is left (the thread ends). Its own frame, so that
        nothing of a file let go stays referenced while the thread sleeps."""
        with self._lock:
            items = list(self._items)
            if not items:
                self._thread = None
                return False
        now = time.monotonic()
        over = {id(item) for item in items if self._look(item, now)}
        if over:
            with self._lock:
                self._items = [item for item in self._items if id(item) not in over]
        return True

    def _look(self, item: _Watched, now: float, final: bool = False) -> bool:
        """Look at one watched file; True when it is done with (recovered or let go, descriptor closed)."""
        with item.lock:
            finished = self._look_locked(item, now, final)
        if finished:
            _finished(item)
        return finished

    def _state(self, item: _Watched) -> tuple[int, int] | None:
        """The watched file's (size, mtime_ns); None when it is closed (or can no longer be looked at)."""
        if item.fd < 0:
            return None
        try:
            st = os.fstat(item.fd)
        except OSError:
            self._close(item)
            return None
        return st.st_size, st.st_mtime_ns

    def _look_locked(self, item: _Watched, now: float, final: bool) -> bool:
        state = self._state(item)
        if state is None:
            return True
        if state != item.state:
            item.state, item.changed_at = state, now
        if item.changed_at is not None:  # an editor wrote into it after engrama had read it for the swap
            # Empty: truncated by a save in place whose text has not come yet; it is waited for (to `stop_by`).
            finished = item.whole or (state[0] > 0 and now - item.changed_at >= STILL)
            if now < item.retry_at and not final:
                return False
            if final or finished or now >= item.stop_by:
                return self._recover(item, finished, now, final)
            return False
        if final or now >= item.until:
            self._close(item)
            return True
        return False

    def _recover(self, item: _Watched, finished: bool, now: float, final: bool) -> bool:
        """Hand the file's bytes to `recovered`; True when done with it (stored, or given up on)."""
        try:
            data = _read_all(item.fd)
        except OSError as exc:
            log.error(
                "%s: an editor wrote into the file engrama had replaced, and it cannot be read back: %s",
                item.rel,
                exc,
            )
            self._close(item)
            return True
        if item.failures == 0:
            log.warning(
                "%s: an editor saved into the file engrama had just replaced (%d bytes%s); putting them back",
                item.rel,
                len(data),
                "" if finished else ", still being written",
            )
        try:
            stored = item.recovered(data, finished)
        except Exception:  # the thread must go on watching the others; the error is the person's to see
            log.exception(
                "%s: the bytes an editor saved into the replaced file could not be stored", item.rel
            )
            stored = False
        if stored:
            if finished and not final and not item.whole and now < item.stop_by:
                # A put-back is provisional: an editor that pauses in the middle of its save (a loaded machine, a
                # large note written in parts) writes the rest into this same file. It is watched WATCH seconds
                # more, and what comes is put back again, whole, over the part put back now.
                item.changed_at, item.failures, item.retry_at = None, 0, 0.0
                item.until = min(now + WATCH, item.stop_by)
                return False
            self._close(item)
            return True
        item.failures += 1
        if final or item.failures >= ATTEMPTS:
            log.error(
                "%s: the %d bytes an editor saved into the file engrama had replaced could not be stored in "
                "the vault (%d attempts); they are kept outside it, in %s",
                item.rel,
                len(data),
                item.failures,
                _outside(item.rel, data),
            )
            self._close(item)
            return True
        item.retry_at = now + RETRY  # the descriptor stays open: its bytes are still there to try again
        return False

    @staticmethod
    def _close(item: _Watched) -> None:
        if item.fd >= 0:
            try:
                os.close(item.fd)
            finally:
                item.fd = -1


def _oldest_untouched(items: list[_Watched], count: int) -> list[_Watched]:
    """The first `count` of `items` nothing was seen written into (the newest, just added, excluded); a walk
    that stops there, since this runs on every write of a sync."""
    found: list[_Watched] = []
    if count <= 0:
        return found
    for item in itertools.islice(items, len(items) - 1):
        if item.changed_at is None:
            found.append(item)
            if len(found) == count:
                break
    return found


def _finished(item: _Watched) -> None:
    with item.lock:
        done, item.done = item.done, None  # once, whoever finished it
    if done is not None:
        try:
            done()
        except Exception:
            log.exception("%s: forgetting a watched file failed", item.rel)


def _outside(rel: str, data: bytes) -> str:
    """The last resort: `data` in a new file of the system's temp folder (never overwriting one); its path."""
    stem = os.path.splitext(os.path.basename(rel))[0] or "note"
    try:
        fd, path = tempfile.mkstemp(prefix=f"engrama-recovered {stem} ", suffix=".md")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    except OSError as exc:
        return f"nowhere ({exc.strerror})"
    return path


def _read_all(fd: int) -> bytes:
    parts, offset = [], 0
    while True:
        part = os.pread(fd, 1 << 20, offset)
        if not part:
            return b"".join(parts)
        parts.append(part)
        offset += len(part)


WATCHER = _Watcher()
atexit.register(WATCHER.settle_all)
