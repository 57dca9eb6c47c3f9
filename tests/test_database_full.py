"""A database whose disk is full (or whose file may grow no more): the person is told what to do, in one line,
nothing in the vault changes beyond the id lines, and the graph takes in every note once it can write again.

The disk is filled for real: SQLite's own `max_page_count` for the store, and an OS limit on file sizes
(RLIMIT_FSIZE) for the installed command and server, lifted from outside (prlimit) as freeing space would.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from server.store.database import Database, DatabaseTrouble
from tests.test_e2e_stdio import COMMAND, call, serve_args
from tests.test_live_processes import eventually

resource = pytest.importorskip("resource")  # POSIX: limits on file sizes

LIMIT = 1_000_000  # bytes a file may hold: a new database fits (its first write-ahead log ~0.7 MB), the graph does not
WORDS = "harbor lantern orchard granite meadow copper willow ember quartz saffron tundra velvet".split()


def notes(vault: Path, count: int) -> dict[Path, bytes]:
    """`count` notes of varied words (a graph of them needs megabytes); their bytes as written."""
    rng = random.Random(7)
    written = {}
    for i in range(count):
        body = "\n".join(
            " ".join(rng.choice(WORDS) + str(rng.randrange(500)) for _ in range(14)) for _ in range(30)
        )
        path = vault / f"Note {i:03d}.md"
        path.write_text(f"---\ntags: [t{i % 7}]\n---\n# Note {i}\n{body}\n", encoding="utf-8")
        written[path] = path.read_bytes()
    return written


def only_id_lines_added(written: dict[Path, bytes]) -> None:
    for path, before in written.items():
        after = path.read_bytes().decode("utf-8").splitlines(keepends=True)
        kept = [line for line in after if not line.startswith("engrama_id: ")]
        assert "".join(kept).encode("utf-8") == before, path
        assert len(after) - len(kept) <= 1, path


async def test_a_write_the_disk_cannot_take_says_so_and_the_next_one_that_fits_clears_it(
    tmp_path: Path,
) -> None:
    db = await Database.open(tmp_path / "g.db")
    try:
        await db.transaction(lambda c: c.execute("create table filler (x text)"))
        pages = await db.run(lambda c: c.execute("pragma page_count").fetchone()[0])
        await db.run(lambda c: c.execute(f"pragma max_page_count = {pages + 2}"))

        def fill(conn: object) -> None:
            conn.executemany("insert into filler values (?)", [("x" * 3000,)] * 50)  # type: ignore[attr-defined]

        # SQLite rolls the transaction back itself on a full disk: the error said is that one, explained,
        # not the failure of a second rollback ("cannot rollback - no transaction is active").
        with pytest.raises(DatabaseTrouble, match="is full; free some space"):
            await db.transaction(fill)
        assert db.trouble() is not None and "is full" in db.trouble()  # type: ignore[operator]
        await db.transaction(lambda c: c.execute("insert into filler values ('small')"))  # fits
        assert db.trouble() is not None  # a small write fitting says nothing of the next big one
        assert db.trouble(caught_up=True) is None  # nothing waits to be written: nothing is held back
        await db.run(lambda c: c.execute("pragma max_page_count = 1073741823"))
        await db.transaction(fill)
        assert db.trouble() is None
    finally:
        await db.close()


def limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def test_a_sync_whose_database_cannot_grow_says_what_to_do_in_one_line(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    written = notes(vault, 300)
    env = {**os.environ, "ENGRAMA_SETTLE_SECONDS": "0"}
    done = subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(tmp_path / "g.db")],
        preexec_fn=lambda: limited(LIMIT),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("engrama-vault sync: the database ") and "could not be written" in said, said
    only_id_lines_added(written)


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="lifting another process's limit needs prlimit")
async def test_a_server_whose_database_disk_fills_says_so_and_takes_every_note_in_once_it_can(
    tmp_path: Path,
) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    written = notes(vault, 300)
    # The installed console script, started with a limit on the size of the files it writes.
    start = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, resource.RLIM_INFINITY)); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", start, str(COMMAND), *serve_args(vault, db)],
        env={**os.environ, "ENGRAMA_SETTLE_SECONDS": "0"},
    )
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()

            async def refused() -> dict | None:
                status = await call(session, "engrama_status", {})
                return status if not status["backend"]["ok"] else None

            status = await eventually(refused)
            assert "could not be written" in status["backend"]["problem"], status
            assert status["vault"]["pending"] > 0, status  # the graph is not in step, and says so
            found = await call(session, "engrama_search", {"query": "harbor lantern"})
            assert "cannot update its graph" in found["proactive_hint"], found
            assert status["vault"]["note_count"] < len(written)

            server = int((db.parent / (db.name + ".lease")).read_text().strip())
            resource.prlimit(server, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            started = time.monotonic()

            async def caught_up() -> dict | None:
                status = await call(session, "engrama_status", {})
                in_step = status["vault"]["pending"] == 0 and status["vault"]["note_count"] == len(written)
                return status if in_step else None

            status = await eventually(caught_up, timeout=90)
            assert status["backend"]["ok"] and "problem" not in status["backend"], status
            assert time.monotonic() - started < 70  # at the latest at the next attempt, a minute apart
            found = await call(session, "engrama_search", {"query": "harbor lantern"})
            assert "proactive_hint" not in found and found["results"], found
    log = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert "Traceback" not in log, log
    only_id_lines_added(written)


async def test_a_failure_long_past_is_no_longer_said_though_nothing_was_written_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 21e: a process that writes nothing (an idle follower) said the disk was full for good after space
    was freed; and a tool's refusal claimed a change was kept, where a second client's queued write was all."""
    from server.store import database
    from server.tools.common import tool_errors

    db = await Database.open(tmp_path / "g.db")
    try:
        pages = await db.run(lambda c: c.execute("pragma page_count").fetchone()[0])
        await db.run(lambda c: c.execute(f"pragma max_page_count = {pages}"))

        def fill(conn: object) -> None:
            conn.execute("create table filler as select zeroblob(100000) as x")  # type: ignore[attr-defined]

        with pytest.raises(DatabaseTrouble) as refused:
            await db.transaction(fill)
        with (
            pytest.raises(Exception, match="anything else was not saved: call the tool again") as said,
            tool_errors(),
        ):
            raise refused.value
        assert "stays in the vault; the graph" not in str(said.value)
        monkeypatch.setattr(database, "TROUBLE_SHOWN", 0.2)
        assert db.trouble() is not None
        time.sleep(0.3)
        assert db.trouble() is None  # nothing written since, and nothing failed for that long
    finally:
        await db.close()
