"""`engrama-vault init`: choose the schema profile for a vault and create its graph database."""

from __future__ import annotations

import argparse
import asyncio
import sys

from profiles.loader import ProfileError, load_profile
from server.commands.common import CommandError, add_common_options, settings_from
from server.runtime import check_is_the_vault, refuse_folder_holding_vaults
from server.settings import write_vault_config
from server.store import GraphStore
from vault_sync.errors import VaultError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "init",
        help="record the profile and modules for a vault and create its database",
        description="Record the schema profile and modules for a vault (in <vault>/.engrama/config.yaml, which "
        "Obsidian hides) and create the graph database. Run `engrama-vault sync` next.",
    )
    add_common_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if settings.vault is None:
        raise CommandError("no vault given; pass --vault PATH (your Obsidian vault folder)")
    try:
        profile = load_profile(settings.profile, settings.modules)
    except ProfileError as exc:
        raise CommandError(str(exc)) from exc
    vault = settings.vault
    # A folder that is no vault but holds one (--vault one level too high) is refused here as by every other
    # command, before anything is written in it (review 23i: its .engrama/config.yaml was written, and the
    # `sync` this command then suggests refused the folder).
    if not settings.db_path.exists():  # no database made for it either
        try:
            refuse_folder_holding_vaults(vault)
        except VaultError as exc:
            raise CommandError(str(exc)) from exc

    async def create() -> None:
        store = await GraphStore.open(settings.db_path)
        try:
            await check_is_the_vault(store, vault)
        finally:
            await store.close()

    try:
        asyncio.run(create())
    except VaultError as exc:
        raise CommandError(str(exc)) from exc
    config = write_vault_config(vault, profile.name, profile.modules)
    print(f"vault:    {settings.vault}")
    print(f"profile:  {profile.name}" + (f" + {', '.join(profile.modules)}" if profile.modules else ""))
    print(f"labels:   {', '.join(sorted(profile.label_names()))}")
    print(f"config:   {config}")
    print(f"database: {settings.db_path}")
    print("next:     engrama-vault sync --vault " + str(settings.vault), file=sys.stderr)
    return 0
