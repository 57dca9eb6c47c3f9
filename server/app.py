"""The MCP server: `create_server(settings)` builds it; its lifespan opens the runtime and the background work.

Start-up must answer `initialize` within two seconds whatever the vault's size, so the lifespan only opens
the database and starts things: the start-up catch-up, the watcher and the embedding worker all run in the
background, and embedding models load on first use. Everything is closed, in reverse order, when the
client disconnects (stdin closes) or the process is asked to stop.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from mcp.server.mcpserver import MCPServer

from server import __version__
from server.prompts import register_prompts
from server.resources import NoteResources, ResourceEvents, register_resources
from server.runtime import open_runtime
from server.settings import Settings
from server.signals import SignalStop
from server.tools import register_tools
from server.tools.common import AppContext
from server.tools.listing import LeanToolListing
from server.warm_up import warming

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory kept in the person's Obsidian vault. Search it (engrama_search) before answering "
    "about their projects, people, decisions or past work; remember durable facts with engrama_remember "
    "and connections with engrama_relate; reuse exact names from search results so nothing is duplicated. "
    "Insights from engrama_reflect are suggestions: show them and act only on the person's approval."
)


def create_server(settings: Settings, *, stop: SignalStop | None = None) -> MCPServer[AppContext]:
    """The engrama-vault MCP server for `settings` (tests point it at a temporary vault and database).

    `stop` (the `serve` command's) makes SIGTERM and Ctrl-C close everything in order and then end the process.
    """

    events = ResourceEvents()  # tells clients when notes come and go (MCP resources/list_changed)

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppContext]) -> AsyncIterator[AppContext]:
        try:
            async with AsyncExitStack() as stack:
                if stop is not None:
                    await stack.enter_async_context(stop.installed())
                rt = await stack.enter_async_context(open_runtime(settings))
                if rt.sync is not None:  # the vault's lease, catch-up and queued writes; the watcher if on
                    from server.live import live_sync

                    await stack.enter_async_context(live_sync(rt, on_notes_changed=events.notes_changed))
                if settings.embedding_provider != "none":
                    # Imported only when configured: model code stays out of start-up otherwise.
                    from server.embeddings.worker import embedding_worker

                    await stack.enter_async_context(embedding_worker(rt))
                # The first search's cold costs, paid in the background, off the `initialize` path (issue 15).
                await stack.enter_async_context(warming(rt))
                log.info("engrama-vault %s serving vault %s", __version__, settings.vault or "(none)")
                yield AppContext(rt)
        finally:
            log.info("engrama-vault stopped")
            if stop is not None:
                stop.after_teardown()

    server: MCPServer[AppContext] = MCPServer(
        "engrama-vault",
        title="engrama-vault",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        middleware=[LeanToolListing(), NoteResources(events)],
        subscriptions=events.bus,
        log_level=settings.log_level if settings.log_level in _LEVELS else "INFO",  # type: ignore[arg-type]
    )
    register_tools(server)
    register_resources(server)
    register_prompts(server)
    return server


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
