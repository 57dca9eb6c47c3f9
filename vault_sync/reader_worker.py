"""The note reader process's side of `reader_process.py`: a loop that runs the calls its parent sends.

It is started as `python -c BOOT` (see `reader_process.BOOT`), not with `multiprocessing`: a spawned
multiprocessing worker re-imports the parent's main module and carries multiprocessing, concurrent.futures and
asyncio (with ssl) for its queues, and needs a resource tracker process beside it, about 20 MiB for a sync's
two readers (issue 15). This module imports only what reading a note needs; keep it so (a test holds it).

The protocol is pickles over the process's pipes: the parent writes its `sys.path`, then the reader's
settings, then `(function, args)` calls; the worker answers each call with `(True, value)` or
`(False, exception)`. Only its parent holds the other ends of the pipes, so nothing else can send it a call.
End of input (the parent closed it, or died, even by SIGKILL) ends the worker once the call in hand is done:
a batch being read always finishes its writes, and no worker outlives its parent. `serve` is that loop for
any worker process: reflect's graph work runs in one too (`server.reflect.worker`), with its own settings.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

from vault_sync.heap import release_free_heap
from vault_sync.model import FileState
from vault_sync.readers import NoteRead, NoteReader
from vault_sync.writer import remember_no_saves

_reader: NoteReader | None = None  # set once by `main` from the parent's settings


def read_batch(paths: list[str], known: dict[str, FileState], dry_run: bool) -> list[NoteRead]:
    """The call a sync sends: read a part of a batch with this process's reader."""
    assert _reader is not None, "the reader process was not initialised"
    return _reader.read_batch(paths, known, dry_run)


def read_only(mapping: dict) -> MappingProxyType:
    """A profile's read-only table again, on arrival (`reader_process.pickled_rules`)."""
    return MappingProxyType(mapping)  # the type itself cannot be pickled by name ("mappingproxy")


def main() -> None:
    """Read notes for the parent until it closes our input."""
    serve(_start_reader)


def _start_reader(settings: tuple[str, bytes, bool, int, float]) -> None:
    root, rules, writable, level, settle = settings
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    global _reader
    _reader = NoteReader(Path(root), pickle.loads(rules), writable, settle)
    remember_no_saves()


def serve(setup: Callable[[Any], None]) -> None:
    """A worker process's loop (any worker's, see `reader_process.boot`): `setup` the settings the parent sends
    first, then serve its calls until it closes our input."""
    answers = os.fdopen(os.dup(1), "wb")  # the answers' own descriptor: fd 1 is pointed at stderr below
    try:
        os.dup2(
            2, 1
        )  # at the descriptor level, so even C code cannot reach stdout (the MCP wire under serve)
    except OSError:  # no stderr to share: drop the output instead
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 1)
    sys.stdout = sys.stderr
    calls = sys.stdin.buffer
    setup(pickle.load(calls))
    while True:
        try:
            fn, args = pickle.load(calls)
        except EOFError:
            return
        if not _answer(answers, fn, args):
            return
        release_free_heap()  # while the parent applies what we sent: a part of a batch is a burst


def _answer(answers: BinaryIO, fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """Run one call and send its outcome; False when the parent is gone (nobody to answer)."""
    try:
        outcome: tuple[bool, Any] = (True, fn(*args))
    except Exception as exc:  # the parent re-raises it as the call's error
        outcome = (False, exc)
    try:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an exception or value that cannot travel: send what it said
        data = pickle.dumps((False, RuntimeError(traceback.format_exc())))
    try:
        answers.write(data)
        answers.flush()
    except (BrokenPipeError, OSError):
        return False
    return True
