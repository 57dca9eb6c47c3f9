# pyright: reportAttributeAccessIssue=false
# (sqlean re-exports its names from a compiled module without type stubs, so pyright cannot see them.)
"""One SQLite file opened through `sqlean` (so sqlite-vec can load), driven from asyncio by aiosqlite.

The standard `sqlite3` module of many Python builds cannot load extensions (FACTS.md), so the connection is
made by `sqlean` and handed to aiosqlite as its connector. Units of work are plain synchronous functions that
receive the raw connection and run on aiosqlite's worker thread in one hop (`Database.run`): a transaction
is then never interleaved with statements of another coroutine sharing the connection.

Beside it, a second, read-only connection on a thread of its own (`Database.aside`) runs reads that can go in
parallel with the main thread's, so one search uses both cores: the main thread scores passages while the
aside thread scores whole notes, or scans the vectors. WAL lets both read at once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import sqlean

from server.store.migrations import NewerDatabase, apply_migrations
from server.store.vectors_sql import MMAP_BYTES, VEC_TABLE
from vault_sync.errors import StoreTrouble
from vault_sync.heap import release_free_heap

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = sqlean.Connection
BUSY_TIMEOUT_MS = 10_000
# How long a failed write's reason stays in the status after a write succeeds (`Database.trouble`): twice the
# live sync's longest wait between two attempts, so a disk still full shows as such between them.
TROUBLE_SHOWN = 120.0
# Page caches (issue 15). SQLite's page cache duplicates the operating system's file cache: a page it does not
# hold costs a read() that copies it from the OS (microseconds), not a disk read. What a search reads again and
# again is the interior pages of the b-trees it descends (the FTS index, the node and edge indexes): 0.54% of a
# 10,000-note database's pages. So each connection caches about that share of the file (1/128, with headroom),
# at least CACHE_MIN_KIB and at most CACHE_MAX_KIB. Measured at 10,000 notes: search latency is the same with
# 0.5, 2 and 16 MiB per connection (the 16/8 MiB caps filled to 24 MiB through a session), and the first sync's
# rate too.
CACHE_SHARE = 128  # cache one page in this many of the file
CACHE_MIN_KIB = 1_024
CACHE_MAX_KIB = 16_384
# Temp tables (the sync stages a batch's note bodies and passages in them) live in the page cache and spill to
# an unnamed temp file beyond the temp schema's cache (SQLite's default, 2 MiB). In memory (`temp_store =
# memory`) they can never leave it: a first sync at 10,000 notes held 16 MiB of staged text to its end.
TEMP_STORE = "file"
# A burst of big writes (a first sync, a folder of notes arriving) re-reads the FTS segments it merges from one
# batch to the next: with a ~2 MiB cache the first sync at 10,000 notes took ~20% more CPU (page reads and
# spills). So a write unit that runs WRITE_BURST_S or longer gives the main connection WRITE_CACHE_KIB until
# the writes have stopped for BURST_IDLE_S; the next unit after that returns it to its size. An edit of a
# note (milliseconds) never starts a burst.
WRITE_BURST_S = 0.25
WRITE_CACHE_KIB = 16_384
BURST_IDLE_S = 5.0


def cache_kib(db_bytes: int) -> int:
    """The page cache for a connection to a database file of `db_bytes`: its hot interior pages (see above)."""
    return max(CACHE_MIN_KIB, min(CACHE_MAX_KIB, db_bytes // CACHE_SHARE // 1024))


@dataclass(frozen=True)
class VectorSupport:
    """Whether sqlite-vec loaded, and if not, why (reported by status; search degrades to full text)."""

    ok: bool
    version: str | None = None
    reason: str | None = None


def vec_library() -> str:
    """The path of the sqlite-vec library bundled in the `sqlite_vec` package, found without importing it:
    its `__init__` imports numpy whenever numpy is installed (~12 MB of memory in every process of an install
    with the [local] extra), and all we need of it is where `vec0` lies."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the sqlite-vec package is not installed; reinstall engrama-vault")
    return os.path.join(next(iter(spec.submodule_search_locations)), "vec0")


def _load_vec(conn: sqlean.Connection, extension: str | None) -> VectorSupport:
    try:
        conn.enable_load_extension(True)
        try:
            conn.load_extension(extension or vec_library())
        finally:
            conn.enable_load_extension(False)
        (version,) = conn.execute("select vec_version()").fetchone()
        return VectorSupport(ok=True, version=version)
    except Exception as exc:  # any failure here only costs vector search; say why and carry on
        return VectorSupport(ok=False, reason=f"sqlite-vec could not be loaded: {exc}")


def _enable_wal(conn: sqlean.Connection) -> None:
    """Switch the file to WAL, waiting out another process doing the same.

    Switching needs an exclusive lock and SQLite reports SQLITE_BUSY for it without calling the busy
    handler, so two servers opening a new database at once (Claude Desktop and Cursor) would fail; retry."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.01
    while True:
        try:
            if conn.execute("pragma journal_mode").fetchone()[0].lower() == "wal":
                return
            conn.execute("pragma journal_mode = wal")
            return
        except sqlean.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


DatabaseError = sqlean.DatabaseError  # what SQLite raises (locked, disk full, damaged file ...)


class DatabaseProblem(Exception):
    """The database file cannot be used as it is; the message says what to do (the vault is never at risk: the
    database is derived from it)."""


class DatabaseTrouble(DatabaseProblem, StoreTrouble):
    """A write to the database failed for a reason of its disk or file, not of what was written (`trouble_of`):
    every write fails alike until the person fixes it. The message says what to do."""


# What SQLite says when its file or disk cannot take a write, whatever is written (sqlite3.c's error strings).
_TROUBLES = ("full", "disk i/o", "readonly", "read-only", "not a database", "malformed", "corrupt")


def trouble_of(exc: Exception, path: Path | None = None) -> str | None:
    """What to do about a failed write when the failure is the database file's or its disk's (full, read-only,
    an I/O error, damaged), explained; None for any other failure (a lock held too long, a bug)."""
    if not isinstance(exc, sqlean.DatabaseError):
        return None
    text = str(exc).lower()
    return explain_database_error(exc, path) if any(t in text for t in _TROUBLES) else None


def explain_database_error(exc: Exception, path: Path | None = None) -> str:
    """What a failure of SQLite means for the person, and what to do about it."""
    the = f"the database {path}" if path is not None else "the graph database"
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        what = (
            f"{the} is locked by another program (a database browser or a backup tool?) that kept it for more "
            f"than {BUSY_TIMEOUT_MS // 1000} s; close that program and try again"
        )
    elif "full" in text:
        what = f"the disk holding {the} is full; free some space and try again"
    elif "disk i/o" in text:
        what = (
            f"{the} could not be written (disk I/O error: a full disk, a limit on file sizes, or a failing "
            "drive or share); free some space or check the drive"
        )
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        what = (
            f"{the} is damaged ({exc}); move it aside or delete it, and engrama rebuilds it from the vault at "
            "the next start (your notes hold everything it needs; approved and dismissed insights too)"
        )
    elif "readonly" in text or "read-only" in text or "unable to open" in text:
        what = f"{the} cannot be opened for writing ({exc}); check the permissions of the file and its folder"
    else:
        what = f"{the} failed: {exc}"
    return what


def connect_read_only(path: Path) -> sqlean.Connection:
    """A connection that can only read the database file at `path` (another process's, e.g. reflect's worker),
    set up like the store's own (`_connect`)."""
    return _connect(path, read_only=True)


def _connect(path: Path, *, read_only: bool = False) -> sqlean.Connection:
    """A connection usable from any one thread at a time, in autocommit mode, with rows by name, waiting up to
    the busy timeout for locks, and temp tables in the (bounded) page cache."""
    conn = sqlean.connect(
        path.resolve().as_uri() + "?mode=ro" if read_only else str(path),
        uri=read_only,
        check_same_thread=False,
        isolation_level=None,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    conn.row_factory = sqlean.Row
    conn.execute(f"pragma busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute(f"pragma temp_store = {TEMP_STORE}")
    return conn


def size_cache(conn: sqlean.Connection) -> int:
    """Set the connection's page cache for the file as it is now (`cache_kib`); returns the size in KiB."""
    pages = conn.execute("pragma page_count").fetchone()[0]
    page_size = conn.execute("pragma page_size").fetchone()[0]
    kib = cache_kib(pages * page_size)
    conn.execute(f"pragma cache_size = -{kib}")
    return kib


def connect_sync(
    path: Path, *, load_vec: bool = True, vec_extension: str | None = None
) -> tuple[sqlean.Connection, VectorSupport]:
    """Open the database file with our pragmas, sqlite-vec if possible, and all migrations applied.

    `vec_extension` overrides the sqlite-vec library path (tests use a missing one to see the fallback)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseProblem(
            f"cannot create the database folder {path.parent}: {exc.strerror or exc}; pass --db (or set "
            "ENGRAMA_DB_PATH) with a file in a folder you may write"
        ) from exc
    _require_ours(path)
    try:
        return _open(path, load_vec, vec_extension)
    except sqlean.DatabaseError as exc:
        raise DatabaseProblem(explain_database_error(exc, path)) from exc
    except NewerDatabase as exc:
        raise DatabaseProblem(
            f"the database {path} was upgraded by a newer engrama-vault ({exc}); update engrama-vault, or "
            "move the file aside and this version rebuilds it from the vault at the next start"
        ) from exc


_SQLITE_HEADER = b"SQLite format 3\x00"
_NOT_DATABASES = frozenset({".md", ".markdown", ".txt", ".canvas", ".pdf", ".json", ".yaml", ".yml"})


def _require_ours(path: Path) -> None:
    """Refuse, changing nothing, a `--db` path that is not engrama's database: a folder, a file of another kind
    (a note given by mistake was called damaged, with the advice to delete it: a file named as a note is not
    taken for a damaged database), or another program's SQLite
    database (it was switched to WAL and given engrama's tables; review 23i). A new or empty file, or a
    database with engrama's migrations table or no table at all, is engrama's to use."""
    what = "pass --db (or set ENGRAMA_DB_PATH) with the path of engrama's database file, or of a new one"
    if path.is_dir():
        raise DatabaseProblem(f"{path} is a folder, not a database file; {what}")
    try:
        with open(path, "rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError:
        return  # unreadable: opening it says why
    if not head:
        return
    if head != _SQLITE_HEADER:
        if path.suffix.lower() in _NOT_DATABASES:
            raise DatabaseProblem(
                f"{path} is a {path.suffix} file, not a database; nothing was changed. {what[0].upper()}{what[1:]}"
            )
        return  # a database file mangled (by a sync client, say): opening it says it is damaged, and what to do
    try:
        conn = sqlean.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
            columns = {r[1] for r in conn.execute("pragma table_info(schema_migrations)")}
        finally:
            conn.close()
    except sqlean.DatabaseError:
        return  # damaged: opening it says so
    # Many migration tools keep a `schema_migrations` table (Rails, dbmate, ...): engrama's has these columns
    # (review 23j: a Rails database was still switched to WAL).
    if tables and not {"number", "name", "applied_at"} <= columns:
        shown = ", ".join(sorted(tables)[:4]) + (", ..." if len(tables) > 4 else "")
        raise DatabaseProblem(
            f"{path} is another program's database (its tables: {shown}), not engrama's; nothing was changed. "
            f"{what[0].upper()}{what[1:]}"
        )


def _open(path: Path, load_vec: bool, vec_extension: str | None) -> tuple[sqlean.Connection, VectorSupport]:
    conn = _connect(path)
    try:
        return conn, _prepare(conn, load_vec, vec_extension)
    except BaseException:
        conn.close()
        raise


WAL_KEPT_BYTES = 4 * 1024 * 1024


def _prepare(conn: sqlean.Connection, load_vec: bool, vec_extension: str | None) -> VectorSupport:
    _enable_wal(conn)
    conn.execute("pragma synchronous = normal")
    # Checkpoints every ~40 MiB of WAL instead of every 4 MiB: a first sync writes hundreds of MiB.
    conn.execute("pragma wal_autocheckpoint = 10000")
    # Once checkpointed, the WAL file is cut back to this instead of keeping the size of the largest burst
    # (40-70 MiB after a first sync or a big checkout, for as long as the server runs).
    conn.execute(f"pragma journal_size_limit = {WAL_KEPT_BYTES}")
    conn.execute("pragma foreign_keys = on")
    vec = (
        _load_vec(conn, vec_extension) if load_vec else VectorSupport(ok=False, reason="sqlite-vec disabled")
    )
    apply_migrations(conn)
    size_cache(conn)  # after the migrations, which may have rewritten the file
    return vec


def connect_aside(path: Path, *, vec: bool, vec_extension: str | None = None) -> sqlean.Connection:
    """A read-only connection to an already open database (no migrations, no WAL switch), with sqlite-vec
    when `vec`. It reads through mmap once vectors are stored (`map_when_vectors`)."""
    conn = _connect(path)
    size_cache(conn)
    conn.execute("pragma query_only = 1")  # nothing run aside can write, whatever it is handed
    if vec:
        loaded = _load_vec(conn, vec_extension)
        if not loaded.ok:
            log.warning("the aside connection has no vector search: %s", loaded.reason)
    return conn


def _file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`; None when there is none (other failures raise OSError)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def map_when_vectors(conn: sqlean.Connection) -> bool:
    """Read the file through mmap once it holds passage vectors; True when it now does.

    vec0 reads every vector of a query, ~40% cheaper through mmap than through the page cache; but every
    page read through mmap also counts in the process's RSS, FTS pages included (76 MiB after 50 full-text
    searches at 10,000 notes). So a database without vectors is read through the capped page cache."""
    if conn.execute("select 1 from sqlite_master where name = ?", (VEC_TABLE,)).fetchone() is None:
        return False
    conn.execute(f"pragma mmap_size = {MMAP_BYTES}")
    return True


class Database:
    """The async handle on one database file. Open with `await Database.open(path)`."""

    def __init__(
        self, path: Path, conn: aiosqlite.Connection, vec: VectorSupport, vec_extension: str | None = None
    ) -> None:
        self.path = path
        self._conn = conn
        self.vec = vec
        self._vec_extension = vec_extension
        self._aside_pool: ThreadPoolExecutor | None = None
        self._aside_conn: sqlean.Connection | None = None
        self._aside_lock = threading.Lock()
        self._aside_mapped = False
        self._bursting = False  # the main connection has WRITE_CACHE_KIB (see there)
        self._last_write = 0.0
        self._cache_kib = CACHE_MIN_KIB  # the main connection's own size, read once it is open (`open`)
        try:
            self._file = _file_id(path)  # which file this handle opened (`check_file`)
        except OSError:
            self._file = None  # cannot be told: never taken for lost
        self.lost: str | None = None  # set once the file at `path` is no longer that one
        # Why the last write failed when its disk or file refused it (full, read-only, an I/O error, damaged)
        # and when (time.monotonic()); whether a write succeeded since (see `trouble`).
        self._trouble: str | None = None
        self._trouble_at = 0.0
        self._trouble_ended = True

    @classmethod
    async def open(cls, path: Path, *, load_vec: bool = True, vec_extension: str | None = None) -> Database:
        holder: dict[str, VectorSupport] = {}

        def connector() -> sqlean.Connection:
            conn, vec = connect_sync(path, load_vec=load_vec, vec_extension=vec_extension)
            holder["vec"] = vec
            return conn

        conn = aiosqlite.Connection(connector, iter_chunk_size=64)
        try:
            await conn
        except BaseException:
            # aiosqlite stops its thread after a failed connect without waiting; wait for it here, so it does
            # not report to an event loop that a failed start-up has closed by then (a stray traceback).
            thread = getattr(conn, "_thread", None)
            if thread is not None:
                await asyncio.to_thread(thread.join, 5.0)
            raise
        vec = holder["vec"]
        if not vec.ok:
            log.warning("vector search unavailable: %s", vec.reason)
        db = cls(path, conn, vec, vec_extension)
        db._cache_kib = await db.run(lambda c: -c.execute("pragma cache_size").fetchone()[0])
        return db

    def trouble(self, *, caught_up: bool = False) -> str | None:
        """Why writes fail (the disk holding the file is full, ...) and what to do; None when they do not. Kept
        for TROUBLE_SHOWN seconds after the last failure (on a full disk a small write may still fit between two
        that do not), or, once a write succeeded, until the caller says that nothing waits to be written
        (`caught_up`: the live sync has taken in every change)."""
        if self._trouble is None:
            return None
        # A process that writes nothing meanwhile (an idle follower) must not report it for good: a failure that
        # old says nothing of now (the live sync tries at least once a minute, and says so again if it fails).
        stale = time.monotonic() - self._trouble_at >= TROUBLE_SHOWN
        if stale or (self._trouble_ended and caught_up):
            self._trouble = None
        return self._trouble

    def check_file(self) -> str | None:
        """None while the file at `path` is the one this handle opened. Once it was deleted or replaced (the
        person reset the graph, a backup or a sync client put another file there), what to do about it, and
        every later call fails with that message: this handle reads and writes a file nobody else sees, so a
        second process on the new file would wait in vain for this one's writes, or both would hold the vault."""
        if self.lost is not None or self._file is None:
            return self.lost
        try:
            now = _file_id(self.path)
        except OSError:  # cannot be told now (a share gone stale, a dropped mount): not a loss
            return None
        if now != self._file:
            self.lost = (
                f"the database {self.path} was deleted or replaced while engrama-vault was running (nothing in "
                "the vault is lost); restart the engrama server (quit and reopen the assistant, or restart it "
                "in the client's MCP settings) and it rebuilds the graph from the vault"
            )
        return self.lost

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` on the database thread as one unit (aiosqlite's own executor hop)."""
        if self.lost is not None:
            raise DatabaseProblem(self.lost)
        # `_execute` is aiosqlite's one entry point for running a callable on its thread; it has been stable
        # across releases, and the version range in pyproject pins it.
        return await self._conn._execute(self._unit, self._conn._conn, fn, *args)  # type: ignore[attr-defined]

    def _unit(self, conn: sqlean.Connection, fn: Callable[..., T], *args: Any) -> T:
        self._settle_cache(conn)
        return fn(conn, *args)

    async def transaction(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` inside BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error)."""
        return await self.run(self._write_unit, fn, *args)

    def _write_unit(self, conn: sqlean.Connection, fn: Callable[..., T], *args: Any) -> T:
        started = time.monotonic()
        try:
            result = in_transaction(conn, fn, *args)
        except sqlean.DatabaseError as exc:
            if (what := trouble_of(exc, self.path)) is None:
                raise
            self._trouble, self._trouble_at, self._trouble_ended = what, time.monotonic(), False
            raise DatabaseTrouble(what) from exc
        else:
            self._trouble_ended = True
            return result
        finally:
            self._last_write = now = time.monotonic()
            if now - started >= WRITE_BURST_S and not self._bursting:
                conn.execute(f"pragma cache_size = -{max(WRITE_CACHE_KIB, self._cache_kib)}")
                self._bursting = True

    async def settle_after_burst(self) -> None:
        """Once a burst of writes has stopped for BURST_IDLE_S, settle what it left (`_settle_cache`) in a unit of
        its own, so that no search pays for it (the live sync calls this once a second)."""
        if self._burst_over():
            await self.run(self._settle_cache)

    def _burst_over(self) -> bool:
        return self._bursting and time.monotonic() - self._last_write >= BURST_IDLE_S

    def _settle_cache(self, conn: sqlean.Connection) -> None:
        """After a burst of writes has stopped for BURST_IDLE_S: the main connection's cache to its size."""
        if self._burst_over():
            self._bursting = False
            conn.execute(f"pragma cache_size = -{self._cache_kib}")  # SQLite frees the pages beyond it
            release_free_heap()
            # The burst's frames go into the database now, without waiting for any reader (PASSIVE): the next
            # write then starts the WAL over, cut back to WAL_KEPT_BYTES, instead of the file keeping the
            # size the burst gave it until ~40 MiB more are written.
            conn.execute("pragma wal_checkpoint(PASSIVE)")

    def aside(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Start the read-only `fn(conn, *args)` on the aside connection and thread; returns its future at once.

        For reads that run in parallel with a unit on the main thread, which may wait for the result (a search
        does: `future.result()` inside its unit). `fn` runs in one read transaction, a consistent snapshot,
        which may be one commit older or newer than that of the unit beside it. Aside units run one at a time.
        """
        with self._aside_lock:
            if self._aside_pool is None:
                self._aside_pool = ThreadPoolExecutor(1, thread_name_prefix="engrama-db-aside")
            return self._aside_pool.submit(self._run_aside, fn, args)

    def _run_aside(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._aside_conn
        if conn is None:  # opened on first use, on the aside thread
            conn = self._aside_conn = connect_aside(
                self.path, vec=self.vec.ok, vec_extension=self._vec_extension
            )
        if not self._aside_mapped:
            self._aside_mapped = map_when_vectors(conn)
        conn.execute("begin")
        try:
            return fn(conn, *args)
        finally:
            conn.execute("rollback")  # a read: nothing to keep

    async def close(self) -> None:
        with self._aside_lock:
            pool, self._aside_pool = self._aside_pool, None
        if pool is not None:
            await asyncio.get_running_loop().run_in_executor(pool, self._close_aside)
            pool.shutdown(wait=True)
        await self._conn.close()

    def _close_aside(self) -> None:
        if self._aside_conn is not None:
            self._aside_conn.close()
            self._aside_conn = None


def in_transaction(conn: sqlean.Connection, fn: Callable[..., T], *args: Any) -> T:
    """Synchronous transaction helper, also used directly by code already on the database thread."""
    conn.execute("begin immediate")
    try:
        result = fn(conn, *args)
        conn.execute("commit")
    except BaseException:
        rollback(conn)
        raise
    return result


def rollback(conn: sqlean.Connection) -> None:
    """Roll back the transaction under way, if any. SQLite has already rolled it back itself after some
    failures (a full disk, an I/O error): a second ROLLBACK would then fail and hide what went wrong."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("rollback")
    except sqlean.DatabaseError as exc:  # the failure being raised says more than this one
        log.warning("could not roll back after a failed write: %s", exc)
