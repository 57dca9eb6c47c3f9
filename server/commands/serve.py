"""`engrama-vault serve`: the stdio MCP server that Claude Desktop, Cursor and other clients start."""

from __future__ import annotations

import argparse
import logging
import signal
from types import FrameType

from server.commands.common import add_common_options, settings_from
from server.settings import EMBEDDING_PROVIDERS

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "serve",
        help="run the MCP server on stdin/stdout (what an MCP client starts)",
        description="Run the MCP server over stdio. stdout carries the protocol; logs go to stderr. The vault "
        "is caught up in the background and then watched, so edits in Obsidian reach the graph at once.",
    )
    add_common_options(parser)
    parser.add_argument(
        "--no-watch",
        dest="watch",
        action="store_const",
        const=False,
        default=None,
        help="no file watcher: edits reach the graph at the start-up catch-up, the periodic rescan or "
        "engrama_sync_note; the vault lease is still taken or followed, so no second writer (env "
        "ENGRAMA_WATCH=0)",
    )
    parser.add_argument(
        "--embedding-provider",
        choices=EMBEDDING_PROVIDERS,
        help="vectors for semantic search: auto (the default: local when the [local] extra is installed, "
        "else none), none (full text only), local, openai or fake (env EMBEDDING_PROVIDER)",
    )
    parser.add_argument(
        "--embedding-model",
        metavar="NAME",
        help="embedding model name for the provider (env EMBEDDING_MODEL)",
    )
    parser.set_defaults(handler=run)


def _stop_before_loop(signum: int, frame: FrameType | None) -> None:
    # Until the lifespan routes stop signals to its task (server.signals), SIGTERM unwinds like Ctrl-C.
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    from server.app import create_server  # the MCP SDK is imported only by the command that needs it
    from server.signals import SignalStop, exit_now

    signal.signal(signal.SIGTERM, _stop_before_loop)
    try:
        create_server(settings, stop=SignalStop()).run("stdio")
    except KeyboardInterrupt:
        # A signal before the lifespan took over: nothing was serving yet (SQLite and the lease's OS lock need no
        # teardown to stay consistent). The SDK's stdin reader may be a worker thread blocked in read(), which
        # interpreter shutdown would wait on until the client closes the pipe; end here instead.
        log.info("stopped by signal")
        exit_now(0)
    return 0
