"""The running product for one vault: settings, profile, graph store and vault sync, opened and closed together.

Both the MCP server's lifespan and the CLI commands build one of these; tool handlers and commands call
services through it, never SQL or file I/O directly.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from profiles.loader import Profile, load_profile
from server.settings import Settings
from server.store import GraphStore, memory_sql, sync_sql
from server.store.clock import utc_ago
from server.store.database import DatabaseProblem
from vault_sync import scan
from vault_sync.errors import VaultError
from vault_sync.identify import read_id
from vault_sync.lease import VaultLease
from vault_sync.leftovers import remove_leftover_temps
from vault_sync.names import fold
from vault_sync.reconcile import NoteRules, VaultSync
from vault_sync.writer import ARRIVED_QUIET, Quiet, write_again

log = logging.getLogger(__name__)

# How much longer than the settle window a tool waits for a busy note before it gives up and says so: a person
# who pauses gets the write a moment later; one who keeps typing gets a clear "try again".
WAIT_BEYOND_SETTLE = 2.0
ENTITY_LOCKS = 64
VAULT_KEY = "vault_root"  # meta: the vault whose graph the database keeps (`check_vault_of_database`)


class NoVaultConfigured(RuntimeError):
    """A command that needs a vault was run without one."""

    def __init__(self) -> None:
        super().__init__(
            "no vault configured: pass --vault PATH or set ENGRAMA_VAULT to your Obsidian vault folder"
        )


@dataclass
class Runtime:
    settings: Settings
    profile: Profile
    store: GraphStore
    sync: VaultSync | None  # None when no vault is configured
    state: dict[str, object] = field(
        default_factory=dict
    )  # live facts for status (watching, last reconcile...)
    # Held while queued writes are applied (`services.outbox.drain`): one drain at a time.
    outbox_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _entity_locks: tuple[asyncio.Lock, ...] = field(
        default_factory=lambda: tuple(asyncio.Lock() for _ in range(ENTITY_LOCKS))
    )

    def entity_lock(self, name: str) -> asyncio.Lock:
        """Held by a tool call from planning a write of the entity called `name` to writing it: two calls in
        flight for one name (in any case: names match caselessly) would both find no entity and make two notes
        (review 20c: "Nova" and "nova" at once). Striped: names sharing a lock only wait for each other."""
        return self._entity_locks[hash(fold(name)) % len(self._entity_locks)]

    @property
    def vault(self) -> Path:
        if self.settings.vault is None:
            raise NoVaultConfigured()
        return self.settings.vault

    def require_sync(self) -> VaultSync:
        if self.sync is None:
            raise NoVaultConfigured()
        return self.sync

    async def quiet_rule(self, rel: str) -> Quiet | None:
        """When a tool may edit the note at `rel`: never while the person's editor may be saving it.

        `vault_sync.writer.edit_note` waits until the note has been quiet for the sync's settle window (the
        same window the watcher obeys before it writes an id; the graph having read it says nothing of whether
        the person is still typing) and git is not rewriting the vault, and otherwise refuses with `NoteBusy`,
        writing nothing. An empty note is written once the graph has read it empty (`seen`). A note holding a save a sync tool brought from
        another computer is written once that save is ARRIVED_QUIET old, as an id line is (the person may still
        be typing there). The write is kept a moment against an editor saving an older copy over it
        (`writer.kept_edit`). None when no settle window is set."""
        if self.sync is None or self.sync.settle <= 0:
            return None
        state = await self.store.file_state(rel)
        seen = (state.size, state.mtime_ns) if state is not None else None
        return Quiet(
            self.sync.settle, seen, self.sync.settle + WAIT_BEYOND_SETTLE, brought=ARRIVED_QUIET, keep=True
        )


async def remove_leftovers(vault: Path, store: GraphStore) -> None:
    """Settle what a writer killed mid-edit left (call it right after taking the lease): its temp files in the
    vault (`vault_sync.leftovers`), and the placeholder nodes its tool calls made for relations whose note was
    never written (nothing points at them; a rebuild from the vault would not have them)."""
    removed = await asyncio.to_thread(remove_leftover_temps, vault)
    if removed:
        log.info("removed %d temp file(s) left in the vault by an engrama process that was killed", removed)
    await drop_stubs_left_over(store)


# A placeholder nothing points at is left this long to the call that made or found it (maybe in another
# process) before the clean-up takes it for one a killed call left; the lease holder sweeps every STUB_SWEEP.
STUB_GRACE = 60.0
STUB_SWEEP = 300.0


async def drop_stubs_left_over(store: GraphStore) -> int:
    """Remove the placeholder nodes tool calls killed before their note write left (`memory_sql`)."""
    dropped = await store.write(
        memory_sql.drop_stubs_left_over, memory_sql.RUNNING_STUBS, utc_ago(STUB_GRACE)
    )
    if dropped:
        log.info("removed %d placeholder node(s) left by tool calls that never finished", dropped)
    return dropped


async def check_vault_of_database(store: GraphStore, vault: Path, db_path: Path) -> None:
    """A database keeps the graph of one vault: the vault it first takes notes in from is recorded in it
    (`VAULT_KEY`), and it refuses another (DatabaseProblem, with what to do). Two MCP servers configured with one
    `--db` for two vaults shared the graph and its lease: the second served the first vault's notes, and what
    the assistant remembered through it was written into the first vault. A vault moved or restored elsewhere
    keeps its database when the new folder holds notes the graph knows and the recorded one holds none (gone, or
    left empty: review 20e); the same folder reached by another path (a symlink) is the same vault. Of two
    processes claiming a new database for two vaults at once, the second is refused (the recorded folder is
    there)."""
    recorded_text = await store.claim_meta(VAULT_KEY, str(vault))
    recorded = Path(recorded_text)
    if recorded == vault or await asyncio.to_thread(_same_folder, recorded, vault):
        return
    there = await asyncio.to_thread(os.path.isdir, recorded)
    if not there and not await store.read(sync_sql.knows_files):
        await store.set_meta(VAULT_KEY, str(vault))  # recorded by a start that took nothing in, and gone
        return
    # Moved, or restored elsewhere: the new folder holds notes the graph knows, and the recorded one none
    # (gone, or left empty). Two vaults claiming a new database at once: the second is refused.
    if await _holds_a_known_note(store, vault) and not (there and await _holds_a_known_note(store, recorded)):
        log.warning(
            "the vault %s this database kept holds its notes no more, %s does: it moved", recorded, vault
        )
        await store.set_meta(VAULT_KEY, str(vault))
        return
    gone = "" if there else " (not there now: a drive unplugged?)"
    raise DatabaseProblem(
        f"the database {db_path} keeps the graph of the vault {recorded}{gone}, not of {vault}: a database "
        "serves one vault (two sharing one would write one vault's memories into the other). Give this vault a "
        "database of its own: leave out --db and ENGRAMA_DB_PATH for the per-vault default, or name another "
        f"file. If {vault} is that vault moved or restored, its notes carry the ids this database knows once "
        f"{recorded} holds them no more"
    )


async def _holds_a_known_note(store: GraphStore, vault: Path, looked_at: int = 200) -> bool:
    """Whether one of the first `looked_at` notes found in `vault` carries an engrama_id the graph knows: the
    sign that the vault the database kept moved there, not that another vault took its place."""
    for node_id in await asyncio.to_thread(_ids_in, vault, looked_at):
        if await store.get_node(node_id) is not None:
            return True
    return False


def _ids_in(vault: Path, looked_at: int) -> list[str]:
    ids: list[str] = []
    for folder, dirs, names in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in (n for n in names if n.endswith(".md")):
            try:
                with open(os.path.join(folder, name), "rb") as note:
                    found = read_id(note.read(65536))
            except OSError:
                continue
            if found is not None:
                ids.append(found)
            looked_at -= 1
            if looked_at <= 0:
                return ids
    return ids


async def check_is_the_vault(store: GraphStore, vault: Path) -> None:
    """Refuse (VaultError, with what to do) a folder that is no Obsidian vault but holds one, when its graph has
    taken in no note yet: `--vault` pointed one folder too high (the folder of several vaults, the Documents or
    home folder above one) would write an id line into every Markdown file below it, in the person's vaults and
    anything else. Decided once, before this process syncs or writes anything (a server, a follower, a
    command alike), so no write can race it; a graph that holds notes of the folder is the person's choice and
    stays in step, whatever vaults appear in it later. Costs a walk of the folders only for a folder that is no
    vault, the first time."""
    if await store.read(sync_sql.knows_files):
        return
    await asyncio.to_thread(refuse_folder_holding_vaults, vault)


def refuse_folder_holding_vaults(vault: Path) -> None:
    """VaultError (with what to do) when `vault` is no Obsidian vault but holds one (`check_is_the_vault`)."""
    if not scan.is_a_vault(vault) and (found := scan.vaults_inside(vault)):
        raise VaultError(scan.vaults_inside_message(vault, found))


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def note_rules(profile: Profile) -> NoteRules:
    return NoteRules(folder_labels=profile.folder_labels(), canonical_label=profile.canonical_label)


@asynccontextmanager
async def open_runtime(
    settings: Settings, *, writable: bool = True, take_lease: bool = False
) -> AsyncIterator[Runtime]:
    """Open the store and the vault sync for `settings`; everything is closed on exit.

    `take_lease` is for one-shot commands (`sync`, `reflect`): they write files only while holding the
    vault's lease; when a running server holds it, they run as followers (the server's watcher already keeps
    the graph in step). The MCP server leaves the lease to `server.live.live_sync`.
    """
    profile = load_profile(settings.profile, settings.modules)
    store = await GraphStore.open(settings.db_path)
    lease = VaultLease.for_database(settings.db_path) if take_lease and writable else None
    try:
        sync = None
        if settings.vault is not None:
            await check_is_the_vault(store, settings.vault)
            await check_vault_of_database(store, settings.vault, settings.db_path)
            if settings.db_path.is_relative_to(settings.vault):
                log.warning(
                    "the database %s is inside the vault: a sync tool (iCloud, Dropbox, Obsidian Sync, "
                    "Syncthing) copying it and its side files while it is written corrupts it, and two "
                    "computers would write one file. Keep it outside the vault: leave out --db and "
                    "ENGRAMA_DB_PATH for the per-vault default in the user data folder",
                    settings.db_path,
                )
            if lease is not None and not lease.try_acquire():
                log.warning(
                    "another engrama-vault process (pid %s) holds this vault's lease and keeps it in sync; "
                    "running without writing notes",
                    lease.holder_pid(),
                )
                writable = False
            elif lease is not None:
                # The only writer now: what a killed writer left is nobody's any more.
                await remove_leftovers(settings.vault, store)
                write_again(settings.vault)
            sync = VaultSync(
                settings.vault, store, note_rules(profile), writable=writable, settle=settings.settle
            )
        runtime = Runtime(settings=settings, profile=profile, store=store, sync=sync)
        if sync is not None and sync.writable and lease is not None:
            # A command holding the lease is the vault's writer: the writes other clients' servers queued (and
            # no server is left to apply) land now, before anything else, as a server taking the lease does.
            from server.services.outbox import drain  # here: the outbox's services build on this module

            await drain(runtime)
        yield runtime
    finally:
        if lease is not None:
            lease.release()
        with anyio.CancelScope(shield=True):  # closed even when the task was cancelled (SIGTERM, Ctrl-C)
            await store.close()
