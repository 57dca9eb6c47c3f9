"""The status object shared by the `engrama_status` tool and `engrama-vault status --json` (DESIGN.md §5).

A key is absent, not null, when its subsystem is off.
"""

from __future__ import annotations

import os
import time
from typing import Any

from server import __version__
from server.embeddings.worker import current_search_status
from server.live import SHARED_KEY, shared_facts
from server.runtime import Runtime
from server.store import outbox_sql
from server.store.database import DatabaseError, DatabaseTrouble
from server.store.outbox_sql import OutboxSummary
from vault_sync.attention import ATTENTION_KEY, Attention
from vault_sync.lease import VaultLease


async def build_status(rt: Runtime) -> dict[str, Any]:
    counts = await rt.store.counts()
    role = rt.state.get("lease")  # read once: a follower may take the lease over meanwhile
    node_count = sum(v for k, v in counts.items() if k.startswith("nodes_") and k != "nodes_archived")
    vault = _vault_status(
        rt, counts, await rt.store.read(outbox_sql.summary), role, await _holders_facts(rt, role)
    )
    backend: dict[str, Any] = {
        "name": "sqlite",
        "ok": True,
        "node_count": node_count,
        "db_path": str(rt.store.path),
    }
    # Judged on the same facts as `vault` says (the live sync may catch up between two awaits of this call).
    caught_up = role == "holder" and vault.get("pending") == 0
    if (trouble := await probe_trouble(rt, caught_up)) is not None:  # writes fail: the graph falls behind
        backend.update(ok=False, problem=trouble)
    status: dict[str, Any] = {
        "version": __version__,
        "backend": backend,
        "vault": vault,
        "search": current_search_status(rt),
        "profile": {"name": rt.profile.name, "modules": list(rt.profile.modules)},
    }
    if rt.settings.vault is not None and (attention := await _vault_attention(rt)):
        status["vault"]["attention"] = attention  # what the syncs found for the person to look at
    embedder = rt.state.get("embedder_status")
    if isinstance(embedder, dict):
        status["embedder"] = embedder
    elif rt.settings.embedding_choice:  # no embedder running: say which provider was chosen and why
        status["search"] = {**status["search"], "embedding": rt.settings.embedding_choice}
    return status


async def first_catch_up(rt: Runtime) -> int | None:
    """While the lease holder's first reconcile of the vault runs: how many notes it still has to read (0 when
    it found every note as the graph has it: a restart; -1 while it is still walking the vault, so that is not
    known yet); None once it is done, or without a live sync (the CLI). Until then the graph may be only part
    of the vault."""
    role = rt.state.get("lease")
    if rt.settings.vault is None or role not in ("holder", "follower"):
        return None
    facts: dict[str, Any] | None = dict(rt.state) if role == "holder" else await _holders_facts(rt, role)
    if facts is None:
        return None
    pending, left = facts.get("pending"), facts.get("taking_in")
    if not isinstance(pending, int) or pending <= 0 or facts.get("last_reconcile_at"):
        return None
    return left if isinstance(left, int) and left >= -1 else -1


def store_trouble(rt: Runtime, caught_up: bool | None = None) -> str | None:
    """Why the database refuses writes (its disk is full, ...) and what to do, while that holds the graph back:
    this process's last writes failed and its live sync (when it holds the vault) has not taken in every change
    since (`caught_up`: said by the caller, else read now)."""
    if caught_up is None:
        caught_up = rt.state.get("lease") == "holder" and not rt.state.get("pending")
    return rt.store.trouble(caught_up=caught_up)


async def probe_trouble(rt: Runtime, caught_up: bool | None = None) -> str | None:
    """`store_trouble`, for a process that does not hold the vault, asked for its status once it has seen no
    failure of its own: it writes nothing else, and the holder's facts, which would say so, cannot be written
    to a full database either (review 21e: a follower said all was well while the holder could take in
    nothing). One small write (the shared facts' row, unchanged) tells, at most every PROBE_EVERY seconds; a
    search never writes for it."""
    trouble = store_trouble(rt, caught_up)
    if trouble is not None or rt.state.get("lease") != "follower":
        return trouble
    now, probed = time.monotonic(), rt.state.get(_PROBED_AT)
    if isinstance(probed, float) and now - probed < PROBE_EVERY:
        return None
    rt.state[_PROBED_AT] = now
    try:
        await rt.store.write(_touch_shared_facts)
    except DatabaseTrouble:
        return store_trouble(rt, caught_up)  # recorded by the store
    except DatabaseError:
        pass  # locked past the busy timeout: says nothing of the disk
    return None


PROBE_EVERY = 10.0  # seconds between two writes a follower makes to tell whether the database takes writes
_PROBED_AT = "trouble_probed_at"


def _touch_shared_facts(conn: Any) -> None:
    conn.execute("update meta set value = value where key = ?", (SHARED_KEY,))


def trouble_hint(rt: Runtime) -> str | None:
    """What a search must say while the database refuses writes (its disk is full, ...): the notes changed since
    are not in the graph, so its results may miss them or show them as they were."""
    trouble = store_trouble(rt)
    if trouble is None:
        return None
    return (
        f"engrama cannot update its graph: {trouble}. Until then these results may miss the latest edits to "
        "the notes or show them as they were."
    )


async def taking_in_hint(rt: Runtime) -> str | None:
    """What a search made while the server's first reconcile still reads the vault must say: its results may
    miss the notes not read yet (a large vault takes minutes). None once that is done, and for a restart whose
    reconcile is still walking a graph that holds the vault already."""
    left = await first_catch_up(rt)
    if not left:
        return None
    notes = (await rt.store.counts()).get("files", 0)
    if left == -1 and notes:
        return None
    so_far = f"{notes:,} notes in, {left:,} left to read" if left > 0 else f"{notes:,} notes in so far"
    return (
        f"engrama is still taking in the vault ({so_far}): these results may miss the notes not read yet; "
        "search again in a minute."
    )


async def _holders_facts(rt: Runtime, role: object) -> dict[str, Any] | None:
    """The lease holder's live facts, read from the database, for a process that does not hold the lease."""
    if rt.settings.vault is None or role == "holder":
        return None
    holder = VaultLease.for_database(rt.store.path).holder_pid()
    if holder is not None and not _alive(holder):  # killed: its last facts say nothing of the vault now
        return None
    return shared_facts(await rt.store.get_meta(SHARED_KEY), holder)


def _alive(pid: int) -> bool:
    """Whether a process of that pid runs on this machine (the lease and the database are local files). A
    holder SIGKILLed with no follower left kept being reported as watching, with nothing pending (review 20b).
    Not asked on Windows, where signal 0 is Ctrl-C sent to the process's console group (review 20d)."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it runs, as another user
        return True
    return True


def _vault_status(
    rt: Runtime,
    counts: dict[str, int],
    outbox: OutboxSummary,
    role: object,
    holders: dict[str, Any] | None,
) -> dict[str, Any]:
    """`watching`, `pending`, `polling_seconds` and `last_reconcile_at` are the lease holder's: this process's
    own, or those another process holding the lease shares (`holders`). A follower that has no current facts
    from a holder (it hung, or it just exited and this process takes over within a second) reports 1 pending:
    nothing says the graph is in step."""
    if rt.settings.vault is None:
        return {"configured": False}
    facts: dict[str, Any] = holders if holders is not None else rt.state
    pending = int(facts.get("pending", 0) or 0)
    if holders is None and role == "follower":
        pending = max(pending, 1)
    vault: dict[str, Any] = {
        "configured": True,
        "path": str(rt.settings.vault),
        "note_count": counts.get("files", 0),
        "watching": bool(facts.get("watching", False)),
        "pending": pending,
    }
    # This process's: a "holder" watches and writes the vault, a "follower" serves reads.
    if role in ("holder", "follower"):
        vault["lease"] = role
    if holders is not None:
        vault["holder_pid"] = holders.get("pid")
    polling = facts.get("polling_seconds")
    if polling:
        vault["polling_seconds"] = polling
    last = facts.get("last_reconcile_at")
    if last:
        vault["last_reconcile_at"] = last
    vault["outbox"] = _outbox_status(outbox)
    return vault


def _outbox_status(outbox: OutboxSummary) -> dict[str, Any]:
    """Writes accepted by a process without the vault's lease that the lease holder has not written yet."""
    status: dict[str, Any] = {"waiting": outbox.waiting}
    if outbox.oldest_queued_at is not None:
        status["oldest_age_seconds"] = round(outbox_sql.age_seconds(outbox.oldest_queued_at))
    if outbox.error is not None:
        status["failing"] = outbox.failing
        status["error"] = outbox.error
    return status


async def _vault_attention(rt: Runtime) -> dict[str, Any]:
    """Archiving held back, conflict copies, notes not downloaded: kept by the last syncs (any process)."""
    return Attention.from_json(await rt.store.get_meta(ATTENTION_KEY)).as_status()
