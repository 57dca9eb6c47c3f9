"""Read notes in worker processes, so a big sync parses on other cores while the database applies.

Reading a note (parse, chunk, and the safe id write) is Python work that holds the GIL; so is much of applying
it to SQLite. In one process the threads of a big sync take turns; in separate processes they run side by
side. Starting a process costs a fraction of a second, so only big syncs use them (see `VaultSync`); the
watcher's single paths keep reading in a thread. Two workers, each reading half of every batch, beat one
even on two cores (measured on a 10,000-note vault): a worker waits on the disk for part of each id write.

Workers are started with `spawn` (never `fork`: the parent runs threads and an event loop), which imports the
program's main module in each worker, so that module must guard its entry point with
`if __name__ == "__main__"` (the `engrama-vault` script does). A worker's stdout is pointed at stderr before it
does anything, because stdout is the MCP wire under `engrama-vault serve`. When a worker dies, the batch being
read fails with `ReaderStopped` and the caller reports its notes; no note is ever left half-written (every
write is an atomic replace), and the next sync picks them up.
"""

from __future__ import annotations

import asyncio
import copyreg
import io
import logging
import multiprocessing
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import MappingProxyType, TracebackType

from vault_sync.model import FileState
from vault_sync.readers import NoteRead, NoteReader, NoteRules

log = logging.getLogger(__name__)

_reader: NoteReader | None = None  # the worker process's reader, set once by `_start_worker`
_reading = threading.Lock()  # held by a worker while it reads a batch
PARENT_CHECK = 1.0  # seconds between a worker's checks that the process that started it is still there


class ReaderStopped(RuntimeError):
    """A worker process reading notes died (killed, out of memory); the batch it was reading is not synced."""


def pickled_rules(rules: NoteRules) -> bytes | None:
    """`rules` pickled for the worker, or None when they cannot travel (then the caller reads in-process).

    Profiles keep their tables in read-only `MappingProxyType` views, which pickle refuses; they travel as
    the plain mappings they show and become read-only views again in the worker."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, MappingProxyType: _reduce_proxy}
    try:
        pickler.dump(rules)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        log.debug("note rules cannot be sent to a reader process (%s); reading in-process", exc)
        return None
    return buffer.getvalue()


def _reduce_proxy(proxy: MappingProxyType) -> tuple[Callable[[dict], MappingProxyType], tuple[dict]]:
    return _read_only, (dict(proxy),)


def _read_only(mapping: dict) -> MappingProxyType:
    return MappingProxyType(mapping)  # the type itself cannot be pickled by name ("mappingproxy")


class ReaderProcess:
    """Worker processes that run `NoteReader.read_batch`; use as an async context manager."""

    def __init__(
        self, root: Path, rules: bytes, writable: bool, workers: int | None = None, *, settle: float = 0.0
    ) -> None:
        level = logging.getLogger("vault_sync").getEffectiveLevel()
        self.workers = workers or min(2, _usable_cpus())
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(root, rules, writable, level, settle),
        )

    async def read_batch(
        self, paths: Sequence[str], known: Mapping[str, FileState], dry_run: bool
    ) -> list[NoteRead]:
        """Read a batch, split between the workers, in order; raises `ReaderStopped` when a worker dies."""
        wanted = {path: known[path] for path in paths if path in known}  # not the whole vault's states
        loop = asyncio.get_running_loop()
        step = max(1, -(-len(paths) // self.workers))
        parts = [list(paths[i : i + step]) for i in range(0, len(paths), step)]
        done = await asyncio.gather(
            *(loop.run_in_executor(self._pool, _read_in_worker, part, wanted, dry_run) for part in parts),
            return_exceptions=True,  # wait for every part, so no failure is left unretrieved
        )
        for result in done:
            if isinstance(result, BrokenProcessPool):
                raise ReaderStopped(
                    "the note reader process stopped unexpectedly (killed, or out of memory?) before this note "
                    "was synced; the note is whole, and the next sync picks it up"
                ) from result
            if isinstance(result, BaseException):
                raise result
        return [read for part in done if isinstance(part, list) for read in part]

    async def __aenter__(self) -> ReaderProcess:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Wait for the workers to exit, even after a failure or a cancel: the caller has already waited for the
        # batch in flight (so no queued batch is started and this is quick), and a server that exits right
        # after this must not leave workers behind. `cancel_futures` drops batches nobody will apply.
        await asyncio.to_thread(self._pool.shutdown, wait=True, cancel_futures=kind is not None)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on this platform
        return os.cpu_count() or 1


def _start_worker(root: Path, rules: bytes, writable: bool, level: int, settle: float) -> None:
    """Worker set-up: stdout goes to stderr (stdout is the MCP wire), logs to stderr, build the reader."""
    try:
        os.dup2(2, 1)  # at the descriptor level, so even C code and subprocesses cannot reach the wire
    except OSError:  # no stderr to share: drop the output instead
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    global _reader
    _reader = NoteReader(root, pickle.loads(rules), writable, settle)
    threading.Thread(
        target=_exit_with_parent, args=(os.getppid(),), name="engrama-parent-watch", daemon=True
    ).start()


def _read_in_worker(paths: list[str], known: dict[str, FileState], dry_run: bool) -> list[NoteRead]:
    assert _reader is not None, "the reader process was not initialised"
    with _reading:
        return _reader.read_batch(paths, known, dry_run)


def _exit_with_parent(parent: int, every: float = PARENT_CHECK) -> None:
    """End this worker once its parent is gone (killed, even by SIGKILL), but never in the middle of a batch.

    Without this an orphaned worker would wait forever: it holds both ends of the pool's task queue itself, so
    it never sees end-of-file there."""
    while True:
        time.sleep(every)
        if os.getppid() != parent:
            with _reading:  # the batch in hand finishes its writes first
                os._exit(0)
