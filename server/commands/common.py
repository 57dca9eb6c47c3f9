"""Options every command takes, and turning them into `Settings`."""

from __future__ import annotations

import argparse
from typing import Any

from profiles.loader import ProfileError
from server.settings import ConfigError, Settings, build_settings


class CommandError(Exception):
    """A command failed in a way the person can fix; the message says how."""


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vault", metavar="PATH", help="the Obsidian vault folder (env ENGRAMA_VAULT)")
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="the graph database file (env ENGRAMA_DB_PATH; default: per-vault file "
        "in the user data directory)",
    )
    parser.add_argument("--profile", metavar="NAME", help="schema profile: base, developer or a YAML path")
    parser.add_argument(
        "--modules", metavar="NAME", nargs="*", help="profile modules to compose, e.g. teaching ai"
    )
    parser.add_argument(
        "--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING (default) or ERROR; to stderr"
    )


def settings_from(args: argparse.Namespace, **overrides: Any) -> Settings:
    flags = {
        "vault": args.vault,
        "db": args.db,
        "profile": args.profile,
        "modules": args.modules,
        "log_level": args.log_level,
        **{k: getattr(args, k, None) for k in ("embedding_provider", "embedding_model", "watch")},
        **overrides,
    }
    try:
        return build_settings(flags)
    except (ConfigError, ProfileError) as exc:
        raise CommandError(str(exc)) from exc
