"""Pay at start-up, in the background, what the first search would otherwise pay (issue 15: the first search
of a new server took 35-50 ms against 8-10 ms for later ones).

What is cold in a new process, measured: the query tokenizer's Unicode pattern (built on first use from the
Unicode tables, ~40 ms on two busy cores), the aside connection (opened on first use, with sqlite-vec loaded),
each connection's first read of the schema and of the FTS5 index structure, and the first pass through the
steps that only run when something is found. One throwaway search for a note's name touches all of them.

It starts a moment after the lifespan opens, so it never competes with the answer to `initialize`, and it
runs behind the start-up catch-up on the database thread like any other read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from server.runtime import Runtime
from server.search.service import search
from server.store import nodes_sql

log = logging.getLogger(__name__)

WARM_DELAY = 0.2  # seconds after start-up: the client's `initialize` arrives first and is answered in ms
WARM_QUERY = "engrama warm up"


async def warm_up(rt: Runtime) -> None:
    """Run one throwaway search for a note's name (so the steps that work on results run too: graph, distill,
    snippets); a failure here only means the first real search is slower."""
    try:
        name = await rt.store.read(nodes_sql.some_active_name)
        await search(rt, name or WARM_QUERY, limit=3)
    except Exception as exc:  # the outermost handler of a background task: log it, never raise
        log.debug("search warm-up failed (the first search will be slower): %s", exc)


@asynccontextmanager
async def warming(rt: Runtime) -> AsyncIterator[None]:
    """Warm search up in the background while the server runs; cancelled on exit if still running."""

    async def later() -> None:
        await asyncio.sleep(WARM_DELAY)
        await warm_up(rt)

    task = asyncio.create_task(later(), name="engrama-warm-up")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
