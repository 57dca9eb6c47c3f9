"""The safe writer: every change engrama makes to a file in the vault goes through here (DESIGN section 4).

- Reads pair the bytes with size and mtime taken from the same open file, before and after reading, so a
  `FileState` always describes exactly the bytes returned.
- Edits are compare-and-swap. The edit is a pure `bytes -> bytes` function; its result goes to a unique temp
  file in the note's folder (hidden, so Obsidian and the watcher skip it), is fsynced, and replaces the note
  with `os.replace` only if the note still holds the bytes the edit was based on. Otherwise the edit runs
  again on the new bytes: re-running a pure edit *is* the re-base.
- New notes appear atomically through `os.link` from the temp file, which fails rather than clobber a file
  that appeared meanwhile. Nothing is ever deleted: `move_to_trash` moves a note into Obsidian's `.trash/`,
  and `restore_from_trash` moves one back (both without ever overwriting a file).

Symlinks: a note path that is a symlink to a file inside the vault is edited *through* the link — the real
file is replaced and the link stays a link (replacing the link path would silently turn the person's link into
a detached copy). `WriteResult.path` and `state.path` then name the real file, because that is where the
watcher sees the change. Links whose real path lies outside the vault are refused (`PathOutsideVault`).

Known limits: `os.replace` gives the note a new inode, so other hard links to it keep the old bytes, and
extended attributes / ACLs are not carried over (permission bits are; the owner too, where we may set it).
The re-read that guards the swap and the swap itself are two system calls; within this process they happen
under one lock (`_SWAP`), so two tool calls editing one note at once (each write runs in a thread) re-base on
each other instead of the second replacing the first. Another program can still act between them:
- an editor saving in place (open, truncate, write) then writes into the file the swap replaced. On POSIX that
  file is kept open and watched for a few seconds (`orphans`). On Linux only while some program has it open
  for writing (a lease tells: `open_for_writing`; none may open it afterwards, its name is gone), and then
  it keeps its temp name meanwhile, so a crash leaves the editor's save on disk for the next start to keep;
- a program saving by rename puts its file at the path just before the swap. On Linux and macOS the swap
  exchanges the two names (`renameat2(RENAME_EXCHANGE)`, `renamex_np(RENAME_SWAP)`), so the file it displaced
  is at hand: it is moved at once to a conflict-copy name beside the note (so a crash loses nothing) and
  watched as a complete save; elsewhere (Windows, or where a filesystem or sandbox refuses the exchange) that
  save is lost, a window of microseconds.
What an editor wrote is then put back into the note with the edit applied again (`_Recovery.recover`), or,
when the note changed otherwise meanwhile, into a conflict copy beside it (at the vault's top when its folder
is gone). A stop by signal or a normal exit takes a last look first. A process killed (SIGKILL, power loss)
leaves its temp files; each one's name carries the checksums of what engrama knows it may hold, and the next
start removes only those and keeps anything else beside its note (`leftovers`). Where the system cannot tell
whether a replaced file is open for writing (macOS, network filesystems), it is watched without a name, and a
kill while an editor's save sits in it still loses that save.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import dataclasses
import errno
import functools
import itertools
import logging
import math
import os
import re
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from vault_sync import orphans
from vault_sync.checksum import sha256_hex
from vault_sync.errors import (
    ConcurrentEdit,
    NoteInConflict,
    NoteReadOnly,
    NoteUnwritable,
    PathOutsideVault,
    UnreadableNote,
    VaultError,
)
from vault_sync.identify import read_id
from vault_sync.model import FileState
from vault_sync.paths import TRASH_FOLDER, classify, is_inside, make_temp_name, resolve_in_vault, to_rel
from vault_sync.reapply import reapply
from vault_sync.templates import rules as template_rules

try:
    import fcntl
except ImportError:  # Windows: no leases (`open_for_writing`)
    fcntl = None

log = logging.getLogger(__name__)

T = TypeVar("T")

# Held from the re-read that guards a swap to the replace: this process's edits of a note never interleave
# there (the step takes a read of one note and a rename; edits of other notes wait that long at most). Putting
# back an editor's text (`_Recovery.recover`) holds it throughout, so no edit lands between its re-read and its
# swap.
_SWAP = threading.RLock()


class _NoteTurn:
    """One note's turn for this process's edits (`_turn`): held from the first read to the swap."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


_TURNS: weakref.WeakValueDictionary[Path, _NoteTurn] = weakref.WeakValueDictionary()
_TURNS_LOCK = threading.Lock()
# What this process's last write left in each note it wrote (size, mtime): a note still exactly so has not
# been saved by anyone since, so a tool's next edit need not wait out the quiet window its own write opened.
_OURS: collections.OrderedDict[str, tuple[int, int]] = collections.OrderedDict()
_OURS_KEPT = 256  # the notes written last; an older one's next edit just waits for quiet, as any other's


@contextlib.contextmanager
def _turn(real: Path) -> Iterator[None]:
    """This process's edits of one note take turns: each reads the note after the one before it wrote, so
    tool calls on one note at once (each write runs in a thread) never make each other start over until they
    give up with `ConcurrentEdit`."""
    with _TURNS_LOCK:
        turn = _TURNS.get(real)
        if turn is None:
            turn = _TURNS[real] = _NoteTurn()
    with turn.lock:
        yield


def _wrote(real: Path, st: os.stat_result) -> None:
    seen_here(st)
    key = str(real)
    with _TURNS_LOCK:
        _OURS[key] = (st.st_size, st.st_mtime_ns)
        _OURS.move_to_end(key)
        while len(_OURS) > _OURS_KEPT:
            _OURS.popitem(last=False)


def _as_we_wrote(real: Path, st: os.stat_result) -> bool:
    with _TURNS_LOCK:
        return _OURS.get(str(real)) == (st.st_size, st.st_mtime_ns)


MAX_NOTE_BYTES = (
    10 * 1024 * 1024
)  # a note this large is an attachment or an accident: reported, never read whole
_READ_ATTEMPTS = 3
# Writes under way per vault folder, and the folders whose writer is letting the vault go (`let_go`): a server
# that stops lets go of its lease only once its writes are done or have given up, so two processes never write
# one vault at once (review 20c: a call whose client went away wrote its note 4 s after the lease had moved).
_ACTIVE_LOCK = threading.Lock()
_ACTIVE: dict[str, int] = {}
_LETTING_GO: set[str] = set()
_OPEN_READ = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)
_OPEN_EXCL = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# Filesystems without hard links (FAT, some network and cloud mounts) answer os.link with one of these.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS}


# A note whose modification time is older than the moment its file was written here (its change time; on
# Windows its creation time) by more than ARRIVAL_MARGIN was not saved here just now: a sync client
# (Syncthing, Dropbox, iCloud, Obsidian Sync), `cp -p` or `rsync -t` brought it with the time of a save made
# elsewhere, where the person may still be typing. An id line written here into that copy could win over their
# next save there (a sync tool keeping the newer file loses the save; Syncthing sets it aside as a conflict
# copy). So a note that arrived waits until its content is ARRIVED_QUIET seconds old: by then an engrama-vault
# on the machine where it is typed (which writes after its own settle window) has written the line and the
# sync tool has brought it here, and there is nothing left to write. A tool's write into it waits as long
# (`Quiet.brought`). A local save sets both times together.
ARRIVAL_MARGIN = 1.0
# The settle window there (3 s) plus a sync tool's delay (Syncthing gathers changes for 10 s before it sends;
# Dropbox and Obsidian Sync take a few seconds), twice over.
ARRIVED_QUIET = 30.0


# A rename, a chmod or a new hard link also moves the change time on while the modification time stays: a note
# renamed a moment after its save would look arrived. So the versions this process has seen saved here (read
# or written while their two times agreed) are remembered by (device, inode, size, mtime), which a rename, a
# chmod or a link keeps and a save, however it is made, changes; such a version never counts as arrived.
_SEEN_HERE: collections.OrderedDict[tuple[int, int, int, int], None] = collections.OrderedDict()
_SEEN_HERE_KEPT = 4096  # the versions read or written last: a rename comes seconds after the save it follows
_SEEN_HERE_LOCK = threading.Lock()


def _version(stat: os.stat_result) -> tuple[int, int, int, int]:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _times_say_arrived(stat: os.stat_result) -> bool:
    written_ns = getattr(stat, "st_birthtime_ns", stat.st_ctime_ns) if os.name == "nt" else stat.st_ctime_ns
    return written_ns - stat.st_mtime_ns > ARRIVAL_MARGIN * 1e9


def seen_here(stat: os.stat_result) -> None:
    """Remember the version of a file just read or written, when its times say it was saved here."""
    if _SEEN_HERE_KEPT <= 0 or _times_say_arrived(stat):
        return
    key = _version(stat)
    with _SEEN_HERE_LOCK:
        _SEEN_HERE[key] = None
        _SEEN_HERE.move_to_end(key)
        while len(_SEEN_HERE) > _SEEN_HERE_KEPT:
            _SEEN_HERE.popitem(last=False)


def remember_no_saves() -> None:
    """For a reader process (a large sync's helpers): nothing there writes into notes or hears of renames, so
    the versions it reads are not remembered (the memory would be the process tree's, for nothing)."""
    global _SEEN_HERE_KEPT
    _SEEN_HERE_KEPT = 0


def arrived(stat: os.stat_result) -> bool:
    """True when the file's bytes were written here well after its modification time (see ARRIVAL_MARGIN),
    unless this process saw that very version saved here before (a rename or chmod since moved its change
    time on)."""
    if not _times_say_arrived(stat):
        return False
    with _SEEN_HERE_LOCK:
        return _version(stat) not in _SEEN_HERE


# --- a tool's write kept against an editor's older copy ---------------------------------------------------------
# The quiet rule sees only saves on disk. The person may have typed in the moment before a tool's write without
# their editor having saved it yet (Obsidian saves ~2 s after a keystroke): the editor then saves its buffer,
# which never held the tool's change, over the note, and what the assistant was told was written is gone
# (review 22g). So for a moment after each such write (the settle window and KEEP_EXTRA), a save of the note
# that lacks the change (the write's pure, repeatable `edit` would change it) has the change written again, on
# top of the person's text, once the note is quiet (`VaultSync`). A few times at most: an editor that never
# reloads would otherwise be raced for ever.
KEEP_EXTRA = 2.0
KEEP_TIMES = 3


@dataclass
class _Kept:
    rel: str
    edit: Callable[[bytes], bytes]
    note_id: str | None  # the id line the note held as written: a note replaced by another is left alone
    until: float  # time.monotonic()
    base: collections.Counter[bytes]  # the note's lines before the write
    written: collections.Counter[bytes]  # and after it
    times: int = 0
    first: bytes = b""  # the note's bytes before the write (the first of writes made one on another)
    last: bytes = b""  # and after it (the last of them)

    def saved_over(self, data: bytes) -> bool:
        """Whether `data` is an editor's older copy saved over the write: it holds none of the lines the write
        added and every line the write took out. A save made on top of the write (the person changing a value
        the tool set, a moment later) holds the write's other lines, or lacks the value it replaced, and is
        theirs to keep."""
        now = collections.Counter(data.splitlines())
        added, removed = self.written - self.base, self.base - self.written
        return all(now[line] < self.written[line] for line in added) and all(
            now[line] >= self.base[line] for line in removed
        )


_KEPT: dict[str, _Kept] = {}
_KEPT_LOCK = threading.Lock()


@dataclass(frozen=True)
class KeptWrite:
    """What a process records of a tool write it keeps, so that a process taking the vault over after it died
    can keep it too (`server.store.kept_sql`, `server.live`): an editor's older copy saved over the write a
    moment after the holder was killed would otherwise win, and the assistant was told it was written."""

    rel: str
    note_id: str | None  # the id line the note held as written
    base: bytes  # the note's bytes before the write
    written: bytes  # and after it
    written_at: float  # time.time() of the write
    until: float  # time.time() until which it is kept


_RECORDERS: dict[str, Callable[[KeptWrite], None]] = {}  # vault root -> where its kept writes are recorded


def record_kept(root: Path, recorder: Callable[[KeptWrite], None] | None) -> None:
    """Record the tool writes kept in `root` with `recorder` from now on (None: no longer). The lease holder
    records them in the database; the recorder is called on the writing thread, before the write returns."""
    key = os.path.abspath(root)
    with _KEPT_LOCK:
        if recorder is None:
            _RECORDERS.pop(key, None)
        else:
            _RECORDERS[key] = recorder


def _keep(
    root: Path,
    real: Path,
    rel: str,
    edit: Callable[[bytes], bytes],
    base: bytes,
    written: bytes,
    settle: float,
) -> None:
    now = time.monotonic()
    note_id = read_id(written)
    first, chained = base, edit
    with _KEPT_LOCK:
        kept = _KEPT.get(str(real))
        live = kept is not None and kept.until > now
        times = kept.times if kept is not None and live else 0
        if kept is not None and live and kept.last == base:
            # Made on the note exactly as the kept write before it left it (two remembers a moment apart): both
            # are kept, from the bytes before the first (review 23k: an older copy saved over both had only the
            # second made again, the first lost).
            first, chained = kept.first, _chain(kept.edit, edit)

        lines = collections.Counter(first.splitlines()), collections.Counter(written.splitlines())
        _KEPT[str(real)] = _Kept(
            rel, chained, note_id, now + settle + KEEP_EXTRA, *lines, times, first=first, last=written
        )
        for key in [k for k, v in _KEPT.items() if v.until <= now]:
            del _KEPT[key]
        recorder = _RECORDERS.get(os.path.abspath(root))
    if recorder is not None:
        wall = time.time()
        recorder(KeptWrite(rel, note_id, first, written, wall, wall + settle + KEEP_EXTRA))


def _chain(earlier: Callable[[bytes], bytes], later: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    """The two pure edits one after the other."""
    return lambda data: later(earlier(data))


def recorded_edit(kept: KeptWrite) -> Callable[[bytes], bytes]:
    """The edit of a write another process made and recorded (`KeptWrite`): its change made on the text at
    hand (`reapply`) when that text is an older copy saved over it (`_Kept.saved_over`), else that text
    unchanged (it holds the write already, or the person changed the lines it touched). Repeatable, as a
    tool's own edit is: made twice, it changes nothing more."""
    lacking = _Kept(kept.rel, lambda data: data, kept.note_id, 0.0, *_lines_of(kept))

    def edit(data: bytes) -> bytes:
        if not lacking.saved_over(data):
            return data
        return reapply(kept.base, kept.written, data) or data

    return edit


def _lines_of(kept: KeptWrite) -> tuple[collections.Counter[bytes], collections.Counter[bytes]]:
    return collections.Counter(kept.base.splitlines()), collections.Counter(kept.written.splitlines())


def keep_recorded(root: Path, kept: KeptWrite, now: float) -> Callable[[bytes], bytes]:
    """Keep, in this process, a write another process made and recorded, for what is left of its time (at
    `now`, time.time()); returns its edit (`recorded_edit`)."""
    edit = recorded_edit(kept)
    left = kept.until - now
    if left > 0:
        try:
            real = Path(os.path.realpath(resolve_in_vault(root, kept.rel)))
        except VaultError:
            return edit
        with _KEPT_LOCK:
            _KEPT[str(real)] = _Kept(
                kept.rel,
                edit,
                kept.note_id,
                time.monotonic() + left,
                *_lines_of(kept),
                first=kept.base,
                last=kept.written,
            )
    return edit


def saved_over_since(root: Path, kept: KeptWrite) -> bool:
    """Whether the note of a write another process recorded is, now, an editor's older copy saved over that
    write while the write was kept: its edit (`recorded_edit`) would change it. A save made after that was
    never judged by the process that made the write: it is the person's, who may have taken the write's lines
    out on purpose (review 23g: a line deleted seconds after the write came back at the next start)."""
    try:
        real = Path(os.path.realpath(resolve_in_vault(root, kept.rel)))
        data, st = _read_stable(real, kept.rel)
    except (OSError, VaultError):
        return False
    if read_id(data) != kept.note_id or st.st_mtime > kept.until:
        return False
    return recorded_edit(kept)(data) != data


def kept_paths() -> set[str]:
    """The vault paths of the tool writes still kept (a cheap test before reading anything again)."""
    now = time.monotonic()
    with _KEPT_LOCK:
        return {kept.rel for kept in _KEPT.values() if kept.until > now}


def kept_edit(root: Path, rel: str) -> Callable[[bytes], bytes] | None:
    """The edit of the tool's write into the note at `rel` when the note, as it is now, lacks it though that
    write was made a moment ago (an editor saved its older copy over it): to be made again, once quiet. Counts
    the time; None after KEEP_TIMES, when the write is no longer kept, or when the note is another note now."""
    try:
        real = Path(os.path.realpath(resolve_in_vault(root, rel)))
    except VaultError:
        return None
    with _KEPT_LOCK:
        kept = _KEPT.get(str(real))
        if kept is None or kept.until <= time.monotonic():
            return None
    try:
        data, _ = _read_stable(real, rel)
    except (OSError, VaultError):
        return None
    if read_id(data) != kept.note_id or not kept.saved_over(data) or kept.edit(data) == data:
        return None
    with _KEPT_LOCK:
        kept.times += 1
        if kept.times > KEEP_TIMES:
            _KEPT.pop(str(real), None)
            log.warning(
                "%s: an editor saved an older copy over engrama's write %d times; it is not written again",
                rel,
                KEEP_TIMES,
            )
            return None
    return kept.edit


class NoteBusy(VaultError):
    """The note is being saved or typed into right now; nothing was written (try again in a few seconds)."""


class WriteCancelled(VaultError):
    """The call that asked for the write was cancelled (or timed out) while it waited: nothing was written."""


@dataclass(frozen=True)
class Quiet:
    """When a tool may write into a note the person may be editing (DESIGN section 2: never race the editor).

    An editor saving in place truncates the file and writes it a moment later; replacing the file in between
    sends its write to an unlinked inode. So an edit waits until the note has not changed for `settle`
    seconds, for at most `wait` seconds, and otherwise gives up with `NoteBusy`. An empty note is written
    only once the graph has read it empty too (`seen`: size and mtime), the person having emptied it.

    `brought` (seconds; 0: no such wait) is for a note holding a save made elsewhere (`arrived`): the edit waits
    until that save is `brought` seconds old, whatever the graph has read, since the person may still be typing
    on the computer it came from; it gives up at once when that is further off than `wait`. Tool writes ask
    for ARRIVED_QUIET; the id-line writer leaves it at 0, having judged that already (`readers.NoteRead.window`:
    a vault copied with its times gets its lines at the first sync)."""

    settle: float
    seen: tuple[int, int] | None = None
    wait: float = 0.0
    brought: float = 0.0
    # A tool's write (not an id line): kept against an editor's older copy for a moment after it is made
    # (`kept_edit`).
    keep: bool = False
    # Set when the call that asked for the write is cancelled while it waits (`edit_note_aside`): the write is
    # then not made, rather than landing later on top of what the person or a later call wrote (review 23h).
    cancelled: threading.Event | None = dataclasses.field(default=None, compare=False)


class NoteExists(VaultError):
    """`create_note` found a file (or symlink) already at the path; nothing was written."""


class WriterStopping(VaultError):
    """This process is letting the vault go (it stops; `let_go`): the write was not made."""


@contextlib.contextmanager
def _writing(root: Path) -> Iterator[str]:
    """Count a write into the vault at `root` as under way (`let_go` waits for it); refuse it while this process
    is letting the vault go. Yields the key `_read_when_quiet` checks."""
    key = os.path.abspath(root)
    with _ACTIVE_LOCK:
        if key in _LETTING_GO:
            raise WriterStopping("engrama is stopping (its client went away); nothing was written")
        _ACTIVE[key] = _ACTIVE.get(key, 0) + 1
    try:
        yield key
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE[key] -= 1
            if not _ACTIVE[key]:
                del _ACTIVE[key]


def let_go(root: Path, timeout: float) -> bool:
    """Stop writing into the vault at `root` before this process gives up its lease: new writes are refused
    from now until `write_again` (a write that passed its checks before, and reaches the writer only after the
    lease went, is refused too: review 20e), writes waiting for a note to be quiet give up at once, and those
    under way are waited for (at most `timeout` seconds: a write is a few file operations). True when none was
    left under way."""
    key = os.path.abspath(root)
    with _ACTIVE_LOCK:
        _LETTING_GO.add(key)
    deadline = time.monotonic() + timeout
    while True:
        with _ACTIVE_LOCK:
            if not _ACTIVE.get(key):
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def write_again(root: Path) -> None:
    """This process holds the vault's lease (again): its writes into `root` are allowed (see `let_go`)."""
    with _ACTIVE_LOCK:
        _LETTING_GO.discard(os.path.abspath(root))


@dataclass(frozen=True)
class WriteResult:
    """What one write did."""

    path: str  # vault-relative path of the file written (a symlink's target when the note is a link)
    before_checksum: str | None  # checksum of the bytes the edit was based on; None for a new note
    state: FileState  # the bytes now on disk; record it so the watcher recognises our own write
    changed: bool  # False when the edit returned the bytes unchanged and nothing was written


def read_note(root: Path, rel: str) -> tuple[bytes, FileState]:
    """The bytes of the note at vault path `rel` and the `FileState` describing exactly those bytes.

    `state.path` is `rel` normalised. A symlink is followed only to a file inside the vault. Raises
    `FileNotFoundError` when there is no such file, `PathOutsideVault` for paths leaving the vault,
    `UnreadableNote` for non-files, permission problems and files over `MAX_NOTE_BYTES`.
    """
    path = resolve_in_vault(root, rel)
    data, st = _read_stable(Path(os.path.realpath(path)), to_rel(root, path))
    return data, _file_state(to_rel(root, path), data, st)


def edit_note(
    root: Path,
    rel: str,
    edit: Callable[[bytes], bytes],
    *,
    expected_checksum: str | None = None,
    attempts: int = 3,
    quiet: Quiet | None = None,
    check: Callable[[bytes, FileState], None] | None = None,
) -> WriteResult:
    """Apply the pure function `edit` to the note at `rel`, compare-and-swap, re-basing on concurrent changes.

    `expected_checksum` is the checksum the caller last saw; when the note has changed since, the edit simply
    runs on the current bytes. An edit returning its input writes nothing (`changed=False`). Raises
    `ConcurrentEdit` when the note keeps changing for `attempts` rounds or vanishes mid-edit,
    `FileNotFoundError` when it does not exist, and the errors of `read_note`. With `quiet`, the edit first
    waits for the note to be quiet and raises `NoteBusy` when it does not become so (see `Quiet`). `check`
    looks at the note as each attempt reads it (its bytes and their state) and raises to write nothing: a
    precondition on what the edit is based on, which, unlike `edit`, is not applied again to an editor's text
    put back later (`_Recovery`).
    """
    root = Path(root)
    real_rel, real = _edit_target(root, rel)
    asked = time.monotonic()
    with _writing(root) as vault_key, _turn(real):
        if quiet is not None:  # the wait for quiet counts from the call: a queue of calls gives up together
            quiet = dataclasses.replace(quiet, wait=max(0.0, quiet.wait - (time.monotonic() - asked)))
        for _ in range(max(attempts, 1)):
            data, st = (
                _read_stable(real, real_rel)
                if quiet is None
                else _read_when_quiet(root, real, real_rel, quiet, vault_key)
            )
            read = _file_state(real_rel, data, st)
            if check is not None:
                check(data, read)
            if in_conflict(data):
                raise NoteInConflict(
                    f"{real_rel} holds an unresolved merge conflict (lines starting <<<<<<<, ======= and "
                    ">>>>>>>, left by git or a sync tool); nothing was written into it. Resolve the conflict first: "
                    "keep the lines you want and delete the marker lines"
                )
            if not data:
                log.info("%s is empty; the edit writes it from nothing (quiet rule: %s)", real_rel, quiet)
            if expected_checksum is not None and read.checksum != expected_checksum:
                log.info("%s changed since it was last read; editing the bytes now on disk", real_rel)
                expected_checksum = None
            new = edit(data)
            if new == data:
                return WriteResult(real_rel, read.checksum, read, changed=False)
            _require_readable_size(real_rel, new)
            if quiet is not None:
                _unless_cancelled(quiet, real_rel)
            if not st.st_mode & 0o222:  # replacing it by rename would need only the folder's permission
                raise NoteReadOnly(
                    f"{real_rel} is read-only (its permissions let no one write it), so engrama does not write "
                    "into it either; nothing was written. Make it writable to let engrama write into it"
                )
            state = _swap_in(root, real, real_rel, new, read.checksum, st, edit)
            if state is not None:
                if quiet is not None and quiet.keep:
                    _keep(root, real, real_rel, edit, data, new, quiet.settle)
                return WriteResult(real_rel, read.checksum, state, changed=True)
            log.info("%s changed while engrama was editing it; re-basing the edit", real_rel)
    raise ConcurrentEdit(
        f"{real_rel} kept changing while engrama tried to edit it ({attempts} attempts); nothing was written. "
        "Try again once the note is no longer being edited or synced."
    )


# Tool writes wait for quiet (and for git) on threads of their own: on the default pool, ten writes waiting for
# a busy note held every thread, and reads and the watcher's sync waited behind them (review 22g). Made at the
# first write: a reader process (`reader_process`) imports this module and neither asyncio nor the pool.
_WRITES: Any = None


async def edit_note_aside(
    root: Path, rel: str, edit: Callable[[bytes], bytes], **options: Any
) -> WriteResult:
    """`edit_note` run on the writes' own threads, off the event loop. Cancelled while it waits for the note
    to be quiet, it writes nothing, and it returns (raises the cancellation) only once the thread has given
    up: a write its caller no longer waits for would land later, on top of what a later call wrote, while the
    entity's lock was already released (review 23h)."""
    stop = threading.Event()
    if (quiet := options.get("quiet")) is not None:
        options["quiet"] = dataclasses.replace(quiet, cancelled=stop)
    return await write_aside(functools.partial(edit_note, root, rel, edit, **options), stop)


async def trash_aside(move: Callable[[Quiet | None], T], quiet: Quiet | None) -> T:
    """`move(quiet)` (a move to the trash that waits for the note to be quiet) on the writes' own threads;
    cancelled while it waits, it moves nothing (as `edit_note_aside`; review 23j)."""
    stop = threading.Event()
    waiting = dataclasses.replace(quiet, cancelled=stop) if quiet is not None else None
    return await write_aside(functools.partial(move, waiting), stop)


async def write_aside(call: Callable[[], T], stop: threading.Event | None = None) -> T:
    """`call` (a write that may wait for a note to be quiet) run on the writes' own threads. Cancelled, it sets
    `stop` and waits for the thread to finish before the cancellation goes on."""
    import asyncio
    import concurrent.futures

    import anyio

    global _WRITES
    if _WRITES is None:
        _WRITES = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="engrama-write")
    future = asyncio.get_running_loop().run_in_executor(_WRITES, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if stop is not None:
            stop.set()
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await future
        raise


def _unless_cancelled(quiet: Quiet, rel: str) -> None:
    if quiet.cancelled is not None and quiet.cancelled.is_set():
        raise WriteCancelled(f"the call was cancelled while it waited; nothing was written into {rel}")


def create_note(root: Path, rel: str, data: bytes) -> WriteResult:
    """Create the note at vault path `rel` holding `data`, with any missing parent folders.

    The note appears whole or not at all, and never replaces anything: when a file or symlink is already
    there (even one created a moment ago) it raises `NoteExists`. Only `.md` paths outside dot-folders are
    accepted (`VaultError` otherwise).
    """
    path = resolve_in_vault(root, rel)
    rel_norm = to_rel(root, path)
    _require_note_path(root, rel_norm)
    _require_readable_size(rel_norm, data)
    _wait_for_git(root, rel_norm)
    with _writing(root):
        _make_folders(root, path.parent)
        tmp, st = _write_temp(path.parent, data, new_mode=None, sums=(sha256_hex(data),), note=path.name)
        try:
            _link_new(tmp, path, rel_norm)
        finally:
            _remove_quietly(tmp)
    # As engrama's own write left it: a tool's next call on the note (relate right after remember) need not
    # wait for quiet (review 22f). Also a version saved here: the link moves its change time on.
    _wrote(Path(os.path.realpath(path)), st)
    _fsync_folder(path.parent)
    return WriteResult(rel_norm, None, _file_state(rel_norm, data, st), changed=True)


def move_to_trash(root: Path, rel: str, *, quiet: Quiet | None = None) -> str:
    """Move the file at vault path `rel` into the vault's `.trash/` folder, as Obsidian does; return the new path.

    On a name clash the file becomes `name 1.md`, `name 2.md`, ... . The move is one rename that refuses to
    replace where the system has one (else a hard link, then removal of the old name), so nothing already in
    the trash is overwritten and nothing is lost between two steps.
    A symlink is moved as the link itself. Raises `FileNotFoundError` when there is nothing at `rel`.
    With `quiet` (a tool's move), the note is moved only once it is quiet, as a tool's edit waits
    (`NoteBusy` when it is not, in time): an editor saving the note it has open, by its path, after the move
    would make it anew there, and the entity would be back with a stale copy of it in the trash (review 23f).
    """
    source = resolve_in_vault(root, rel)
    src_rel = to_rel(root, source)
    if src_rel.split("/")[0] == TRASH_FOLDER:
        raise VaultError(f"{src_rel} is already in the trash; nothing was moved")
    if stat.S_ISDIR(os.lstat(source).st_mode):
        raise VaultError(f"{src_rel} is a folder; engrama moves only single notes to the trash")
    trash = resolve_in_vault(root, TRASH_FOLDER)
    _wait_for_git(root, src_rel, quiet=quiet)
    with _writing(root) as vault_key:
        if quiet is not None:
            _read_when_quiet(root, Path(os.path.realpath(source)), src_rel, quiet, vault_key)
            _unless_cancelled(quiet, src_rel)
        _make_folders(root, trash)
        target = _place_in_trash(source, trash)
        _fsync_folder(trash)
        _fsync_folder(source.parent)
    return to_rel(root, target)


def restore_from_trash(root: Path, trash_rel: str, rel: str, *, tries: int = 20) -> str:
    """Move the note at `trash_rel` (in `.trash/`) back to vault path `rel`; return the path it now has.

    When `rel` is taken the note becomes `Name 2.md`, `Name 3.md`, ... in the same folder (up to `tries`
    names); nothing is overwritten and nothing is unlinked before its new name exists, as in
    `move_to_trash`. Missing folders are made again. Raises `FileNotFoundError` when nothing is at
    `trash_rel`, `VaultError` when it is not in the trash or `rel` is not a note path.
    """
    source = resolve_in_vault(root, trash_rel)
    src_rel = to_rel(root, source)
    if classify(src_rel) != "trash":
        raise VaultError(f"{src_rel} is not a note in the trash; nothing was moved")
    os.lstat(source)  # FileNotFoundError when it is gone
    _wait_for_git(root, rel)
    wanted = resolve_in_vault(root, rel)
    _require_note_path(root, to_rel(root, wanted))
    stem, suffix = os.path.splitext(wanted.name)
    names = [wanted.name, *(f"{stem} {n}{suffix}" for n in range(2, tries + 1))]
    with _writing(root):
        _make_folders(root, wanted.parent)
        target = _move_to_free_name(
            source, (wanted.parent / name for name in names), to_rel(root, wanted.parent)
        )
    if target is None:
        raise VaultError(
            f"{to_rel(root, wanted.parent)}/ already holds {tries} notes named like {stem!r}; restore "
            f"{src_rel} in Obsidian instead"
        )
    _fsync_folder(target.parent)
    _fsync_folder(source.parent)
    return to_rel(root, target)


def _read_when_quiet(
    root: Path, real: Path, rel: str, quiet: Quiet, vault_key: str
) -> tuple[bytes, os.stat_result]:
    """Read the note once it is quiet: judged on the stat taken with the very bytes read, so a save that
    starts while engrama waits or reads is seen (and `_swap_in` catches one starting after the read). Gives
    up at once (`WriterStopping`) when this process lets the vault at `vault_key` go meanwhile.

    Quiet means the note has not changed for `quiet.settle` seconds, whatever the graph has read of it: the
    watcher reads every save within a fraction of a second, so "as the graph last read it" says nothing about
    whether the person is still typing (review 22a: a tool's write went in between two autosaves and the next
    one wiped it). Only a note exactly as engrama's own last write left it needs no wait. Nothing is written
    either while git rewrites the vault's files (`git_lock`): a note git has not reached yet would be replaced
    by git's version, the tool's text with it (review 22b)."""
    deadline = time.monotonic() + quiet.wait
    warned = False
    while True:
        _unless_cancelled(quiet, rel)
        if vault_key in _LETTING_GO:
            raise WriterStopping(
                f"engrama is stopping (its client went away); nothing was written into {rel}"
            )
        _wait_for_git(root, rel, deadline - time.monotonic(), quiet)
        data, st = _read_stable(real, rel)
        age = time.time() - st.st_mtime_ns / 1e9
        if 0 <= age < quiet.brought and arrived(st):
            # Brought by a sync tool from the computer where it was saved moments ago, where the person may still
            # be typing: a copy written here could win over their next save there (a sync tool keeping the
            # newer file drops it). As an id line, it is written once that save is `brought` seconds old.
            left = deadline - time.monotonic()
            if quiet.brought - age > left:
                raise NoteBusy(
                    f"{rel} holds a save made {age:.0f} s ago that reached this computer only later (a sync tool "
                    "bringing it from another computer, where the person may still be typing it); engrama wrote "
                    "nothing, so an older copy written here cannot win over their next save there. Try again in "
                    f"{math.ceil(quiet.brought - age)} s"
                )
            time.sleep(min(quiet.brought - age, 0.25))
            continue
        if st.st_size and _as_we_wrote(real, st):
            return data, st  # as our last write left it: no save has started since (an empty file may be one)
        settled = age >= quiet.settle or age < 0  # a future mtime was not set by a save on this machine
        # An empty file is what a save in place looks like half way (truncated, not yet written): an edit on it
        # would replace it and send the editor's text to an unlinked inode. So it is edited only once the
        # graph has read it empty too (the person emptied the note and left it so), whatever its mtime says.
        if settled and (st.st_size or quiet.seen == (0, st.st_mtime_ns)):
            return data, st
        if settled and not warned:
            warned = True
            log.warning(
                "%s is empty and the graph has not read it so (seen %s, mtime %.3f s ago); waiting, as for a "
                "save in progress",
                rel,
                quiet.seen,
                age,
            )
        left = deadline - time.monotonic()
        if left <= 0:
            raise NoteBusy(
                f"{rel} is being edited right now (it changed {age:.1f} s ago); engrama waited and wrote "
                "nothing, so no keystroke is lost. Try again once the note has been left alone for a few seconds"
            )
        pause = 0.25 if settled else quiet.settle - age
        time.sleep(min(pause, left, 0.25))


# How long a note's creation or a move to or from the trash waits for git to finish rewriting the vault.
GIT_WAIT = 5.0


def _git_busy(lock: Path, rel: str) -> str:
    return (
        f"git is changing the vault's files right now ({lock} exists: a checkout, pull, merge, rebase or stash); "
        f"engrama waited and wrote nothing into {rel}, so git cannot replace what it would write. Try again once "
        "git is done (if no git command is running, one that was stopped left that file behind: delete it)"
    )


def _wait_for_git(root: Path, rel: str, wait: float = GIT_WAIT, quiet: Quiet | None = None) -> None:
    """Return once git is not rewriting the vault's files; `NoteBusy` after `wait` seconds (review 22i: a note
    created during a checkout was replaced by git's version, what the assistant had been told was made with
    it). A call cancelled meanwhile gives up at once (`quiet.cancelled`; review 23k)."""
    deadline = time.monotonic() + wait
    while (lock := git_lock(root)) is not None:
        if quiet is not None:
            _unless_cancelled(quiet, rel)
        left = deadline - time.monotonic()
        if left <= 0:
            raise NoteBusy(_git_busy(lock, rel))
        time.sleep(min(0.25, left))


def git_lock(root: Path) -> Path | None:
    """The index lock of the git repository holding the vault (the vault or a folder above it), when it exists:
    git holds it while a checkout, pull, merge, rebase or stash rewrites the working tree. None otherwise."""
    for folder in (root, *root.parents):
        marker = folder / ".git"
        try:
            if marker.is_dir():
                git_dir = marker
            elif marker.is_file():  # a worktree or submodule: "gitdir: <path>"
                text = marker.read_text("utf-8", errors="replace").strip()
                if not text.startswith("gitdir:"):
                    return None
                git_dir = folder / text.removeprefix("gitdir:").strip()
            else:
                continue
        except OSError:
            return None
        lock = git_dir / "index.lock"
        return lock if lock.exists() else None
    return None


def _edit_target(root: Path, rel: str) -> tuple[str, Path]:
    """The vault path and real path of the file an edit of `rel` must write (a symlink's in-vault target)."""
    path = resolve_in_vault(root, rel)
    real = Path(os.path.realpath(path))
    real_rel = to_rel(root, real)
    _require_note_path(root, to_rel(root, path))
    _require_note_path(root, real_rel)
    return real_rel, real


def _require_readable_size(rel: str, data: bytes) -> None:
    """A note engrama would write over `MAX_NOTE_BYTES` is refused before anything is written: no reader reads
    one (engrama's own refuses it), so its entity could never be read again (review 20c)."""
    if len(data) > MAX_NOTE_BYTES:
        raise VaultError(
            f"{rel} would be {len(data) / 2**20:.1f} MiB with this write, over the {MAX_NOTE_BYTES // 2**20} MiB "
            "a note may hold; nothing was written. Put less into one note"
        )


def _require_note_path(root: Path, rel: str) -> None:
    if classify(rel) != "note":
        raise VaultError(
            f"{rel!r} is not a note path: engrama writes only .md notes outside dot-folders "
            "(.obsidian, .trash, ...); give a path like Projects/Engrama.md"
        )
    if template_rules(root).holds(rel):
        raise VaultError(
            f"{rel!r} is one of the vault's note templates (its folder is named in Obsidian's template "
            "settings): engrama never writes into templates, which Obsidian copies into every note made from them"
        )


def _file_state(rel: str, data: bytes, st: os.stat_result) -> FileState:
    return FileState(
        path=rel,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        checksum=sha256_hex(data),
        node_id=None,
        ino=st.st_ino,
    )


def _read_stable(real: Path, rel: str) -> tuple[bytes, os.stat_result]:
    """Read a file whose size and mtime are the same before and after the read (retrying a few times)."""
    fd, data, st = _read_kept(real, rel)
    os.close(fd)
    return data, st


def _read_kept(real: Path, rel: str) -> tuple[int, bytes, os.stat_result]:
    """`_read_stable`, keeping the file open: (descriptor, bytes, stat); the caller closes the descriptor."""
    for _ in range(_READ_ATTEMPTS):
        fd = _open_for_read(real, rel)
        try:
            before = os.fstat(fd)
            _check_readable(before, rel)
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = stream.read(MAX_NOTE_BYTES + 1)
            after = os.fstat(fd)
            _check_readable(after, rel)
        except BaseException:
            os.close(fd)
            raise
        # An editor saving in place while we read shows up as a changed size or mtime: read again.
        unchanged = (before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns)
        if unchanged and len(data) == after.st_size:
            return fd, data, after
        os.close(fd)
    raise ConcurrentEdit(f"{rel} kept changing while engrama read it; try again when the editor has saved it")


def _open_for_read(real: Path, rel: str) -> int:
    # O_NOFOLLOW: the real path was checked to be in the vault; a symlink swapped in since is refused.
    # O_NONBLOCK: opening a FIFO named x.md must not hang the server; fstat then refuses it.
    try:
        return os.open(real, _OPEN_READ)
    except FileNotFoundError:
        raise
    except PermissionError:
        raise UnreadableNote(f"{rel}: permission denied; make the file readable and it will sync") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnreadableNote(f"{rel} is a symlink loop; point the link at a real note") from None
        raise UnreadableNote(f"{rel} cannot be opened: {exc.strerror}") from None


def _check_readable(st: os.stat_result, rel: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableNote(
            f"{rel} is not a regular file (a folder, pipe or device); engrama reads only notes"
        )
    if st.st_size > MAX_NOTE_BYTES:
        raise UnreadableNote(
            f"{rel} is {st.st_size} bytes, over the {MAX_NOTE_BYTES // (1024 * 1024)} MiB limit for notes; "
            "split it or move it out of the vault"
        )


def _swap_in(
    root: Path,
    real: Path,
    rel: str,
    new: bytes,
    base: str,
    st: os.stat_result,
    edit: Callable[[bytes], bytes] | None = None,
) -> FileState | None:
    """Replace `real` by `new` if it still holds the bytes with checksum `base`; None when it changed.

    The replaced file is then watched (`orphans`): an editor that had opened it for a save in place just
    before the swap writes into it, and those bytes are put back into the note, through `edit` again."""
    ours = sha256_hex(new)
    # The temp file's name carries both versions it may hold: `new` until the exchange, the note's `base`
    # after it, so a clean-up after a crash can tell them from a save another program made (`leftovers`).
    tmp, tmp_st = _write_temp(
        real.parent,
        new,
        new_mode=stat.S_IMODE(st.st_mode),
        owner=(st.st_uid, st.st_gid),
        sums=(ours, base),
        note=real.name,
    )
    # rename keeps the inode's mtime, so the temp file's fstat describes the note now on disk
    written = _file_state(rel, new, tmp_st)
    try:
        with _SWAP:
            replaced = _replace_if_unchanged(real, rel, tmp, base)
            if replaced is None:
                return None
            # Recorded before any other swap or put-back of this note can run (both take `_SWAP`): a put-back
            # re-applies every swap made after the one it undoes, and must not miss this one, watched or not.
            seq = _record_swap(real, base, ours, edit, watched=replaced.fd >= 0)
    finally:
        _remove_own_temp(tmp, tmp_st)
    _wrote(real, tmp_st)
    _fsync_folder(real.parent)
    if replaced.fd >= 0:
        recovery = _Recovery(root, real, rel, seq, ours, edit, replaced.kept)
        if replaced.held is not None:
            recovery.held.append(replaced.held)

        def done() -> None:
            _release_swap(real, seq)
            if recovery.held:
                _let_go_of_held(recovery.held[0], rel, {base, *recovery.stored})

        orphans.WATCHER.watch(
            replaced.fd,
            rel,
            replaced.seen,
            recovery.recover,
            done,
            whole=replaced.kept is not None,
        )
    return written


def _let_go_of_held(held: tuple[Path, tuple[int, int]], rel: str, stored: set[str]) -> None:
    """The watch of a replaced file kept at a temp name is over: remove that name when its bytes are the
    note's version the swap replaced or were stored in the vault (put back, or a conflict copy), and no program
    has it open for writing any more; otherwise it stays, and the next start's clean-up keeps it as a
    conflict copy (an editor writing into it after the watch then writes into that copy)."""
    path, ident = held
    try:
        fd, data, st = _read_kept(path, rel)
    except (OSError, VaultError):
        return
    try:
        writing = open_for_writing(fd)
    finally:
        os.close(fd)
    if (st.st_dev, st.st_ino) != ident:
        return  # not the file the swap replaced any more: not ours to remove
    if writing is True:
        log.warning(
            "%s: a program still has the replaced file open to write into it; it stays as %s", rel, path
        )
    elif not data or sha256_hex(data) in stored:
        _remove_quietly(path)
    else:
        log.warning("%s: the text an editor saved into the replaced file stays in %s", rel, path.name)


@dataclass(frozen=True)
class _Replaced:
    """The file a swap took the note's path from: `fd` open on it to watch (-1: nothing to watch), `seen` its
    (size, mtime) when checked, and `kept` when it is another program's save the swap displaced: where it
    stays in the vault (a conflict-copy name) until it is put back, and its (device, inode). `held`: the
    temp name the replaced note keeps while a program that has it open for writing may still save into it
    (and its device, inode), so a crash in that time leaves the save on disk (`leftovers`)."""

    fd: int
    seen: tuple[int, int]
    kept: tuple[Path, tuple[int, int]] | None = None
    held: tuple[Path, tuple[int, int]] | None = None


def _replace_if_unchanged(real: Path, rel: str, tmp: Path, base: str) -> _Replaced | None:
    """Put `tmp` in place of `real` if `real` still holds the bytes with checksum `base` (under `_SWAP`).

    Returns the replaced file, still open, with the (size, mtime) it was read at: a descriptor to watch
    (`orphans`), or -1 where nothing is watched (not POSIX; the file still has another name). None when the
    note changed."""
    try:
        fd, current, st = _read_kept(real, rel)
    except FileNotFoundError:
        raise ConcurrentEdit(
            f"{rel} was moved or deleted while engrama edited it; nothing was written"
        ) from None
    if sha256_hex(current) != base:
        os.close(fd)
        return None
    if not orphans.SUPPORTED:  # Windows replaces no open file
        os.close(fd)
        fd = -1
    checked = (st.st_dev, st.st_ino)
    try:
        exchanged = _exchange(tmp, real)
        if not exchanged:
            os.replace(tmp, real)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        if exc.errno == errno.ENOENT:  # the note went away after the re-read: it is not brought back
            raise ConcurrentEdit(
                f"{rel} was moved or deleted while engrama edited it; nothing was written"
            ) from None
        raise _unwritable(exc, f"cannot replace {rel}") from None
    held: Path | None = None  # the temp name that holds the replaced note after an exchange
    if exchanged:  # `tmp` now names the file that was at the note's path the instant before
        try:
            displaced = _take_displaced(tmp, real, rel, checked)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        if displaced is not None:
            if fd >= 0:
                os.close(fd)
            return displaced
        held = tmp if _is_file(tmp, checked) else None
    seen = (st.st_size, st.st_mtime_ns)
    keep = False  # whether the replaced note keeps its temp name while it is watched
    if fd >= 0:
        after = os.fstat(fd)
        names = after.st_nlink - (1 if held is not None else 0)
        if names > 0:  # another name reaches it (a hard link): nothing is lost
            os.close(fd)
            fd = -1
        else:
            writing = open_for_writing(fd)
            untouched = (after.st_size, after.st_mtime_ns) == seen
            if writing is False and untouched:  # no program can save into it any more: nothing to watch
                os.close(fd)
                fd = -1
            keep = writing is True or not untouched
    if held is not None and not keep:
        _remove_quietly(held)
        held = None
    return _Replaced(fd, seen, held=(held, checked) if held is not None else None)


# fcntl(2) leases (Linux): a read lease is granted only while no process has the file open for writing.
_F_SETLEASE = 1024
_LEASE_READ, _LEASE_NONE = 0, 2  # F_RDLCK, F_UNLCK


def open_for_writing(fd: int) -> bool | None:
    """Whether any program has the file `fd` (open for reading) open for writing: an editor that began a save
    in place before a swap replaced it may still write into it. None where the system cannot tell (no
    leases: macOS, Windows, most network filesystems, a file of another owner without CAP_LEASE).

    Once a swap has replaced a note, no program can open the replaced file by the note's path any more, so
    when none has it open for writing then, none will ever write into it. The lease is held for two system
    calls on a file no other program can open by name, so no lease break (a SIGIO to this process) comes."""
    if fcntl is None or not sys.platform.startswith("linux"):
        return None
    try:
        fcntl.fcntl(fd, _F_SETLEASE, _LEASE_READ)
    except OSError as exc:
        return True if exc.errno == errno.EAGAIN else None
    with contextlib.suppress(OSError):  # the lease ends when the descriptor is closed anyway
        fcntl.fcntl(fd, _F_SETLEASE, _LEASE_NONE)
    return False


# The flags of the C library's rename with flags: Linux renameat2 (linux/fs.h), macOS renamex_np (sys/stdio.h).
_RENAME_FLAGS = {
    "linux": {"exchange": 2, "no_replace": 1},  # RENAME_EXCHANGE, RENAME_NOREPLACE
    "darwin": {"exchange": 2, "no_replace": 4},  # RENAME_SWAP, RENAME_EXCL
}
_AT_FDCWD = -100  # linux/fcntl.h: paths relative to the working folder (ours are absolute)


def _load_rename(
    kind: str, platform: str = sys.platform, libc: Any = None
) -> Callable[[bytes, bytes], int] | None:
    """The C library's rename of `kind`, as `f(a, b)` giving 0, or -1 with errno set: "exchange" swaps the
    two names atomically, "no_replace" renames `a` to `b` unless `b` exists (EEXIST). Linux `renameat2`
    (glibc 2.28 and later), macOS `renamex_np` (10.12 and later; APFS, other filesystems answer ENOTSUP).
    None where there is none."""
    system = "linux" if platform.startswith("linux") else platform
    if system not in _RENAME_FLAGS:
        return None
    flag = _RENAME_FLAGS[system][kind]
    try:
        lib = libc if libc is not None else ctypes.CDLL(None, use_errno=True)
        if system == "darwin":
            rename_np = lib.renamex_np
            rename_np.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint)
            rename_np.restype = ctypes.c_int
            return lambda a, b: rename_np(a, b, flag)
        rename_at = lib.renameat2
        rename_at.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
        rename_at.restype = ctypes.c_int
        return lambda a, b: rename_at(_AT_FDCWD, a, _AT_FDCWD, b, flag)
    except (OSError, AttributeError):  # a C library without it (glibc before 2.28, musl before 1.2.1, ...)
        return None


_EXCHANGE = _load_rename("exchange")
_NO_REPLACE = _load_rename("no_replace")
# Refused by the system or the filesystem, or by a sandbox's system-call filter (EPERM): `os.replace` instead,
# which reports a real permission problem itself.
_EXCHANGE_UNSUPPORTED = {
    errno.EINVAL,
    errno.ENOSYS,
    errno.ENOTSUP,
    errno.EOPNOTSUPP,
    errno.EXDEV,
    errno.EPERM,
    errno.EACCES,
}


def _exchange(tmp: Path, real: Path) -> bool:
    """Swap the two names atomically (`_load_rename`): the note's path gets the new file and `tmp` the one
    that was there, whatever it was by then. False where the system or filesystem cannot (then the caller
    replaces, and a save landing in between is not seen)."""
    if _EXCHANGE is None:
        return False
    if _EXCHANGE(os.fsencode(tmp), os.fsencode(real)) == 0:
        return True
    err = ctypes.get_errno()
    if err in _EXCHANGE_UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(real))


def _take_displaced(tmp: Path, real: Path, rel: str, checked: tuple[int, int]) -> _Replaced | None:
    """What an exchange left at `tmp`: None when it is the very file checked (left there; the caller decides
    whether it is watched under that name). Anything else is another program's save, or something put at the note's path,
    that landed between the check and the swap: it is never removed. It moves to a conflict-copy name beside
    the note, so it stays in the vault whatever happens to this process, and a regular file is watched from
    there as a complete save, to be put back into the note at once (`_Recovery.recover` then removes the
    copy)."""
    try:
        info = os.lstat(tmp)
    except FileNotFoundError:  # something removed it meanwhile: nothing is left to keep
        return None
    if stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) == checked:
        return None
    kept = _move_to_free_name(tmp, _beside(real), "beside the note")
    if kept is None:
        raise VaultError(f"another program saved {rel} as engrama wrote it, and no name was free beside it")
    if not stat.S_ISREG(info.st_mode):
        log.warning("%s: what stood at the note's path as engrama replaced it was kept as %s", rel, kept.name)
        return _Replaced(-1, (-1, -1))
    log.warning("%s was saved by another program as engrama replaced it; putting that save back", rel)
    try:
        fd = os.open(kept, _OPEN_READ)
    except OSError as exc:
        # Out of descriptors, say: the save stays in the conflict copy, listed for the person.
        log.warning("%s: the save is kept in %s (%s)", rel, kept.name, exc.strerror)
        return _Replaced(-1, (-1, -1))
    return _Replaced(fd, (-1, -1), (kept, (info.st_dev, info.st_ino)))


def _beside(real: Path) -> Iterator[Path]:
    stamp = time.strftime("%Y-%m-%d %H%M%S")
    for n in range(1, 100):
        yield real.with_name(f"{real.stem} (engrama conflicted copy {stamp}{f' {n}' if n > 1 else ''}).md")


@dataclass(frozen=True)
class _Swap:
    """One swap this process made: the note's bytes went from checksum `base` to `ours` through `edit`."""

    seq: int  # the order swaps were made in (checksums recur: a note emptied twice)
    base: str
    ours: str
    edit: Callable[[bytes], bytes] | None


# The swaps per note (real path), oldest first, that a file still watched may need: the bytes an editor saved
# into a replaced file are put back through every edit made on top of it since. A swap is kept from when it is
# made until no swap before it on that note is watched any more (`_release_swap`), so what is kept is bounded
# by what the watcher holds (orphans.MAX_WATCHED files, each for seconds), never by how much was written: an
# edit can hold a whole note's bytes, and a first sync swaps every note of the vault.
_SWAPS: dict[str, list[_Swap]] = {}
_WATCHED_SWAPS: dict[str, set[int]] = {}  # per note, the swaps whose replaced file is being watched
_SWAPS_LOCK = threading.Lock()
_SWAP_SEQ = itertools.count(1)


def _record_swap(
    real: Path, base: str, ours: str, edit: Callable[[bytes], bytes] | None, *, watched: bool
) -> int:
    """Record a swap of `real`. One whose replaced file is not `watched` is kept only while an earlier swap's
    replaced file is (a put-back of that one re-applies this edit too)."""
    seq = next(_SWAP_SEQ)
    key = str(real)
    with _SWAPS_LOCK:
        if watched:
            _WATCHED_SWAPS.setdefault(key, set()).add(seq)
        if key in _WATCHED_SWAPS:
            _SWAPS.setdefault(key, []).append(_Swap(seq, base, ours, edit))
    return seq


def _release_swap(real: Path, seq: int) -> None:
    """The file swap `seq` replaced is no longer watched: forget the swaps no watched one can need."""
    key = str(real)
    with _SWAPS_LOCK:
        watched = _WATCHED_SWAPS.get(key, set())
        watched.discard(seq)
        if not watched:
            _WATCHED_SWAPS.pop(key, None)
            _SWAPS.pop(key, None)
            return
        oldest = min(watched)  # recovering it needs the swaps after it; those before are nobody's
        _SWAPS[key] = [s for s in _SWAPS.get(key, []) if s.seq >= oldest]


def _swaps_after(real: Path, seq: int, ours: str) -> list[_Swap]:
    """The swaps made on top of swap `seq` (which wrote the bytes with checksum `ours`), one after the other."""
    with _SWAPS_LOCK:
        swaps = list(_SWAPS.get(str(real), []))
    chain: list[_Swap] = []
    for swap in swaps:
        if swap.seq > seq and swap.base == ours:
            chain.append(swap)
            ours = swap.ours
    return chain


def _last_swap_writing(real: Path, ours: str) -> int | None:
    """The last recorded swap of `real`, when it wrote the bytes with checksum `ours` (None: none recorded)."""
    with _SWAPS_LOCK:
        swaps = _SWAPS.get(str(real), [])
        return swaps[-1].seq if swaps and swaps[-1].ours == ours else None


# A merge conflict as git (and tools following it) write one into a file: a line of seven `<` (and a label),
# later a line of seven `=`, later a line of seven `>`. Seven `=` alone are a Markdown heading underline, so all
# three are needed; markers inside a fenced code block are a note showing a conflict, not one (review 18c).
_FENCE = re.compile(rb"^[ \t]{0,3}(`{3,}|~{3,})")


def in_conflict(data: bytes) -> bool:
    """Whether `data` holds an unresolved merge conflict (the person resolves it; engrama does not write). One
    pass over the lines, whatever the note holds."""
    if b"<<<<<<<" not in data:
        return False
    fence: bytes | None = None
    stage = 0  # 1: after a `<<<<<<<` line, 2: after its `=======` line
    for line in data.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:  # inside a code block until a fence of its kind, at least as long, alone on it
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None if not line.strip(b" \t\r" + fence[:1]) else fence
            continue
        if opened:
            fence = opened.group(1)
        elif _marker(line, b"<"):
            stage = 1
        elif stage == 1 and line.rstrip(b"\r") == b"=" * 7:
            stage = 2
        elif stage == 2 and _marker(line, b">"):
            return True
    return False


def _marker(line: bytes, char: bytes) -> bool:
    """A conflict marker line: seven `char`, then nothing or a space and a label."""
    return line.startswith(char * 7) and (len(line) == 7 or line[7:8] in (b" ", b"\t", b"\r"))


def _applied(edit: Callable[[bytes], bytes] | None, data: bytes, rel: str) -> bytes:
    if edit is None or in_conflict(data):  # the person's text as they saved it wins
        return data
    try:
        return edit(data)
    except Exception as exc:  # a malformed note, say: the person's text as they saved it wins
        log.warning(
            "%s: an edit does not apply to the text the editor saved (%s); keeping that text", rel, exc
        )
        return data


@dataclass(frozen=True)
class _Recovery:
    """A swap whose replaced file is watched (`orphans`): what putting an editor's bytes back needs. Swap
    `seq` replaced the note at `real` (vault path `rel`) with bytes of checksum `ours` through `edit`;
    `kept`: a displaced save's conflict copy and its (device, inode), removed once the note holds it."""

    root: Path
    real: Path
    rel: str
    seq: int
    ours: str
    edit: Callable[[bytes], bytes] | None
    kept: tuple[Path, tuple[int, int]] | None
    put: list[int] = dataclasses.field(default_factory=list)  # the swaps of this recovery's own put-backs
    copies: list[tuple[Path, str]] = dataclasses.field(default_factory=list)  # its conflict copies (checksum)
    stored: set[str] = dataclasses.field(default_factory=set)  # checksums of the saves it stored in the vault
    # The temp name the replaced file keeps while watched (and its device, inode); renamed to carry the checksum
    # of each save stored from it, so a crash after that leaves a leftover the clean-up knows is stored.
    held: list[tuple[Path, tuple[int, int]]] = dataclasses.field(default_factory=list)

    def recover(self, data: bytes, finished: bool) -> bool:
        """Put back the bytes an editor saved into the file the swap replaced; True once they are stored
        somewhere (the watcher tries again later on False).

        The note gets `edit(data)`, as a re-based edit would have written, with every edit this process
        swapped in on top of that swap since applied again in turn (`put_back`). Otherwise (another program
        saved the note), the editor's bytes go to a conflict copy beside it, listed for the person like a sync
        tool's (`paths.conflict_original`); at the vault's top when the note's folder is gone. A save still
        being written (`finished` False: the process is exiting) is never put over the note: it is kept as a
        conflict copy. An empty file is a save in place that never came: the note keeps what the swap wrote."""
        rel = self.rel
        if not data and not finished:
            log.info(
                "%s: the replaced file was truncated and never written; the note is kept as engrama wrote it",
                rel,
            )
            return True
        if finished:
            with _SWAP:  # no edit of this process lands between the re-read and the swap
                if self.put_back(data):
                    if self.kept is not None and _is_file(*self.kept):
                        _remove_quietly(self.kept[0])
                    self._stored(data)
                    return True
        if self.kept is not None and _is_file(*self.kept):
            log.warning(
                "%s changed again meanwhile; the text the other program saved is kept in %s",
                rel,
                self.kept[0].name,
            )
            self._stored(data)
            return True
        # Beside the note; at the vault's top when its folder went away.
        for near in (self.real, self.root / self.real.name):
            try:
                copy = _conflict_copy(near, data)
            except (OSError, VaultError) as exc:
                log.warning("%s: could not keep the editor's text beside %s: %s", rel, near.parent, exc)
                continue
            log.warning("%s changed meanwhile; the text the editor saved is kept in %s", rel, copy.name)
            self._drop_earlier_copies()
            self.copies.append((copy, sha256_hex(data)))
            self._stored(data)
            return True
        return False

    def _stored(self, data: bytes) -> None:
        """`data` (the replaced file's bytes) is stored in the vault: say so in the held temp file's name."""
        checksum = sha256_hex(data)
        self.stored.add(checksum)
        if not self.held:
            return
        path, ident = self.held[0]
        if not _is_file(path, ident):
            return
        named = path.with_name(make_temp_name([checksum], self.real.name))
        try:
            moved = _move_to_free_name(path, [named], "a temp name")
        except (OSError, VaultError) as exc:  # it keeps its name; a crash now leaves a redundant copy at most
            log.info("%s: could not rename %s: %s", self.rel, path.name, exc)
            return
        if moved is not None:
            self.held[0] = (moved, ident)

    def _drop_earlier_copies(self) -> None:
        """Remove the conflict copies this recovery made of a save's first part (the editor paused mid-save)
        now that a copy holds the whole of it; one the person has changed since stays."""
        for copy, checksum in self.copies:
            try:
                if sha256_hex(copy.read_bytes()) == checksum:
                    copy.unlink()
            except OSError as exc:
                log.info("%s: an earlier copy of part of the editor's save stays: %s", copy.name, exc)
        self.copies.clear()

    def put_back(self, data: bytes) -> bool:
        """`recover`'s put-back into the note, under `_SWAP`; True when the note holds the editor's text.

        The note is expected to hold what the last swap of this process wrote, or the editor's own bytes (it
        saved them again through the note's path): the edits go onto either. A second put-back (the editor
        wrote more after a pause) replaces the first: its swap is on the chain, its edits are not applied twice."""
        chain = _swaps_after(self.real, self.seq, self.ours)
        edits = [self.edit, *(swap.edit for swap in chain if swap.seq not in self.put)]

        def again(text: bytes) -> bytes:
            for each in edits:
                text = _applied(each, text, self.rel)
            return text

        new = again(data)
        try:
            now, st = _read_stable(self.real, self.rel)
            held = sha256_hex(now)
            if held == sha256_hex(new):
                return True  # the note already holds it
            if held not in (chain[-1].ours if chain else self.ours, sha256_hex(data)):
                return False
            written = _swap_in(self.root, self.real, self.rel, new, held, st, again)
            if written is None:
                return False
            if (seq := _last_swap_writing(self.real, written.checksum)) is not None:  # under _SWAP: ours
                self.put.append(seq)
        except (OSError, VaultError) as exc:
            log.warning("%s: could not put the editor's text back into the note: %s", self.rel, exc)
            return False
        log.warning("%s: the editor's text is back in the note, with engrama's edits on it", self.rel)
        return True


def _is_file(path: Path, ident: tuple[int, int]) -> bool:
    """Whether `path` still names the file with (device, inode) `ident`."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == ident


def _conflict_copy(real: Path, data: bytes) -> Path:
    """Write `data` beside `real` under a conflict-copy name the sync lists and never indexes as a note."""
    tmp, _ = _write_temp(real.parent, data, new_mode=None, sums=(sha256_hex(data),), note=real.name)
    try:
        for copy in _beside(real):
            try:
                _link_new(tmp, copy, copy.name)
                return copy
            except NoteExists:
                continue
        raise VaultError(f"no free conflict-copy name beside {real.name}")
    finally:
        _remove_quietly(tmp)


def _write_temp(
    folder: Path,
    data: bytes,
    *,
    new_mode: int | None,
    owner: tuple[int, int] | None = None,
    sums: Iterable[str],
    note: str,
) -> tuple[Path, os.stat_result]:
    """Write `data` to a fresh temp file in `folder`, fsynced; return its path and final fstat.

    With `new_mode` the file starts private (0o600, so a private note is never briefly world-readable) and
    then takes those bits; without it, it gets the default mode for new files (0o666 minus the umask).
    Its name carries `sums` (the checksums of every version engrama knows the file may come to hold: `data`,
    and for a swap the note's version the exchange puts there) and the name of the `note` it is for, so a
    clean-up after a crash removes only those and keeps anything else as a copy (`leftovers`).
    """
    sums = tuple(sums)
    fd, tmp = _create_temp(
        folder, 0o600 if new_mode is not None else 0o666, lambda: make_temp_name(sums, note)
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if new_mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, new_mode)
        if owner is not None:
            _keep_owner(fd, owner)
        os.fsync(fd)
        st = os.fstat(fd)
    except BaseException as exc:
        os.close(fd)
        _remove_quietly(tmp)
        if isinstance(exc, OSError):  # a full disk or quota: said as such, not a raw errno (review 22e)
            raise _unwritable(exc, f"cannot write in folder {folder}") from None
        raise
    os.close(fd)
    return tmp, st


def _create_temp(folder: Path, mode: int, name: Callable[[], str]) -> tuple[int, Path]:
    for _ in range(5):
        tmp = folder / name()
        try:
            return os.open(tmp, _OPEN_EXCL, mode), tmp
        except FileExistsError:
            continue  # 64 random bits collided; astronomically rare, just draw again
        except OSError as exc:
            raise _unwritable(exc, f"cannot write in folder {folder}") from None
    raise VaultError(f"cannot create a temp file in {folder}; remove stray .engrama-tmp-* files there")


def _unwritable(exc: OSError, what: str) -> VaultError:
    """What a refused write raises: `NoteUnwritable` when the file system will not let this user write there
    (the note stays readable: the sync indexes it without its id line), a plain VaultError otherwise."""
    if exc.errno == errno.EROFS:
        return NoteUnwritable(f"{what}: the vault is on a read-only file system; nothing was written")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return NoteUnwritable(
            f"{what}: {exc.strerror} (the folder's permissions, or a note locked or made immutable); nothing "
            "was written"
        )
    if exc.errno in _DISK_FULL:
        return NoteUnwritable(
            f"{what}: the disk holding the vault is full (or your quota or file size limit is reached); nothing "
            "was written. Free some space, then try again"
        )
    return VaultError(f"{what}: {exc.strerror}; nothing was written")


# What a write into the vault meets when its disk (or the person's quota, or the process's file size limit) is
# full: the note is still readable, so it is indexed and its line written later, as on a read-only mount.
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _keep_owner(fd: int, owner: tuple[int, int]) -> None:
    """Give the temp file the note's owner and group when we may (as root, or a group we belong to)."""
    if not hasattr(os, "fchown") or owner == (os.geteuid(), os.getegid()):
        return
    for uid, gid in (owner, (-1, owner[1])):
        try:
            os.fchown(fd, uid, gid)
            return
        except PermissionError:
            continue


def _link_new(tmp: Path, path: Path, rel: str) -> None:
    """Give the finished temp file its final name without ever replacing an existing one: a hard link, or where
    the file system has none (FAT, exFAT, some shares), a rename that refuses to replace (else a check, then a
    rename). The note appears whole or not at all: the fallback wrote the note a second time, in place, and a
    disk that filled up meanwhile left it cut off mid-sentence, indexed and appended to (review 22e)."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise NoteExists(_exists_message(rel)) from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise _unwritable(exc, f"cannot create {rel}") from None
    try:
        placed = _move_to_free_name(tmp, [path], rel)
    except OSError as exc:
        raise _unwritable(exc, f"cannot create {rel}") from None
    if placed is None:
        raise NoteExists(_exists_message(rel))


def _exists_message(rel: str) -> str:
    return f"{rel} already exists; engrama never overwrites a note. Edit it instead, or choose another name"


def _place_in_trash(source: Path, trash: Path) -> Path:
    target = _move_to_free_name(source, (trash / name for name in _trash_names(source.name)), "the trash")
    if target is None:
        raise VaultError(f"the trash holds too many notes named like {source.name}; empty it in Obsidian")
    return target


def _move_to_free_name(source: Path, targets: Iterable[Path], where: str) -> Path | None:
    """Move `source` to the first of `targets` that is free; None when none was. Never overwrites a file.

    One rename that refuses to replace (`_NO_REPLACE`) where the system has it. Elsewhere a hard link to the
    new name, then removal of the old one: a save by rename landing at the old name between the two would be
    removed with it (microseconds), so that is the fallback only."""
    for target in targets:
        if _NO_REPLACE is not None:
            if _NO_REPLACE(os.fsencode(source), os.fsencode(target)) == 0:
                return target
            err = ctypes.get_errno()
            if err == errno.EEXIST:
                continue
            if err == errno.ENOENT:
                raise FileNotFoundError(err, os.strerror(err), str(source))
            if err not in _EXCHANGE_UNSUPPORTED:
                raise VaultError(f"cannot move {source.name} to {where}: {os.strerror(err)}")
        try:
            os.link(source, target, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise VaultError(f"cannot move {source.name} to {where}: {exc.strerror}") from None
            if os.path.lexists(target):
                continue
            os.rename(source, target)  # no hard links: a check-then-rename is the best this filesystem allows
            return target
        os.unlink(source)  # the note now lives on under its new name
        return target
    return None


def _trash_names(name: str) -> Iterator[str]:
    yield name
    stem, suffix = os.path.splitext(name)
    for n in range(1, 1000):
        yield f"{stem} {n}{suffix}"


def _make_folders(root: Path, folder: Path) -> None:
    """Create `folder` and the folders on the way to it, below the vault's root, never the root itself: a
    vault on a drive that is unplugged (or a share not mounted, or a folder moved away) must not be started
    again at its old path, where the notes written would be hidden when the drive comes back."""
    if not os.path.isdir(root):
        raise VaultError(
            f"the vault folder {root} is missing: is it on a drive that is unplugged, or a share that is not "
            "mounted? Nothing was written; reconnect it, or point --vault / ENGRAMA_VAULT at the vault"
        )
    current = os.path.abspath(root)
    for part in Path(os.path.relpath(folder, root)).parts:
        if part in (os.curdir, ""):
            continue
        current = os.path.join(current, part)
        try:
            os.mkdir(current)
            _fsync_folder(Path(os.path.dirname(current)))  # the new folder's entry outlives a power loss too
        except (FileExistsError, NotADirectoryError):
            if not os.path.isdir(current):
                raise VaultError(
                    f"{to_rel(root, Path(current))} is a file where a folder is needed; rename it"
                ) from None
        except FileNotFoundError:
            raise VaultError(
                f"the vault folder {root} went away while writing; nothing was written"
            ) from None
    # A folder swapped for a symlink since resolve_in_vault checked it must not lead us out of the vault.
    if not is_inside(os.path.realpath(root), os.path.realpath(folder)):
        raise PathOutsideVault(f"{to_rel(root, folder)} leads out of the vault through a symlink")


def _fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (POSIX); a crash right after must not bring back the old note."""
    if os.name == "nt":
        return  # Windows cannot open a folder for fsync; NTFS journals the rename itself
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network filesystems refuse to fsync a folder; the rename itself has happened
    finally:
        os.close(fd)


def _remove_own_temp(tmp: Path, st: os.stat_result) -> None:
    """Remove the temp file `tmp` if it is still the one written (`st`): after an exchange its name holds
    what was at the note's path, which `_take_displaced` moves away, and which must never be removed here."""
    if _is_file(tmp, (st.st_dev, st.st_ino)):
        _remove_quietly(tmp)


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:  # never let clean-up hide the error that got us here
        log.warning("could not remove temp file %s: %s", path, exc.strerror)


def keep_beside(source: Path, note: Path) -> Path | None:
    """Move the file `source` to a free conflict-copy name beside `note`, never overwriting anything; the
    copy's path, or None when no name was free (`leftovers`)."""
    kept = _move_to_free_name(source, _beside(note), "beside the note")
    if kept is not None:
        _fsync_folder(kept.parent)
    return kept
