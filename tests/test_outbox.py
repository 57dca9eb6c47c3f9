"""A write made through a second client's server reaches the vault (issue 12, item 4): the outbox.

Two real `engrama-vault serve` processes on one vault and one database, as Claude Desktop and Cursor start
them: the first holds the vault's lease, the second (driven by a real stdio MCP client) is a follower. What the
follower accepts is queued in the shared database with its graph change and written into the notes by the
holder, or by the follower itself once it takes the lease.
"""

from __future__ import annotations

import json
import logging
import signal
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from server.live import live_sync
from server.reflect.service import decide_insight, reflect
from server.runtime import Runtime, open_runtime
from server.services import outbox
from server.services.entities import RelationSpec
from server.services.forget import forget
from server.services.relate import relate
from server.services.remember import remember
from server.settings import Settings
from server.store import outbox_sql
from tests.test_e2e_stdio import COMMAND, call, serve_args
from tests.test_live import eventually
from tests.test_reflect_lifecycle import two_projects_on_sqlite
from tests.test_reflect_support import synced
from vault_sync.lease import lease_path
from vault_sync.outbox import EntityChange, decode

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")

ATLAS = "---\ntype: Project\n---\nAtlas is our build system.\n"


class Holder:
    """`engrama-vault serve` as an MCP client spawns it (stdin kept open), holding the vault's lease."""

    def __init__(self, vault: Path, db_path: Path, log: Path) -> None:
        self.db_path = db_path
        self.log = log
        with open(log, "w", encoding="utf-8") as errlog:
            self.proc = subprocess.Popen(
                [str(COMMAND), *serve_args(vault, db_path), "--log-level", "INFO"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errlog,
            )

    def holds_lease(self) -> bool:
        try:
            return lease_path(self.db_path).read_text(encoding="utf-8").strip() == str(self.proc.pid)
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the client went away: the server stops cleanly
            self.proc.wait(timeout=30)


@pytest.fixture
def holder(vault: Path, db_path: Path, tmp_path: Path) -> Iterator[Holder]:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    server = Holder(vault, db_path, tmp_path / "holder.log")
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        print(f"--- holder.log\n{server.log.read_text(encoding='utf-8')}")


@asynccontextmanager
async def follower(vault: Path, db_path: Path, log: Path, *extra: str) -> AsyncIterator[ClientSession]:
    """A second server, driven over stdio by a real MCP client, started once the holder has the lease."""
    params = StdioServerParameters(command=str(COMMAND), args=[*serve_args(vault, db_path), *extra])
    with open(log, "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def started(holder: Holder, vault: Path) -> None:
    """The holder has the lease and has given Atlas.md its id (so it is in the graph)."""
    await eventually(holder.holds_lease, 30, "the first server taking the lease")
    await eventually(lambda: "engrama_id:" in (vault / "Projects/Atlas.md").read_text(encoding="utf-8"), 30)


async def outbox_of(session: ClientSession) -> dict[str, Any]:
    return (await call(session, "engrama_status", {}))["vault"]["outbox"]


def text(vault: Path, rel: str) -> str:
    path = vault / rel
    return path.read_text(encoding="utf-8") if path.exists() else ""


async def test_a_followers_remember_and_relate_reach_the_vault_and_survive_a_rebuild(
    vault: Path, db_path: Path, tmp_path: Path, holder: Holder
) -> None:
    await started(holder, vault)
    async with follower(vault, db_path, tmp_path / "follower.log") as session:
        status = (await call(session, "engrama_status", {}))["vault"]
        assert status["lease"] == "follower" and status["watching"] is True  # the holder watches
        assert status["holder_pid"] == holder.proc.pid and status["pending"] == 0
        zig = await call(
            session,
            "engrama_remember",
            {"label": "Technology", "name": "Zig", "observation": "A systems language with comptime."},
        )
        assert "queued" in zig["message"] and "Technologies/" in zig["message"]
        related = await call(
            session, "engrama_relate", {"source": "Atlas", "rel_type": "USES", "target": "Zig"}
        )
        assert "queued" in related["message"] and "Projects/Atlas.md" in related["message"]

        await eventually(lambda: f"engrama_id: {zig['id']}" in text(vault, "Technologies/Zig.md"), 20)
        await eventually(lambda: '"[[Technologies/Zig]]"' in text(vault, "Projects/Atlas.md"), 20)
        await eventually(lambda: _drained(session), 20, "the outbox emptying")
    zig_note = text(vault, "Technologies/Zig.md")
    assert zig_note.count("A systems language with comptime.") == 1
    atlas = text(vault, "Projects/Atlas.md")
    assert '  USES:\n    - "[[Technologies/Zig]]"\n' in atlas and atlas.endswith(
        "---\nAtlas is our build system.\n"
    )
    holder.stop()

    for leftover in db_path.parent.glob(db_path.name + "*"):
        leftover.unlink()  # the database, its WAL and the lease: rebuild from the vault alone
    subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path), "--json"],
        capture_output=True,
        timeout=120,
        check=True,
    )
    with sqlite3.connect(db_path) as db:
        nodes = dict(db.execute("select name, id from nodes where status = 'active' and path is not null"))
        assert nodes["Zig"] == zig["id"]
        edges = db.execute(
            "select count(*) from edges where source = ? and type = 'USES' and target = ? and valid_to is null",
            (nodes["Atlas"], nodes["Zig"]),
        ).fetchone()
        assert edges == (1,)


async def test_a_server_without_a_watcher_never_writes_beside_the_lease_holder(
    vault: Path, db_path: Path, tmp_path: Path, holder: Holder
) -> None:
    """Found by review: `serve --no-watch` (ENGRAMA_WATCH=0) took no lease and wrote the vault itself, a
    second writer beside the server holding the lease. It now follows the lease like any server."""
    await started(holder, vault)
    async with follower(vault, db_path, tmp_path / "nowatch.log", "--no-watch") as session:
        status = (await call(session, "engrama_status", {}))["vault"]
        assert status["lease"] == "follower"  # and says the holder watches (`watching` is the holder's)
        done = await call(session, "engrama_remember", {"label": "Technology", "name": "Zig"})
        assert "queued" in done["message"]  # the holder writes it
        await eventually(lambda: f"engrama_id: {done['id']}" in text(vault, "Technologies/Zig.md"), 20)
        await eventually(lambda: _drained(session), 20, "the outbox emptying")
    assert holder.holds_lease()


async def test_a_followers_status_shows_the_holders_backlog_and_0_only_once_in_step(
    vault: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 17a: a follower (the second client on one vault) always said `pending: 0` and `watching: false`,
    its own idle state, while the holder still had notes to read and id lines to write: a client waiting there
    for "nothing pending" went on at once and searched a graph without the notes just written. The holder now
    shares its facts through the database and a follower reports them."""
    monkeypatch.delenv("ENGRAMA_SETTLE_SECONDS")  # production window: a just-written note owes its line ~3 s
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    server = Holder(vault, db_path, tmp_path / "holder.log")
    try:
        await eventually(server.holds_lease, 30, "the first server taking the lease")
        async with follower(vault, db_path, tmp_path / "follower.log") as session:

            async def vault_status() -> dict[str, Any]:
                return (await call(session, "engrama_status", {}))["vault"]

            await eventually(lambda: _in_step(session), 30, "the holder's catch-up")
            notes = [vault / "Projects" / f"Quetzal {i}.md" for i in range(10)]
            for i, note in enumerate(notes):
                note.write_text(f"# Quetzal {i}\nA note about the quetzal, number {i}.\n", encoding="utf-8")
            backlog = await eventually(lambda: _backlog(session), 10, "the holder's backlog at the follower")
            assert backlog["lease"] == "follower" and backlog["holder_pid"] == server.proc.pid
            status = await eventually(lambda: _in_step(session), 30, "the follower reporting 0 pending")
            assert status["watching"] is True  # the holder's watcher
            # 0 pending was reported only once the holder was done: every note has its line and is found.
            assert all("engrama_id:" in note.read_text(encoding="utf-8") for note in notes)
            found = await call(session, "engrama_search", {"query": "quetzal", "limit": 20})
            assert len(found["results"]) == 10
    finally:
        server.stop()
        print(f"--- holder.log\n{server.log.read_text(encoding='utf-8')}")


async def _backlog(session: ClientSession) -> dict[str, Any] | None:
    status = (await call(session, "engrama_status", {}))["vault"]
    return status if status["pending"] > 0 else None


async def _in_step(session: ClientSession) -> dict[str, Any] | None:
    status = (await call(session, "engrama_status", {}))["vault"]
    return status if status["pending"] == 0 else None


async def _drained(session: ClientSession) -> bool:
    return (await outbox_of(session))["waiting"] == 0


async def test_a_followers_forget_sets_the_notes_status_line(
    vault: Path, db_path: Path, tmp_path: Path, holder: Holder
) -> None:
    await started(holder, vault)
    before = text(vault, "Projects/Atlas.md")
    async with follower(vault, db_path, tmp_path / "follower.log") as session:
        done = await call(session, "engrama_forget", {"name": "Atlas"})
        assert done["status"] == "archived" and "queued" in done["message"]
        await eventually(lambda: "status: archived" in text(vault, "Projects/Atlas.md"), 20)
    assert text(vault, "Projects/Atlas.md") == before.replace("---\nAtlas", "status: archived\n---\nAtlas")


async def test_a_write_queued_while_the_holder_dies_is_written_by_the_follower_that_takes_over(
    vault: Path, db_path: Path, tmp_path: Path, holder: Holder
) -> None:
    await started(holder, vault)
    async with follower(vault, db_path, tmp_path / "follower.log") as session:
        holder.proc.send_signal(signal.SIGSTOP)  # frozen: it keeps the lease but applies nothing
        try:
            zig = await call(session, "engrama_remember", {"label": "Technology", "name": "Zig"})
            assert "queued" in zig["message"]
            assert (await outbox_of(session))["waiting"] == 1
        finally:
            holder.proc.send_signal(signal.SIGKILL)
            holder.proc.wait(timeout=10)
        await eventually(lambda: f"engrama_id: {zig['id']}" in text(vault, "Technologies/Zig.md"), 20)
        status = await call(session, "engrama_status", {})
        assert status["vault"]["watching"] is True  # the follower took the lease over
        assert int(lease_path(db_path).read_text(encoding="utf-8")) != holder.proc.pid
        await eventually(lambda: _drained(session), 20, "the outbox emptying")


async def test_a_killed_holder_is_not_reported_as_watching(
    vault: Path, db_path: Path, tmp_path: Path, holder: Holder
) -> None:
    """Review 20b: after the lease holder was SIGKILLed with no follower left, `engrama-vault status` still said
    the vault was watched, with nothing pending, from the dead holder's last shared facts."""
    await started(holder, vault)
    status = ["status", "--vault", str(vault), "--db", str(db_path), "--json"]

    def watching() -> bool:
        done = subprocess.run([str(COMMAND), *status], capture_output=True, text=True, timeout=60)
        return bool(json.loads(done.stdout)["vault"]["watching"])

    await eventually(watching, 20, "the holder's facts shared")
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait()
    assert not watching()


async def test_a_write_into_a_malformed_note_waits_visibly_until_the_note_is_fixed(
    vault: Path, db_path: Path, tmp_path: Path, holder: Holder
) -> None:
    await started(holder, vault)
    good = text(vault, "Projects/Atlas.md")
    (vault / "Projects/Atlas.md").write_text(
        good.replace("type: Project", "type: [Project"), encoding="utf-8"
    )
    async with follower(vault, db_path, tmp_path / "follower.log") as session:
        await call(session, "engrama_relate", {"source": "Atlas", "rel_type": "USES", "target": "Zig"})
        waiting = await eventually(lambda: _failing(session), 20, "the write failing visibly")
        assert waiting["waiting"] == 1 and "Projects/Atlas.md" in waiting["error"]
        assert waiting["oldest_age_seconds"] >= 0
        assert "[[Zig]]" not in text(vault, "Projects/Atlas.md")  # the person's broken note is left alone

        (vault / "Projects/Atlas.md").write_text(good, encoding="utf-8")
        await eventually(lambda: '"[[Zig]]"' in text(vault, "Projects/Atlas.md"), 20)
        await eventually(lambda: _drained(session), 20, "the outbox emptying")


async def test_a_followers_write_into_a_note_just_brought_from_another_computer_lands_once_that_save_is_older(
    vault: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder writes a queued change under the same rule as its own tool calls: not into a note whose last
    save a sync tool brought from another computer under half a minute ago (the person may still be typing it
    there). The row waits, saying why, and lands once that save is older. (The holder runs with the
    production settle window: without one, the person's choice of "at once", nothing waits.)"""

    from vault_sync.writer import ARRIVED_QUIET

    monkeypatch.setenv("ENGRAMA_SETTLE_SECONDS", "3")
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    holder = Holder(vault, db_path, tmp_path / "holder.log")
    try:
        await _write_lands_after_the_wait(holder, vault, db_path, tmp_path, ARRIVED_QUIET)
    finally:
        holder.stop()
        print(f"--- holder.log\n{holder.log.read_text(encoding='utf-8')}")
    log = holder.log.read_text(encoding="utf-8")
    assert log.count("waits: Projects/Atlas.md holds a save made") == 1  # said once, not every second


async def _write_lands_after_the_wait(
    holder: Holder, vault: Path, db_path: Path, tmp_path: Path, arrived_quiet: float
) -> None:
    import os
    import time

    await started(holder, vault)
    note = vault / "Projects/Atlas.md"
    laptop = text(vault, "Projects/Atlas.md") + "Typed on the laptop.\n"
    note.write_text(laptop, encoding="utf-8")
    then = time.time() - 5  # saved on the laptop 5 s ago, brought here now
    os.utime(note, (then, then))
    async with follower(vault, db_path, tmp_path / "follower.log") as session:
        await call(session, "engrama_relate", {"source": "Atlas", "rel_type": "USES", "target": "Zig"})
        waiting = await eventually(lambda: _failing(session), 20, "the write waiting visibly")
        assert "another computer" in waiting["error"] and text(vault, "Projects/Atlas.md") == laptop
        then = time.time() - arrived_quiet - 1  # the person has left the note there
        os.utime(note, (then, then))
        await eventually(lambda: '"[[Zig]]"' in text(vault, "Projects/Atlas.md"), 20)
        assert "Typed on the laptop." in text(vault, "Projects/Atlas.md")
        await eventually(lambda: _drained(session), 20, "the outbox emptying")


async def _failing(session: ClientSession) -> dict[str, Any] | None:
    found = await outbox_of(session)
    return found if found.get("error") else None


# --- in one process: replaying a row changes nothing ---------------------------------------------------------


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        yield runtime


async def queued_rows(rt: Runtime) -> list[outbox_sql.QueuedRow]:
    return await rt.store.read(outbox_sql.waiting, 0, 100)


async def test_a_row_replayed_after_a_crash_writes_nothing_twice(rt: Runtime, vault: Path) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    await rt.require_sync().sync_vault()
    rt.require_sync().writable = False  # another process holds the lease
    await remember(rt, "Technology", "Zig", {"status": "new"}, "Fast to compile.")
    await relate(rt, "Atlas", "USES", "Zig")
    await forget(rt, "Atlas")
    rows = await queued_rows(rt)
    assert [r.kind for r in rows] == ["entity", "entity", "archive"]

    rt.require_sync().writable = True  # the lease comes to this process
    assert await outbox.drain(rt) == outbox.Drained(3, 0)
    notes = {p: (vault / p).read_bytes() for p in ("Projects/Atlas.md", "Technologies/Zig.md")}
    assert (
        b"status: archived" in notes["Projects/Atlas.md"]
        and b'"[[Technologies/Zig]]"' in notes["Projects/Atlas.md"]
    )
    assert notes["Technologies/Zig.md"].count(b"Fast to compile.") == 1
    open_tool_edges = "select count(*) from edges where origin = 'tool' and valid_to is null"
    assert await rt.store.read(lambda conn: conn.execute(open_tool_edges).fetchone()[0]) == 0  # as a rebuild

    # A SIGKILL after the note writes but before the rows were dropped: they are all applied again.
    for row in rows:
        await rt.store.write(outbox_sql.enqueue, decode(row.kind, row.payload), row.queued_at)
    assert await outbox.drain(rt) == outbox.Drained(3, 0)
    assert {p: (vault / p).read_bytes() for p in notes} == notes
    assert await queued_rows(rt) == []


async def _atlas(rt: Runtime, vault: Path) -> Path:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    await rt.require_sync().sync_vault()
    return vault / "Projects/Atlas.md"


async def test_a_write_queued_earlier_lands_before_the_holders_own_and_does_not_undo_it(
    rt: Runtime, vault: Path
) -> None:
    """Review 20b: a follower's `status: paused` queued, then the holder's own client set `status: shipped`:
    the holder wrote `shipped` at once and its drain then wrote the older `paused` over it. The same for a
    forget queued and a remember that made the entity current again."""
    note = await _atlas(rt, vault)
    sync = rt.require_sync()
    sync.writable = False  # another process holds the lease
    await remember(rt, "Project", "Atlas", {"status": "paused"})
    sync.writable = True  # this one, now the lease holder, writes for its own client
    await remember(rt, "Project", "Atlas", {"status": "shipped"}, "shipped on Friday")
    assert await outbox.drain(rt) == outbox.Drained(0, 0) and await queued_rows(rt) == []
    assert "status: shipped" in note.read_text(encoding="utf-8")
    sync.writable = False
    await forget(rt, "Atlas")
    sync.writable = True
    await remember(rt, "Project", "Atlas", {}, "picked up again")
    await outbox.drain(rt)
    written = note.read_text(encoding="utf-8")
    assert "status: archived" not in written and "picked up again" in written
    assert (await rt.store.find_nodes("Atlas"))[0].status == "active"


async def test_a_forget_queued_lands_before_a_relation_that_brings_its_entity_back(
    rt: Runtime, vault: Path
) -> None:
    """Review 20e: a follower forgot Borealis (queued); the holder's own client then related Atlas to it, which
    made Borealis current again ("was archived and is current again"); the drain then archived it."""
    await _atlas(rt, vault)
    (vault / "Projects/Borealis.md").write_text("---\ntype: Project\n---\nBorealis.\n", encoding="utf-8")
    sync = rt.require_sync()
    await sync.sync_vault()
    for bring_back in (
        lambda: relate(rt, "Atlas", "RELATED_TO", "Borealis"),
        lambda: remember(
            rt, "Project", "Atlas", {}, "works with Borealis", [RelationSpec("RELATED_TO", "Borealis")]
        ),
    ):
        sync.writable = False
        await forget(rt, "Borealis")
        sync.writable = True
        await bring_back()
        await outbox.drain(rt)
        assert (await rt.store.find_nodes("Borealis"))[0].status == "active"
        assert "status: archived" not in (vault / "Projects/Borealis.md").read_text(encoding="utf-8")


async def test_a_queued_write_leaves_a_value_the_person_changed_since_and_writes_the_rest(
    rt: Runtime, vault: Path
) -> None:
    """Review 20b: a follower's write waited (the note's YAML was broken); the person fixed the YAML and set
    `status: done` in the same save; the queued `status: paused` then landed over it."""
    note = await _atlas(rt, vault)
    sync = rt.require_sync()
    sync.writable = False
    await remember(rt, "Project", "Atlas", {"status": "paused", "owner": "Ana"}, "met the supplier")
    note.write_text(note.read_text(encoding="utf-8").replace("type: Project", "type: Project\nstatus: done"))
    await sync.sync_path("Projects/Atlas.md")
    sync.writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    written = note.read_text(encoding="utf-8")
    assert "status: done" in written and "status: paused" not in written  # the person's value stands
    assert "owner: Ana" in written and "met the supplier" in written  # the rest of the write lands
    # A key the person did not touch is written, whatever else they changed in the note.
    sync.writable = False
    await remember(rt, "Project", "Atlas", {"phase": "beta"})
    note.write_text(note.read_text(encoding="utf-8") + "\nA paragraph the person added.\n", encoding="utf-8")
    await sync.sync_path("Projects/Atlas.md")
    sync.writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    written = note.read_text(encoding="utf-8")
    assert "phase: beta" in written and "A paragraph the person added." in written
    # The person's edit need not have been read yet (made while no server ran): the note is what counts.
    sync.writable = False
    await remember(rt, "Project", "Atlas", {"phase": "gamma"})
    note.write_text(
        note.read_text(encoding="utf-8").replace("phase: beta", "phase: launch"), encoding="utf-8"
    )
    sync.writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    written = note.read_text(encoding="utf-8")
    assert "phase: launch" in written and "phase: gamma" not in written


async def test_a_queued_forget_leaves_a_status_the_person_set_since(rt: Runtime, vault: Path) -> None:
    """Review 22a: a follower's forget was queued; before the holder wrote it, the person set `status:
    on-hold` in the note (without a server running); the drain wrote `status: archived` over it. A status the
    person did not touch is archived as asked, however else they edited the note."""
    note = await _atlas(rt, vault)
    note.write_text(
        note.read_text(encoding="utf-8").replace("type: Project", "type: Project\nstatus: active")
    )
    sync = rt.require_sync()
    await sync.sync_path("Projects/Atlas.md")
    sync.writable = False
    await forget(rt, "Atlas")  # queued
    note.write_text(note.read_text(encoding="utf-8").replace("status: active", "status: on-hold"))
    sync.writable = True  # the next holder's drain, no watcher having seen the edit
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    assert "status: on-hold" in note.read_text(encoding="utf-8")
    [atlas] = await rt.store.find_nodes("Atlas")
    assert atlas.status == "active"  # the graph follows the note
    sync.writable = False
    await forget(rt, "Atlas")
    note.write_text(note.read_text(encoding="utf-8") + "\nA paragraph the person added.\n", encoding="utf-8")
    sync.writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    written = note.read_text(encoding="utf-8")
    assert "status: archived" in written and "A paragraph the person added." in written
    archived = await rt.store.get_node(atlas.id)
    assert archived is not None and archived.status == "archived"


async def test_a_row_waiting_on_a_broken_note_does_not_read_it_again_at_every_drain(
    rt: Runtime, vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Review 20e: each drain (every second) reconciled the note of a row waiting on broken YAML again, and
    logged again that it cannot be read: thousands of lines an hour."""
    note = await _atlas(rt, vault)
    sync = rt.require_sync()
    sync.writable = False
    await remember(rt, "Project", "Atlas", {"status": "paused"})
    sync.writable = True
    note.write_text(
        note.read_text(encoding="utf-8").replace("type: Project", "type: [Project"), encoding="utf-8"
    )
    caplog.set_level(logging.WARNING, logger="vault_sync.reconcile")
    for _ in range(3):
        assert await outbox.drain(rt) == outbox.Drained(0, 1)
    assert caplog.text.count("cannot sync Projects/Atlas.md") == 1
    note.write_text(
        note.read_text(encoding="utf-8").replace("type: [Project", "type: Project"), encoding="utf-8"
    )
    assert await outbox.drain(rt) == outbox.Drained(1, 0)  # fixed: read again, and the row lands
    assert "status: paused" in note.read_text(encoding="utf-8")


async def test_queued_tags_meet_the_notes_own_as_properties_do(rt: Runtime, vault: Path) -> None:
    """Review 20e: the graph keeps tags and aliases apart from the properties, so a queued `tags` write had no
    base to meet and replaced the tags the person gave the note meanwhile."""
    note = await _atlas(rt, vault)
    sync = rt.require_sync()
    sync.writable = False
    await remember(rt, "Project", "Atlas", {"tags": ["alpha"]})
    note.write_text(
        note.read_text(encoding="utf-8").replace("type: Project", "type: Project\ntags: [personal]")
    )
    sync.writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    assert "tags: [personal]" in note.read_text(encoding="utf-8")
    sync.writable = False  # and untouched by the person, they land
    await remember(rt, "Project", "Atlas", {"aliases": ["ATL"]})
    note.write_text(note.read_text(encoding="utf-8") + "More text.\n", encoding="utf-8")
    sync.writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    assert "ATL" in note.read_text(encoding="utf-8")


async def test_a_queued_write_waiting_for_a_busy_note_holds_up_no_write_to_another(
    vault: Path, db_path: Path
) -> None:
    """Review 20d: the holder drained every queued row before each of its own writes, so a row waiting for a
    note the person was typing in held up every remember, relate and forget for the whole quiet wait."""
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False, settle=3.0)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        sync.writable = False
        await remember(rt, "Project", "Atlas", {"status": "paused"})
        sync.writable = True
        atlas = vault / "Projects/Atlas.md"
        atlas.write_text(atlas.read_text(encoding="utf-8") + "typing...\n", encoding="utf-8")  # being typed
        started = time.monotonic()
        await remember(rt, "Project", "Borealis", {}, "a new project")
        assert time.monotonic() - started < 2.0
        assert len(await queued_rows(rt)) == 1  # Atlas's row waits for the person, not Borealis's write


async def test_a_write_queued_when_every_server_is_gone_is_written_by_the_next_command_or_leaving_follower(
    vault: Path, db_path: Path
) -> None:
    """Review 20b: a follower's write queued, then the holder killed and the follower quitting (both clients
    closed together): the write waited in the database alone; `engrama-vault sync` took the lease without
    writing it, and a rebuild (the README's: delete the database, sync) lost it for good."""
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text(ATLAS, encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        rt.require_sync().writable = False  # a follower's write, and nobody left to apply it
        await remember(rt, "Technology", "Zig", {}, "Fast to compile.")
    done = subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "Fast to compile." in text(vault, "Technologies/Zig.md")
    async with open_runtime(settings) as rt:
        assert await queued_rows(rt) == []

    # A follower leaving after the holder went first writes what waits before it goes.
    async with open_runtime(settings) as first, live_sync(first, quiet=0.05, retry=60) as holding:
        await holding.wait_idle()
        async with open_runtime(settings) as second:
            async with live_sync(second, quiet=0.05, retry=60) as following:
                assert following.role == "follower"
                await remember(second, "Technology", "Rust", {}, "Safe by default.")
                assert len(await queued_rows(second)) == 1
                await holding.stop()  # the first client quits, its queued work undone
            assert "Safe by default." in text(vault, "Technologies/Rust.md")
            assert await queued_rows(second) == []


async def test_a_sync_command_says_which_queued_writes_it_could_not_apply(vault: Path, db_path: Path) -> None:
    """Review 22a: a follower's write queued for a note made read-only since; `engrama-vault sync` took the
    lease, could not write it, and printed "0 failed" with exit status 0 (a warning on stderr named the entity
    by its id). It now says what still waits and why, and exits 1; once the note is writable, it lands."""
    import os

    (vault / "Projects").mkdir()
    atlas = vault / "Projects/Atlas.md"
    atlas.write_text(ATLAS, encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        rt.require_sync().writable = False  # a follower's write, and nobody left to apply it
        await remember(rt, "Project", "Atlas", {}, "Queued for a locked note.")
    os.chmod(atlas, 0o444)
    command = [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "queued writes still waiting: 1" in done.stdout and "read-only" in done.stdout, done.stdout
    as_json = subprocess.run([*command, "--json"], capture_output=True, text=True)
    assert json.loads(as_json.stdout)["queued_writes_waiting"]["count"] == 1
    os.chmod(atlas, 0o644)
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and "queued writes" not in done.stdout, (done.stdout, done.stderr)
    assert "Queued for a locked note." in text(vault, "Projects/Atlas.md")


async def test_an_observation_drained_on_a_later_day_keeps_the_day_it_was_made(
    rt: Runtime, vault: Path
) -> None:
    rt.require_sync().writable = False
    done = await remember(rt, "Technology", "Zig", {}, "Fast to compile.")
    [row] = await queued_rows(rt)
    change = decode(row.kind, row.payload)
    assert isinstance(change, EntityChange) and change.day == date.today().isoformat()
    made = replace(
        change, day=(date.today() - timedelta(days=1)).isoformat()
    )  # the holder was down all night
    await rt.store.write(lambda conn: conn.execute("delete from outbox"))
    await rt.store.write(outbox_sql.enqueue, made, row.queued_at)

    rt.require_sync().writable = True
    assert await outbox.drain(rt) == outbox.Drained(1, 0)
    await rt.store.write(outbox_sql.enqueue, made, row.queued_at)
    assert await outbox.drain(rt) == outbox.Drained(1, 0)  # replayed: the bullet is found, not added again
    note = (vault / "Technologies/Zig.md").read_text(encoding="utf-8")
    assert f"engrama_id: {done.id}" in note
    assert note.count("Fast to compile.") == 1 and f"- {made.day}: Fast to compile." in note


async def test_a_followers_insight_decisions_are_recorded_by_the_holders_drain(
    vault: Path, db_path: Path
) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insights = {i.title.split()[-1]: i for i in (await reflect(rt)).insights}
        rt.require_sync().writable = False  # another process holds the lease
        approved = await decide_insight(rt, insights["SQLite"].id, "approve")
        await decide_insight(rt, insights["Redis"].id, "dismiss")
        assert "queued" in approved.message and not (vault / "Insights").exists()
        assert (await rt.store.read(outbox_sql.summary)).waiting == 2

        rt.require_sync().writable = True  # the lease holder's next tick, not the next reflect
        assert await outbox.drain(rt) == outbox.Drained(2, 0)
        assert (await rt.store.read(outbox_sql.summary)).waiting == 0
    assert (vault / "Insights/Shared technology - 2 entities build on SQLite.md").exists()
    dismissed = (vault / "Insights/Dismissed insights.md").read_text(encoding="utf-8")
    assert "Shared technology: 2 entities build on Redis" in dismissed


async def test_a_followers_entity_for_a_note_it_could_not_see_yet_becomes_that_notes_entity(
    rt: Runtime, vault: Path
) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects" / "Draft.md").write_text("Just created in Obsidian.\n", encoding="utf-8")
    rt.require_sync().writable = False  # the follower has not seen the note: it makes the entity in the graph
    queued = await relate(rt, "Draft", "USES", "SQLite", source_label="Project", target_label="Technology")
    assert queued.note_path is None
    rt.require_sync().writable = True  # the holder drains: the note exists, so the write goes into it
    assert (await outbox.drain(rt)).applied == 1
    graph_only = await rt.store.read(
        lambda c: c.execute("select id from nodes where path is null and status = 'active'").fetchall()
    )
    drafts = await rt.store.read(
        lambda c: c.execute("select id, path from nodes where name = 'Draft' and status != 'stub'").fetchall()
    )
    assert [tuple(r) for r in graph_only] == [] and [r["path"] for r in drafts] == ["Projects/Draft.md"]
    note = text(vault, "Projects/Draft.md")
    assert "Just created in Obsidian." in note and '"[[SQLite]]"' in note  # a stub: by its name
    around = await rt.store.read(
        lambda c: c.execute(
            "select t.name from edges e join nodes t on t.id = e.target where e.source = ? "
            "and e.valid_to is null",
            (drafts[0]["id"],),
        ).fetchall()
    )
    assert [r["name"] for r in around] == ["SQLite"]


async def test_a_followers_entity_goes_into_the_note_the_person_made_for_it_in_a_folder_of_their_own(
    rt: Runtime, vault: Path
) -> None:
    """Found by review: the person's `Work/Zeta.md` was not read yet when the follower's queued remember was
    drained, and the holder created `Projects/Zeta.md` beside it: two notes, two entities of one name."""
    await rt.require_sync().sync_vault()
    rt.require_sync().writable = False  # the follower sees no note for Zeta: it makes the entity in the graph
    queued = await remember(rt, "Project", "Zeta", {"status": "active"}, "Kick-off on Monday.")
    assert queued.path is None
    (vault / "Work").mkdir()
    (vault / "Work/Zeta.md").write_text("---\ntype: Project\n---\nZeta, as the person wrote it.\n", "utf-8")
    rt.require_sync().writable = True  # the holder drains before its watcher has read Work/Zeta.md
    assert (await outbox.drain(rt)).applied == 1
    assert sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md")) == ["Work/Zeta.md"]
    note = text(vault, "Work/Zeta.md")
    assert "Zeta, as the person wrote it." in note and "Kick-off on Monday." in note
    zetas = await rt.store.read(
        lambda c: c.execute("select path from nodes where name = 'Zeta' and status = 'active'").fetchall()
    )
    assert [r["path"] for r in zetas] == ["Work/Zeta.md"]


async def test_a_deleted_notes_node_a_follower_revived_is_archived_not_deleted_when_a_new_note_takes_it(
    rt: Runtime, vault: Path
) -> None:
    """Found by the soak (seed 777): the person deletes a note; the holder writes a new note of that name with
    a fresh id while a follower's write revives the old node in the graph (live, no path). Folding that node
    into the new note's must keep it, archived, as the record of the deleted note."""
    from server.store import memory_sql
    from server.store.clock import utc_now

    (vault / "People").mkdir()
    (vault / "People" / "Nimbus.md").write_text("---\ntype: Person\n---\nThe old note.\n", encoding="utf-8")
    (vault / "People" / "Lumen.md").write_text(
        "---\ntype: Person\n---\nKnows [[Nimbus]].\n", encoding="utf-8"
    )
    await rt.require_sync().sync_vault()
    old = next(n for n in await rt.store.find_nodes("Nimbus") if n.path == "People/Nimbus.md")
    (vault / "People" / "Nimbus.md").unlink()
    await rt.require_sync().sync_vault()  # deleted for good: archived
    (vault / "People" / "Nimbus.md").write_text("---\ntype: Person\n---\nA new note.\n", encoding="utf-8")
    await rt.require_sync().sync_vault()  # the new note takes the path (a fresh id)
    new = next(n for n in await rt.store.find_nodes("Nimbus") if n.path == "People/Nimbus.md")
    assert new.id != old.id
    await rt.store.write(memory_sql.revive_in_graph, old.id, utc_now())  # the follower's write
    assert await rt.store.write(memory_sql.fold_graph_only_node, old.id, new.id, utc_now())
    kept = await rt.store.get_node(old.id)
    assert kept is not None and kept.status == "archived"
    # A node that never had a note is still folded away entirely.
    made, _ = await rt.store.write(
        memory_sql.remember_in_graph, "Person", "Iris", {}, None, utc_now(), "", ()
    )
    assert await rt.store.write(memory_sql.fold_graph_only_node, made, new.id, utc_now())
    assert await rt.store.get_node(made) is None


async def test_the_archived_node_of_a_deleted_note_is_kept_when_a_new_note_of_its_name_takes_the_write(
    rt: Runtime, vault: Path
) -> None:
    from server.store import memory_sql
    from server.store.clock import utc_now

    (vault / "Projects").mkdir()
    (vault / "Projects" / "Draft.md").write_text("---\ntype: Project\n---\nFirst draft.\n", encoding="utf-8")
    await rt.require_sync().sync_vault()
    old = (await rt.store.find_nodes("Draft"))[0]
    await rt.store.write(  # its note deleted and the path taken: archived, without a path
        lambda c: c.execute("update nodes set status = 'archived', path = null where id = ?", (old.id,))
    )
    assert not await rt.store.write(memory_sql.fold_graph_only_node, old.id, "another", utc_now())
    assert (await rt.store.get_node(old.id)) is not None


def test_a_relation_queued_by_an_older_version_with_its_link_text_still_decodes() -> None:
    payload = json.dumps(
        {
            "node_id": "n1",
            "label": "Project",
            "name": "Atlas",
            "properties": {},
            "remove": [],
            "observation": None,
            "day": "2026-11-25",
            "reason": "",
            "relations": [["USES", "t1", "Kafka", "Technologies/Kafka"]],
        }
    )
    change = decode("entity", payload)
    assert isinstance(change, EntityChange)
    assert [(r.rel_type, r.target_id, r.target_name) for r in change.relations] == [("USES", "t1", "Kafka")]


def test_an_archive_queued_by_an_older_version_decodes_without_its_status() -> None:
    from vault_sync.outbox import ArchiveChange, encode

    old = decode("archive", json.dumps({"node_id": "n1", "name": "Atlas"}))
    assert old == ArchiveChange("n1", "Atlas", None)  # applied as it was: no status to compare
    new = ArchiveChange("n1", "Atlas", {"status": "active"})
    assert decode("archive", encode(new)) == new


@pytest.mark.parametrize("queued", ["forget", "remember"])
async def test_a_status_set_while_a_queued_write_waits_for_quiet_stays(
    vault: Path, db_path: Path, queued: str
) -> None:
    """Review 22i: the holder judged a queued write against the note before waiting for the person to pause;
    a status they set during that wait was then overwritten (3 runs in 8). It is judged on the bytes written."""
    import asyncio

    (vault / "Projects").mkdir()
    note = vault / "Projects/Atlas.md"
    note.write_text(ATLAS.replace("type: Project", "type: Project\nstatus: active"), encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False, settle=0.6)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        await asyncio.sleep(0.7)
        sync.writable = False  # a follower's write
        if queued == "forget":
            await forget(rt, "Atlas")
        else:
            await remember(rt, "Project", "Atlas", {"status": "shipped"})
        note.write_text(note.read_text(encoding="utf-8") + "Typing.\n", encoding="utf-8")  # the person types
        sync.writable = True
        drain = asyncio.create_task(outbox.drain(rt))  # waits for the pause
        await asyncio.sleep(0.3)
        assert not drain.done()
        note.write_text(
            note.read_text(encoding="utf-8").replace("status: active", "status: on-hold"), "utf-8"
        )
        await drain
    written = note.read_text(encoding="utf-8")
    assert "status: on-hold" in written and "Typing." in written, written
