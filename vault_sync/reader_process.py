"""Read notes in worker processes, so a big sync parses on other cores while the database applies.

Reading a note (parse, chunk, and the safe id write) is Python work that holds the GIL; so is much of applying
it to SQLite. In one process the threads of a big sync take turns; in separate processes they run side by
side. Starting a process costs a fraction of a second, so only big syncs use them (see `VaultSync`); the
watcher's single paths keep reading in a thread. Two workers, each reading half of every batch, beat one
even on two cores (measured on a 10,000-note vault): a worker waits on the disk for part of each id write.

Each worker is a plain child process (`python -c BOOT`) running `reader_worker.main`, talking pickles over its
pipes: it imports only what reading needs (about 21 MiB, against 36 for a multiprocessing worker, which also
needs a 12 MiB resource tracker process beside it; issue 15). Its stdout is pointed at stderr before it does
anything, because stdout is the MCP wire under `engrama-vault serve`. When a worker dies, the batch being read
fails with `ReaderStopped` and the caller reports its notes; no note is ever left half-written (every write
is an atomic replace), and the next sync picks them up. A worker ends when its input closes: when the sync
is done, or when its parent dies, after the batch in hand. `Worker` is any such process (`boot(module)` runs
that module's `main`, a `reader_worker.serve` loop): reflect reads and matches the graph in one too.
"""

from __future__ import annotations

import asyncio
import contextlib
import copyreg
import io
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar

from vault_sync import reader_worker
from vault_sync.model import FileState
from vault_sync.readers import NoteRead, NoteRules

log = logging.getLogger(__name__)

T = TypeVar("T")


def boot(module: str) -> str:
    """The `python -c` program of a worker process that runs `module.main()` (a `reader_worker.serve` loop).

    Its first read is the parent's sys.path, so it imports our modules from where the parent does. It ignores
    SIGINT: a Ctrl-C in the terminal reaches the whole process group, and the parent, which handles it, ends
    its workers by closing their input (review 23i: each worker printed a KeyboardInterrupt traceback, which
    looked like a crash in the middle of writing notes)."""
    return (
        "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        f"import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer); from {module} import main; main()"
    )


BOOT = boot("vault_sync.reader_worker")
_read_in_worker = reader_worker.read_batch  # the call sent for each part of a batch
STOPPED = (
    "the note reader process stopped unexpectedly (killed, or out of memory?) before this note was synced; "
    "the note is whole, and the next sync picks it up"
)


class WorkerStopped(RuntimeError):
    """A worker process did not answer a call: it could not start, or it died (killed, out of memory)."""


class ReaderStopped(WorkerStopped):
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
    return reader_worker.read_only, (dict(proxy),)  # rebuilt by the worker's own module (no asyncio there)


class ReaderProcess:
    """Worker processes that run `NoteReader.read_batch`; use as an async context manager."""

    def __init__(
        self, root: Path, rules: bytes, writable: bool, workers: int | None = None, *, settle: float = 0.0
    ) -> None:
        level = logging.getLogger("vault_sync").getEffectiveLevel()
        setup = (str(root), rules, writable, level, settle)
        self._workers = [Worker(BOOT, setup) for _ in range(workers or min(2, _usable_cpus()))]
        self.workers = len(self._workers)

    async def read_batch(
        self, paths: Sequence[str], known: Mapping[str, FileState], dry_run: bool
    ) -> list[NoteRead]:
        """Read a batch, split between the workers, in order; raises `ReaderStopped` when a worker dies."""
        wanted = {path: known[path] for path in paths if path in known}  # not the whole vault's states
        step = max(1, -(-len(paths) // self.workers))
        parts = [list(paths[i : i + step]) for i in range(0, len(paths), step)]
        done = await asyncio.gather(
            *(
                asyncio.to_thread(_call, worker, _read_in_worker, part, wanted, dry_run)
                for worker, part in zip(self._workers, parts, strict=False)
            ),
            return_exceptions=True,  # wait for every part, so no failure is left unretrieved
        )
        for result in done:
            if isinstance(result, BaseException):
                raise result
        return [read for part in done if isinstance(part, list) for read in part]

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` in the first worker (`fn` and `args` must pickle; `fn` by its module's name)."""
        return await asyncio.to_thread(_call, self._workers[0], fn, *args)

    async def __aenter__(self) -> ReaderProcess:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Wait for the workers to exit, even after a failure or a cancel: the caller has already waited for the
        # batch in flight (so this is quick), and a server that exits right after must not leave workers behind.
        await asyncio.gather(*(asyncio.to_thread(worker.close) for worker in self._workers))


def _call(worker: Worker, fn: Callable[..., T], *args: Any) -> T:
    try:
        return worker.call(fn, *args)
    except WorkerStopped as exc:
        raise ReaderStopped(STOPPED) from exc


class Worker:
    """One worker process (`python -c boot`) and its two pipes, sent `setup` first (see `reader_worker.serve`).

    `call` is blocking (run it in a thread), one call at a time; `close` ends the process once its call in hand
    is done, `kill` at once."""

    def __init__(self, boot: str, setup: object) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True
        )
        try:
            self._send(list(sys.path))
            self._send(setup)
        except OSError:  # it did not start (or died at once): the first call says so (`WorkerStopped`)
            pass

    @property
    def returncode(self) -> int | None:
        """How the process ended (negative: the signal that killed it), None while it runs."""
        return self._proc.poll()

    def _send(self, message: object) -> None:
        assert self._proc.stdin is not None
        pickle.dump(message, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self._proc.stdin.flush()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the process (`fn` and `args` must pickle); its exception is raised here."""
        assert self._proc.stdout is not None
        try:
            self._send((fn, args))
            ok, value = pickle.load(self._proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise WorkerStopped("the worker process stopped before it answered") from exc
        if not ok:
            raise value
        return value

    def close(self) -> None:
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):  # the worker is already gone
                    pipe.close()
        self._proc.wait()

    def kill(self) -> None:
        """End the process now (a call in flight then fails with `WorkerStopped`)."""
        with contextlib.suppress(OSError):
            self._proc.kill()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on this platform
        return os.cpu_count() or 1
