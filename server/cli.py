"""The `engrama-vault` command. Each sub-command lives in `server/commands/` and registers itself here.

stdout carries results (and, for `serve`, the MCP protocol); logs and progress go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import sys
from collections.abc import Sequence

from profiles.loader import ProfileError
from server import __version__
from server.commands import COMMANDS
from server.commands.common import CommandError
from server.runtime import NoVaultConfigured
from server.settings import ConfigError
from server.store.database import DatabaseProblem
from vault_sync.errors import VaultError

# Errors a person can fix: printed as one line with the fix, exit status 2, no traceback.
FIXABLE = (CommandError, NoVaultConfigured, ConfigError, ProfileError, VaultError, DatabaseProblem)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="engrama-vault",
        description="Long-term memory for AI assistants, kept in your Obsidian vault.",
    )
    parser.add_argument("--version", action="version", version=f"engrama-vault {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.register(sub)
    return parser


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = str(getattr(args, "log_level", None) or os.environ.get("ENGRAMA_LOG_LEVEL") or "WARNING").upper()
    if level not in LEVELS:
        parser.error(
            f"the log level must be one of {', '.join(LEVELS)}, not {level!r} (--log-level, ENGRAMA_LOG_LEVEL)"
        )
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.handler(args) or 0)
    except BrokenPipeError:
        if not stat.S_ISFIFO(os.fstat(sys.stdout.fileno()).st_mode):
            raise  # our output is no pipe: some other pipe broke, a real failure
        # The reader of our output went away (`| head`): nothing more to say. Point stdout at nothing so the
        # interpreter's final flush does not fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FIXABLE as exc:
        print(f"engrama-vault {args.command}: {exc}", file=sys.stderr)
        return 2
    except BaseExceptionGroup as group:  # the server's task groups wrap what stopped its start-up
        fixable = _fixable(group)
        if fixable is None:
            raise
        print(f"engrama-vault {args.command}: {fixable}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _fixable(error: BaseException) -> BaseException | None:
    """The error a person can fix inside an exception group (the first found), or None."""
    if isinstance(error, FIXABLE):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if (found := _fixable(inner)) is not None:
                return found
    return None


if __name__ == "__main__":
    sys.exit(main())
