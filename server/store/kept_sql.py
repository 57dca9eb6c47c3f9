# pyright: reportAttributeAccessIssue=false
# (sqlean re-exports its names from a compiled module without type stubs, so pyright cannot see them.)
"""The tool writes the lease holder keeps against an editor's older copy, recorded in the database (m021).

For a moment after a tool's write (`vault_sync.writer.KEEP_EXTRA` past the settle window), a save of the note
that lacks the write has it made again: the person's editor may hold a copy from before it. That lives in the
holder's memory; if the holder dies in that moment (a crash, a SIGKILL, the machine's sleep cut short), the
editor's older copy won and the assistant had been told the write was made. So the holder records each kept
write here, on the writing thread, before the write returns (`KeptLog`, its own connection: the writer's threads
must not wait on the event loop), and the process that takes the vault over next keeps what is still to be kept
and makes again what was saved over meanwhile (`server.live`). Rows live seconds: the holder drops the ones past
their time as it records more, and the next holder drops what it read.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import sqlean

from vault_sync.writer import KeptWrite

log = logging.getLogger(__name__)

RECORD_WAIT = 2.0  # seconds a record waits for the database's write lock before the write stays unrecorded


class KeptLog:
    """Records kept writes into `path`'s database from any thread, on a connection of its own."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: Any = None
        self._lock = threading.Lock()

    def record(self, kept: KeptWrite) -> None:
        """Record `kept` (replacing the path's earlier one) and drop the rows past their time. A failure is
        logged, not raised: the write was made, and this process keeps it all the same."""
        with self._lock:
            try:
                conn = self._conn or sqlean.connect(
                    str(self._path), check_same_thread=False, isolation_level=None, timeout=RECORD_WAIT
                )
                self._conn = conn
                conn.execute("begin immediate")
                try:
                    record(conn, kept)
                    conn.execute("delete from kept_writes where until < ?", (time.time(),))
                except BaseException:
                    conn.execute("rollback")
                    raise
                conn.execute("commit")
            except sqlean.Error as exc:
                log.warning(
                    "%s: could not record engrama's write as kept (%s); if this process dies in the next "
                    "seconds and an editor saves an older copy over the note, the write is not made again",
                    kept.rel,
                    exc,
                )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def record(conn: Any, kept: KeptWrite) -> None:
    conn.execute(
        "insert or replace into kept_writes (path, note_id, base, written, written_at, until) "
        "values (?, ?, ?, ?, ?, ?)",
        (kept.rel, kept.note_id, kept.base, kept.written, kept.written_at, kept.until),
    )


def recorded(conn: Any) -> list[KeptWrite]:
    """Every kept write on record (the ones a process that held the vault before this one made)."""
    rows = conn.execute(
        "select path, note_id, base, written, written_at, until from kept_writes order by written_at"
    )
    return [KeptWrite(r[0], r[1], bytes(r[2]), bytes(r[3]), r[4], r[5]) for r in rows]


def forget(conn: Any, kept: list[KeptWrite]) -> None:
    """Drop these records (a record made since for the same note stays)."""
    conn.executemany(
        "delete from kept_writes where path = ? and written_at = ?", [(k.rel, k.written_at) for k in kept]
    )


def forget_past(conn: Any, now: float) -> None:
    """Drop the records past their time (a holder stopping cleanly: what it kept was judged while it ran)."""
    conn.execute("delete from kept_writes where until < ?", (now,))
