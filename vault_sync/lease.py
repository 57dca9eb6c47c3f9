"""One writer per vault: an OS file lock beside the database decides which process watches and writes notes.

Claude Desktop and Cursor each start their own server, often on the same vault and database. Two writers
would race to insert `engrama_id` lines into the same new note, so exactly one process holds the lease (an
exclusive lock on `<db_path>.lease`) and the others only read and write the database.

The lock is an OS lock (`flock` on POSIX, `msvcrt.locking` on Windows), not a pid file: the kernel drops it
when the holder exits in any way, crashes and SIGKILL included, so there is never a stale lease to clean up.
The holder writes its pid into the file for people who wonder who holds it; nothing trusts it.

`flock` locks belong to an open file description, so two `VaultLease` objects exclude each other even inside
one process. The descriptor is opened non-inheritable, so child processes never keep the lock alive.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

LEASE_SUFFIX = ".lease"
# On Windows a locked byte range cannot be read by other processes, so the lock sits on a byte far past the
# pid text (locking past the end of a file is allowed) and the pid stays readable.
_WINDOWS_LOCK_OFFSET = 1 << 30

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _lock(fd: int) -> bool:
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return False
            raise
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def lease_path(db_path: Path) -> Path:
    """The lease file that goes with a database file: `<db_path>.lease`."""
    return db_path.with_name(db_path.name + LEASE_SUFFIX)


class VaultLease:
    """The vault's writer lease. `try_acquire()` never blocks; call it again later to retry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._held = False

    @classmethod
    def for_database(cls, db_path: Path) -> VaultLease:
        return cls(lease_path(db_path))

    @property
    def held(self) -> bool:
        return self._held

    def try_acquire(self) -> bool:
        """Take the lease if no other holder has it; True when this object holds it now."""
        if self._held:
            return True
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # No O_TRUNC: opening must not erase the pid the current holder wrote.
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock(self._fd):
            return False
        self._held = True
        try:
            _overwrite(self._fd, f"{os.getpid()}\n".encode())
        except OSError as exc:  # a full disk: the lock is what holds the lease, the pid only names its holder
            log.warning("holding the vault lease %s without naming this process in it: %s", self.path, exc)
        else:
            log.info("holding the vault lease %s (pid %d)", self.path, os.getpid())
        return True

    def release(self) -> None:
        """Give the lease up (if held) and close the file; safe to call more than once."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if self._held:
                _overwrite(fd, b"")  # a released lease names nobody
                _unlock(fd)
                log.info("released the vault lease %s", self.path)
        finally:
            self._held = False
            os.close(fd)

    def holder_pid(self) -> int | None:
        """The pid the current holder wrote into the lease file (for people and logs; may be stale)."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)


def _overwrite(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, data)
