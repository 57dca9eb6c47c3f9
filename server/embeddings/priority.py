"""Query-time embedding goes before the background backfill (shared by ondemand.py and worker.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from server.runtime import Runtime

PRIORITY = "embedding_priority"  # rt.state key
FIRST_GUESS = 0.05  # seconds per passage until one is measured (MiniLM int8, 120 words, one thread)


class Priority:
    """`foreground()` marks query-time embedding as running; the backfill awaits `idle` before each batch.

    It also keeps the measured seconds per passage, so query-time work can fit a batch into its budget."""

    def __init__(self) -> None:
        self.busy = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.seconds_per_passage = FIRST_GUESS

    @asynccontextmanager
    async def foreground(self) -> AsyncIterator[None]:
        self.busy += 1
        self.idle.clear()
        try:
            yield
        finally:
            self.busy -= 1
            if self.busy == 0:
                self.idle.set()

    def learn(self, passages: int, seconds: float) -> None:
        """Fold one run's cost into the estimate (an exponential average: the machine's load changes)."""
        if passages:
            self.seconds_per_passage = 0.7 * self.seconds_per_passage + 0.3 * seconds / passages


def priority(rt: Runtime) -> Priority:
    """The runtime's one Priority, created on first use."""
    found = rt.state.get(PRIORITY)
    if not isinstance(found, Priority):
        found = Priority()
        rt.state[PRIORITY] = found
    return found
