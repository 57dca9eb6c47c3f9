"""Query-time embedding goes before the background backfill (shared by ondemand.py and worker.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from server.runtime import Runtime

PRIORITY = "embedding_priority"  # rt.state key
# Until a run is measured: MiniLM int8 on one thread takes ~47 ms for a 120-word passage (~700 characters).
FIRST_GUESS = 0.05  # seconds per passage
FIRST_GUESS_PER_CHAR = FIRST_GUESS / 700


class Priority:
    """`foreground()` marks query-time embedding as running; the backfill awaits `idle` before each batch.

    It also keeps the measured cost of embedding, per passage and per character, so query-time work can fit
    a batch into its budget (`estimate`)."""

    def __init__(self) -> None:
        self.busy = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.seconds_per_passage = FIRST_GUESS
        self.seconds_per_char = FIRST_GUESS_PER_CHAR
        self.measured = False  # until a run is measured, the first guesses may be far off (a busy machine)

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

    def learn(self, texts: list[str], seconds: float) -> None:
        """Fold one run's cost (`seconds` for `texts`) into the estimates (exponential averages: the machine's
        load changes)."""
        chars = sum(map(len, texts))
        if texts and chars:
            weight = 0.3 if self.measured else 1.0  # the first measurement replaces the guesses
            self.seconds_per_passage += weight * (seconds / len(texts) - self.seconds_per_passage)
            self.seconds_per_char += weight * (seconds / chars - self.seconds_per_char)
            self.measured = True

    def estimate(self, text: str) -> float:
        """Seconds `text` will likely take: the larger of the two averages' views, since a model's time grows
        with the text (per character) but a run has a fixed cost too (per passage)."""
        return max(self.seconds_per_passage, self.seconds_per_char * len(text))


def priority(rt: Runtime) -> Priority:
    """The runtime's one Priority, created on first use."""
    found = rt.state.get(PRIORITY)
    if not isinstance(found, Priority):
        found = Priority()
        rt.state[PRIORITY] = found
    return found
