"""Stopping the stdio server on SIGTERM or Ctrl-C without cutting its teardown short.

A stop signal cancels the task that runs the server's lifespan, at its next await, so the lifespan closes the
watcher, the embedding worker, the vault lease and the database in order (each teardown is shielded from the
cancellation). Only then does the process exit. It exits at once rather than returning, because the MCP SDK
reads stdin in a worker thread blocked in read(): a normal return would wait for the client to close the pipe.

A second signal while the teardown runs ends the process immediately (exit status 1).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import NoReturn

from vault_sync import orphans

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class SignalStop:
    """Installed by the lifespan (`installed`), finished by it after the teardown (`after_teardown`)."""

    def __init__(self, signals: Iterable[int] = STOP_SIGNALS) -> None:
        self.signals = tuple(signals)
        self.received: int | None = None

    @asynccontextmanager
    async def installed(self) -> AsyncIterator[None]:
        """Route the stop signals to the current task (the lifespan's) while inside."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        routed = []
        for signum in self.signals:
            try:
                loop.add_signal_handler(signum, self._on_signal, signum, task)
            except (NotImplementedError, RuntimeError, ValueError) as exc:
                # Windows event loops have no signal handlers (and no SIGTERM to route): the client ends the
                # server by closing stdin, which closes everything in order too.
                log.debug("cannot route %s to the server's task (%s)", signal.Signals(signum).name, exc)
            else:
                routed.append(signum)
        try:
            yield
        finally:
            for signum in routed:
                loop.remove_signal_handler(signum)

    def _on_signal(self, signum: int, task: asyncio.Task[object]) -> None:
        if self.received is not None:
            log.warning("second stop signal: stopping at once")
            exit_now(1)
        self.received = signum
        log.info("%s received: closing the watcher, the lease and the database", signal.Signals(signum).name)
        task.cancel()

    def after_teardown(self) -> None:
        """Called once everything is closed: exit now if a signal asked for the stop, else return."""
        if self.received is None:
            return
        log.info("stopped by signal")
        exit_now(0)


def exit_now(code: int) -> NoReturn:
    """End the process without the interpreter's shutdown (a thread blocked reading stdin would hold it), after
    what must not be skipped: one last look at the files a tool write just replaced, so an editor's save into
    one is kept (`vault_sync.orphans`; `os._exit` runs no `atexit` handler), and the logs flushed."""
    try:
        orphans.WATCHER.settle_all()
    except Exception:
        log.exception("the last look at replaced files failed")
    logging.shutdown()
    os._exit(code)
