"""Live sync for the server's lifespan: the vault lease, the file watcher, start-up catch-up, status facts.

    async with live_sync(rt) as live:
        ...  # serve MCP requests

One process per vault holds the lease (`vault_sync.lease`): it watches the vault, reconciles every change and
may write into notes. Every other process on the same vault and database is a follower: it serves reads from
the shared database, never touches a file (`rt.sync.writable = False`), and retries the lease every second,
so when the holder exits — even by SIGKILL, which releases the OS lock — a follower takes over within a few
seconds: it becomes writable, starts the watcher and runs a catch-up reconcile of the whole vault.
The holder also applies the writes followers accepted (`server.services.outbox`): at once when it takes the
lease, then every second, in a task of its own.

Entering the context never waits for a reconcile: the catch-up pass runs in the background while MCP
`initialize` is answered, and `rt.state` tells `engrama_status` how far it got:

- `lease`: "holder" or "follower";
- `watching`: the file watcher is running;
- `pending`: paths waiting to be reconciled (notes left in a running full pass included);
- `last_reconcile_at`: when a reconcile last finished (ISO 8601, UTC).

The holder also shares these facts through the database (`SHARED_KEY`: at once when `pending` becomes or stops
being 0, other changes at most every `SHARE_EVERY` seconds, nothing while nothing changes), so a follower's
`engrama_status` (the second client on one vault) and `engrama-vault status` report the holder's backlog
instead of their own empty one (`shared_facts`: only the facts of the process the lease file names).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio

from server.runtime import STUB_SWEEP, Runtime, drop_stubs_left_over, remove_leftovers
from server.services.outbox import drain
from server.store import clock, kept_sql, outbox_sql
from vault_sync.debounce import DEFAULT_QUIET, STORM_THRESHOLD, LiveReconciler
from vault_sync.lease import VaultLease
from vault_sync.writer import (
    keep_recorded,
    let_go,
    record_kept,
    saved_over_since,
    write_again,
)

log = logging.getLogger(__name__)

Role = Literal["holder", "follower", "off"]
LEASE_RETRY = 1.0  # seconds between a follower's attempts to take the lease (and the holder's health checks)
SHARED_KEY = "live_sync"  # the meta row where the holder shares its live facts
SHARE_EVERY = 1.0  # seconds between the holder's shares of changes that are not urgent (a pass's progress)
LET_GO_WAIT = 5.0  # seconds a stopping holder waits for the writes under way before it lets the lease go
LEAVING_DRAIN = 10.0  # seconds a follower stopping may spend on queued writes nobody else is left to write


class LiveSync:
    """The live side of one runtime: lease holder (watching, reconciling) or follower (waiting to take over)."""

    def __init__(
        self,
        rt: Runtime,
        *,
        quiet: float = DEFAULT_QUIET,
        storm_threshold: int = STORM_THRESHOLD,
        retry: float = LEASE_RETRY,
        on_notes_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.rt = rt
        self.lease = VaultLease.for_database(rt.settings.db_path)
        self.reconciler: LiveReconciler | None = None
        self._quiet = quiet
        self._storm_threshold = storm_threshold
        self._retry = retry
        self._on_notes_changed = on_notes_changed  # notes came or went (MCP resources/list_changed)
        self._supervisor: asyncio.Task[None] | None = None
        self._outbox: asyncio.Task[None] | None = None  # the holder's drain of writes other processes queued
        self._kept_log: kept_sql.KeptLog | None = None  # where the holder records the tool writes it keeps
        self._outbox_due = asyncio.Event()
        self._running = False
        self._last_error: str | None = None
        self._stubs_swept = 0.0  # when the holder last removed placeholders killed calls left (monotonic)
        self._shared: dict[str, Any] | None = None  # the facts last shared (holder)
        self._shared_at = 0.0  # when (monotonic)
        self._share_wanted: dict[str, Any] | None = None
        self._sharing: asyncio.Task[None] | None = None

    @property
    def role(self) -> Role:
        if self.rt.sync is None or not self._running:
            return "off"
        return "holder" if self.reconciler is not None else "follower"

    @property
    def is_holder(self) -> bool:
        return self.role == "holder"

    async def start(self) -> None:
        """Take the lease or become a follower; returns at once (catch-up runs in the background)."""
        if self.rt.sync is None:
            return
        self._running = True
        try:
            acquired = self.lease.try_acquire()
        except OSError as exc:  # e.g. the data folder is read-only: serve reads, keep trying
            log.error("cannot open the vault lease %s (%s); serving reads only", self.lease.path, exc)
            acquired = False
        if acquired:
            await self._become_holder()
        else:
            self.rt.sync.writable = False
            log.info("another process (pid %s) holds the vault lease; serving reads", self.lease.holder_pid())
        self._publish()
        self._supervisor = asyncio.create_task(self._supervise(), name="engrama-lease")

    async def stop(self) -> None:
        """Stop the watcher and every task, then release the lease so a follower can take over."""
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        await self._write_queued_before_leaving()
        await self._stand_down()

    async def _write_queued_before_leaving(self) -> None:
        """A follower stopping while queued writes wait and no process holds the lease (the holder went first,
        as when both clients quit together) takes the lease and writes them (for `LEAVING_DRAIN` seconds at
        most), so no write it accepted is left in the database alone, where a rebuild would lose it (review
        20b). `_stand_down` lets the lease go."""
        sync = self.rt.sync
        if sync is None or self.reconciler is not None:
            return
        if self.rt.store.db.check_file() is not None:  # the database this process used is gone: not its to do
            return
        try:
            if not await self.rt.store.read(outbox_sql.has_waiting) or not self.lease.try_acquire():
                return
            await remove_leftovers(sync.root, self.rt.store)
            write_again(sync.root)
            sync.writable = True
            done = await asyncio.wait_for(drain(self.rt), LEAVING_DRAIN)
            log.info("wrote %d queued change(s) into the vault before stopping", done.applied)
        except Exception:  # stopping goes on whatever happens here; the rows stay queued for the next holder
            log.exception("the queued writes could not all be written before stopping; they stay queued")
        finally:
            sync.writable = False

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until the holder has nothing pending (returns at once on a follower)."""
        if self.reconciler is not None:
            await self.reconciler.wait_idle(timeout)

    async def _become_holder(self) -> None:
        assert self.rt.sync is not None
        # The only writer now: temp files of a writer killed mid-edit are nobody's any more. Removed before
        # this process writes anything, off the event loop (it walks the vault's folders).
        await remove_leftovers(self.rt.sync.root, self.rt.store)
        self._stubs_swept = time.monotonic()
        write_again(self.rt.sync.root)
        await self._keep_recorded_writes()
        self._kept_log = kept_sql.KeptLog(self.rt.settings.db_path)
        record_kept(self.rt.sync.root, self._kept_log.record)
        self.rt.sync.writable = True
        self.reconciler = LiveReconciler(
            self.rt.sync,
            watch=self.rt.settings.watch,
            poll=self.rt.settings.poll,
            quiet=self._quiet,
            storm_threshold=self._storm_threshold,
            on_update=self._publish,
            on_notes_changed=self._on_notes_changed,
        )
        await self.reconciler.start()
        self._outbox_due.set()  # drain at once what followers queued while nobody held the lease
        self._outbox = asyncio.create_task(self._drain_outbox(), name="engrama-outbox")

    async def _keep_recorded_writes(self) -> None:
        """Keep the tool writes the process that held the vault before this one was keeping when it stopped
        (`kept_sql`): what is left of their time, and a write an editor saved an older copy over while it was
        kept is made again on top of the person's text. Called before this process writes anything."""
        assert self.rt.sync is not None
        sync = self.rt.sync
        try:
            recorded = await self.rt.store.read(kept_sql.recorded)
        except Exception as exc:  # e.g. the database refuses reads: the vault is served all the same
            log.warning("could not read the tool writes kept by the process before this one: %s", exc)
            return
        now = time.time()
        for kept in recorded:
            edit = keep_recorded(sync.root, kept, now)
            if await asyncio.to_thread(saved_over_since, sync.root, kept):
                log.warning(
                    "%s: an editor saved an older copy over engrama's write while the process that made it "
                    "stopped; it is made again on top of the person's text",
                    kept.rel,
                )
                sync.write_again_later(kept.rel, edit)
        with contextlib.suppress(Exception):
            await self.rt.store.write(kept_sql.forget, [k for k in recorded if k.until <= now])

    async def _drain_outbox(self) -> None:
        """Apply the writes other processes queued, whenever the supervisor says it is time (every tick).

        A task of its own, so a long backlog never delays the lease upkeep."""
        while True:
            await self._outbox_due.wait()
            self._outbox_due.clear()
            try:
                await drain(self.rt)
            except Exception:  # the outermost handler of a task that must outlive any one failure
                log.exception("applying queued writes failed; retrying in %.0f s", self._retry)

    async def _supervise(self) -> None:
        """Followers retry the lease; the holder keeps its watcher alive. Once per `retry` seconds, cheaply."""
        while True:
            await asyncio.sleep(self._retry)
            try:
                if (lost := self.rt.store.db.check_file()) is not None:
                    log.error("%s", lost)
                    assert self.rt.sync is not None  # live sync runs only with a vault
                    self.rt.sync.writable = False
                    await self._stand_down()
                    return
                await self.rt.store.db.settle_after_burst()
                if self.reconciler is None:
                    if self.lease.try_acquire():
                        log.info("the vault lease was free; this process now watches and writes the vault")
                        await self._become_holder()
                else:
                    self.reconciler.tick()
                    self._outbox_due.set()
                    # What a call killed within STUB_GRACE before this process took the lease left.
                    if time.monotonic() - self._stubs_swept >= STUB_SWEEP:
                        self._stubs_swept = time.monotonic()
                        await drop_stubs_left_over(self.rt.store)
            except OSError as exc:  # e.g. a read-only data folder; try again next tick, say so once
                if str(exc) != self._last_error:
                    log.warning("cannot take the vault lease %s: %s; retrying", self.lease.path, exc)
                self._last_error = str(exc)
            except Exception:  # the outermost handler of a task that must outlive any one failure
                log.exception("live sync upkeep failed; retrying in %.0f s", self._retry)
            else:
                self._last_error = None
            self._publish()

    async def _stand_down(self) -> None:
        """Stop watching and writing, and let the lease go (at stop, or for good when the database file is gone:
        then a process on the new file can take the vault over, and this one writes no note into the vault
        that its graph would keep to itself)."""
        if self._outbox is not None:  # a row cut short stays queued; the next holder applies it again
            self._outbox.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._outbox
            self._outbox = None
        was_holder = self.reconciler is not None
        if self.reconciler is not None:
            await self.reconciler.stop()
            self.reconciler = None
        if self._sharing is not None:
            self._sharing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sharing
            self._sharing = None
        if was_holder:  # followers must not go on reporting this process's last facts
            with contextlib.suppress(Exception):  # e.g. the database file is gone
                await self.rt.store.set_meta(SHARED_KEY, json.dumps({"released": True, "pid": os.getpid()}))
        # Tool calls cut short (the client went away) may still be writing on their threads: the lease goes once
        # they are done or have given up, so the next holder is the vault's only writer.
        if (sync := self.rt.sync) is not None and self.lease.held:
            sync.writable = False  # a tool call from now on queues its write for the next holder
            if not await asyncio.to_thread(let_go, self.rt.vault, LET_GO_WAIT):
                log.warning(
                    "a write into the vault was still under way after %.0f s; letting go", LET_GO_WAIT
                )
        if sync is not None:
            record_kept(sync.root, None)
        if self._kept_log is not None:
            self._kept_log.close()
            self._kept_log = None
            with contextlib.suppress(Exception):  # past their time, this process's records are done with
                await self.rt.store.write(kept_sql.forget_past, time.time())
        self.lease.release()
        if self._running:
            self._running = False
            self.rt.state.update(lease="off", watching=False, pending=0, polling_seconds=None)

    def _publish(self) -> None:
        """Copy the live facts into `rt.state`, where `engrama_status` reads them."""
        state, rec = self.rt.state, self.reconciler
        state["lease"] = self.role
        state["watching"] = rec.watching if rec else False
        state["pending"] = rec.pending if rec else 0
        state["unsettled"] = rec.unsettled if rec else 0
        # Notes the first catch-up (no reconcile finished yet) still has to read: the graph is only part of the
        # vault meanwhile (`status.first_catch_up`).
        if rec is None or rec.last_reconcile_at is not None:
            state["taking_in"] = 0
        else:  # -1: still walking the vault, how many notes it has to read is not known yet
            state["taking_in"] = -1 if rec.reading_left is None else rec.reading_left
        polling = rec.polling if rec else None
        state["polling_seconds"] = round(polling, 1) if polling is not None else None
        if rec is not None and rec.last_reconcile_at is not None:
            state["last_reconcile_at"] = rec.last_reconcile_at.strftime(clock.FORMAT)
        if rec is not None:
            self._share(state)

    def _share(self, state: dict[str, Any]) -> None:
        """Share the holder's live facts through the database: at once when `pending` becomes or stops being 0
        or watching changes (a follower's client may be waiting on it), other changes at most every SHARE_EVERY
        seconds (the upkeep publishes every second, so the last one is shared too), and nothing while nothing
        changes: an idle server writes nothing (a heartbeat kept the database from settling after a burst and
        wrote ~400 MB a day; review 17b). Whether the facts are current is the lease's to say (`shared_facts`)."""
        facts = {
            key: state.get(key)
            for key in ("watching", "pending", "polling_seconds", "last_reconcile_at", "taking_in")
        }
        before = self._shared
        if facts == before:
            return
        urgent = (
            before is None
            or (before["pending"] == 0) != (facts["pending"] == 0)
            or before["watching"] != facts["watching"]
        )
        if not urgent and time.monotonic() - self._shared_at < SHARE_EVERY:
            return
        self._shared, self._shared_at = facts, time.monotonic()
        self._share_wanted = facts
        if self._sharing is None or self._sharing.done():
            self._sharing = asyncio.create_task(self._write_shares(), name="engrama-share")

    async def _write_shares(self) -> None:
        """Write the latest facts wanted, until none is left (one write in flight at a time)."""
        while (facts := self._share_wanted) is not None:
            self._share_wanted = None
            row = json.dumps({**facts, "pid": os.getpid()})
            try:
                await self.rt.store.set_meta(SHARED_KEY, row)
            except Exception as exc:  # status facts only: the next share tries again
                log.debug("could not share the live facts: %s", exc)
                self._shared = None


def shared_facts(raw: str | None, holder_pid: int | None) -> dict[str, Any] | None:
    """The lease holder's live facts as it last shared them (`LiveSync._share`), or None when they are not the
    current holder's: none were shared, they are another process's than the one the lease file names
    (`holder_pid`: a holder killed leaves its pid there until a follower takes over, within a second), or
    that process let the vault go."""
    if not raw or holder_pid is None:
        return None
    try:
        facts = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(facts, dict) or facts.get("released") or facts.get("pid") != holder_pid:
        return None
    return facts


@asynccontextmanager
async def live_sync(
    rt: Runtime,
    *,
    quiet: float = DEFAULT_QUIET,
    storm_threshold: int = STORM_THRESHOLD,
    retry: float = LEASE_RETRY,
    on_notes_changed: Callable[[], None] = lambda: None,
) -> AsyncIterator[LiveSync]:
    """Keep the graph in step with the vault for as long as the context is open (the server's lifespan).

    Returns at once: the start-up catch-up runs in the background. With no vault configured it does nothing.
    The keyword arguments tune the timings (debounce window, storm threshold, lease retry) for tests;
    `on_notes_changed` is called when the holder's reconciles create, archive or move notes.
    """
    live = LiveSync(
        rt, quiet=quiet, storm_threshold=storm_threshold, retry=retry, on_notes_changed=on_notes_changed
    )
    await live.start()
    try:
        yield live
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled server still releases the lease
            await live.stop()
