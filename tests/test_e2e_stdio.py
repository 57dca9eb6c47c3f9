"""End to end: the installed `engrama-vault serve`, spawned as an MCP client would, over real stdio."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.test_reconcile_process import fill_a_big_vault, wait_until_ids_are_written
from vault_sync.lease import lease_path
from vault_sync.paths import is_engrama_temp

COMMAND = Path(sys.executable).parent / "engrama-vault"
ENGRAMA = (
    "---\n# written by hand\ntype: Project\nstatus: active   # keep this comment\n---\n"
    "Engrama keeps an assistant's memory in an Obsidian vault.\n\nIt is built on [[SQLite]].\n"
)
pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


@pytest.fixture
def seeded(vault: Path) -> Path:
    (vault / "Projects").mkdir()
    (vault / "Projects/Engrama.md").write_text(ENGRAMA, encoding="utf-8")
    (vault / "Technologies").mkdir()
    (vault / "Technologies/SQLite.md").write_text(
        "SQLite is an embedded SQL database engine.\n", encoding="utf-8"
    )
    return vault


def serve_args(vault: Path, db_path: Path) -> list[str]:
    # No embedder, whatever is installed: a spawned server does not see the tests' EMBEDDING_PROVIDER=none.
    return ["serve", "--vault", str(vault), "--db", str(db_path), "--embedding-provider", "none"]


@contextlib.asynccontextmanager
async def synced_session(
    vault: Path,
    db_path: Path,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    embedder: str = "none",
    wrap: Sequence[str] = (),
) -> AsyncIterator[ClientSession]:
    """A session with the installed server on `vault` over stdio (with `env` as its environment, the `embedder`
    provider, and run through the command `wrap` when given), initialized, once engrama_sync_vault ran; its
    stderr goes to tmp_path/stderr.log."""
    command = [*wrap, str(COMMAND), *serve_args(vault, db_path)[:-1], embedder]
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await call(session, "engrama_sync_vault", {})
            yield session


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def error_of(session: ClientSession, name: str, args: dict[str, Any]) -> str:
    result = await session.call_tool(name, args)
    assert result.is_error
    return result.content[0].text  # type: ignore[union-attr]


async def test_a_realistic_session_over_stdio(seeded: Path, db_path: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(command=str(COMMAND), args=serve_args(seeded, db_path))
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        started = time.perf_counter()
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert time.perf_counter() - started < 10  # generous on a shared machine; bench measures it
            assert init.server_info.name == "engrama-vault"
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert len(tools) == 15 and all(n.startswith("engrama_") for n in tools)
            assert tools["engrama_search"].annotations.read_only_hint is True  # type: ignore[union-attr]
            assert tools["engrama_remember"].annotations.destructive_hint is False  # type: ignore[union-attr]
            assert tools["engrama_relate"].output_schema is not None

            synced = await call(session, "engrama_sync_vault", {})
            assert synced["scanned"] == 2 and not synced["errors"]
            found = await call(session, "engrama_search", {"query": "embedded SQL database"})
            assert found["results"][0]["name"] == "SQLite"
            remembered = await call(
                session,
                "engrama_remember",
                {"label": "Person", "name": "Maya Lindqvist", "observation": "Maintains the sync engine."},
            )
            related = await call(
                session,
                "engrama_relate",
                {"source": "Engrama", "rel_type": "USES", "target": "SQLite", "target_label": "Technology"},
            )
            around = await call(session, "engrama_context", {"name": "Engrama"})
            assert ("SQLite", "USES") in {(n["name"], n["rel_type"]) for n in around["neighbours"]}

            # Bad calls get a useful isError result, and the server keeps serving.
            assert "relations" in await error_of(
                session, "engrama_remember", {"label": "Project", "name": "X", "relations": 5}
            )
            assert "use one of" in await error_of(
                session, "engrama_remember", {"label": "Planet", "name": "X"}
            )
            assert "use one of" in await error_of(
                session, "engrama_relate", {"source": "Engrama", "rel_type": "ORBITS", "target": "X"}
            )
            assert "vault" in await error_of(session, "engrama_sync_note", {"path": "../../etc/passwd"})
            assert "100,000" in await error_of(session, "engrama_search", {"query": "x" * 100_001})
            assert (await call(session, "engrama_status", {}))["vault"]["configured"] is True

    person = (seeded / "People/Maya Lindqvist.md").read_text(encoding="utf-8")
    assert f"engrama_id: {remembered['id']}" in person and "Maintains the sync engine." in person
    assert related["note_path"] == "Projects/Engrama.md"
    note = (seeded / "Projects/Engrama.md").read_text(encoding="utf-8")
    assert note.startswith("---\n# written by hand\ntype: Project\nstatus: active   # keep this comment\n")
    assert '  USES:\n    - "[[Technologies/SQLite]]"\n' in note and "engrama_id: " in note
    assert note.endswith(
        "---\nEngrama keeps an assistant's memory in an Obsidian vault.\n\nIt is built on [[SQLite]].\n"
    )


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _receive(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """The next response; notifications the server may send meanwhile (`notifications/resources/list_changed`
    when the first sync finds notes) are skipped, as a client does."""
    assert proc.stdout is not None
    while "id" not in (message := json.loads(proc.stdout.readline())):
        assert message["method"].startswith("notifications/"), message
    return message


def test_a_2025_06_18_client_is_served_and_stdin_closing_stops_the_server(
    seeded: Path, db_path: Path
) -> None:
    proc = subprocess.Popen(
        [str(COMMAND), *serve_args(seeded, db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-ai", "version": "0.1.0"},
                },
            },
        )
        answer = _receive(proc)
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2025-06-18"
        assert answer["result"]["serverInfo"]["name"] == "engrama-vault"
        assert "tools" in answer["result"]["capabilities"]
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "engrama_status"}})
        status = _receive(proc)
        assert status["id"] == 2 and status["result"]["structuredContent"]["vault"]["configured"] is True
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_closes_everything_in_order(seeded: Path, db_path: Path, signum: int) -> None:
    proc = subprocess.Popen(
        [str(COMMAND), *serve_args(seeded, db_path), "--log-level", "INFO"],
        stdin=subprocess.PIPE,  # kept open: a client that is still connected
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "ping"})  # answered once the lifespan is up
        _receive(proc)
        proc.send_signal(signum)
        assert proc.wait(timeout=20) == 0
        assert proc.stderr is not None
        log = proc.stderr.read().decode()
        # In this order: the watcher and the lease close, then the lifespan ends, then the process.
        released = log.index("released the vault lease")
        assert released < log.index("engrama-vault stopped") < log.index("stopped by signal")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lease_path(db_path).read_bytes() == b""  # a released lease names nobody
    assert not [p for p in seeded.rglob("*") if is_engrama_temp(p.name)]


def test_sigterm_during_the_start_up_catch_up_leaves_a_graph_the_next_sync_completes(
    vault: Path, db_path: Path
) -> None:
    count = fill_a_big_vault(vault)
    proc = subprocess.Popen(
        [str(COMMAND), *serve_args(vault, db_path), "--log-level", "INFO"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        _receive(proc)
        wait_until_ids_are_written(vault, proc)  # the catch-up is reading and writing ids now
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    log = (
        proc.stderr.read().decode()
    )  # returns only once the reader workers, which share stderr, are gone too
    assert "released the vault lease" in log
    assert "vault reconciled" not in log  # the stop did cut the catch-up short
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    done = subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path), "--json"],
        capture_output=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["errors"] == []
    with sqlite3.connect(db_path) as db:
        assert db.execute(
            "SELECT count(*) FROM nodes WHERE status = 'active' AND path IS NOT NULL"
        ).fetchone() == (count,)
    ids = [
        line
        for p in vault.glob("*.md")
        for line in p.read_text().splitlines()
        if line.startswith("engrama_id:")
    ]
    assert len(ids) == len(set(ids)) == count  # every note has exactly one id, none was written twice
    assert not [p for p in vault.rglob("*") if is_engrama_temp(p.name)]  # no write was cut in the middle


@contextlib.contextmanager
def inotify_refused() -> Iterator[None]:
    """Use up this user's inotify instances (fs.inotify.max_user_instances; other programs' file watchers
    take from the same allowance), so the kernel refuses the next watcher, as on a machine where editors and
    sync clients hold them all. Given back on exit."""
    if not sys.platform.startswith("linux"):
        pytest.skip("inotify is Linux's")
    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    if limit > 512:
        pytest.skip(f"max_user_instances is {limit}: too many to use up in a test")
    libc = ctypes.CDLL(None, use_errno=True)
    held: list[int] = []
    try:
        while (fd := libc.inotify_init1(os.O_CLOEXEC)) >= 0:
            held.append(fd)
        assert ctypes.get_errno() == errno.EMFILE and len(held) <= limit
        yield
    finally:
        for fd in held:
            os.close(fd)


async def test_a_vault_the_os_refuses_to_watch_is_walked_for_edits_every_few_seconds(
    seeded: Path, db_path: Path, tmp_path: Path
) -> None:
    params = StdioServerParameters(command=str(COMMAND), args=serve_args(seeded, db_path))
    with inotify_refused(), open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            vault = (await call(session, "engrama_status", {}))["vault"]
            assert vault["watching"] is False and vault["polling_seconds"] >= 5
            (seeded / "Later.md").write_text(
                "# Later\nA quokka visited the zorbel orchard.\n", encoding="utf-8"
            )
            deadline = time.monotonic() + vault["polling_seconds"] + 10
            while not (await call(session, "engrama_search", {"query": "zorbel quokka"}))["results"]:
                assert time.monotonic() < deadline, "an edit was not seen while the OS refused a watcher"
                await asyncio.sleep(0.2)
    log = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert "max_user_instances" in log and log.count("cannot watch") == 1  # said once, not every 30 s


async def test_a_note_changed_where_the_watcher_cannot_see_is_found_by_the_walks_the_person_asked_for(
    seeded: Path, db_path: Path, tmp_path: Path
) -> None:
    """A network share, or WSL's /mnt/c edited by Obsidian on Windows, changes files without this kernel's
    watcher hearing of it. Here the note is changed through a hard link outside the vault: inotify reports a
    write to the folder it was made through, and the vault's folders are not that. ENGRAMA_POLL_SECONDS asks
    for walks beside the watcher (as the server does by itself on such file systems)."""
    note = seeded / "Technologies/DuckDB.md"  # it has its id: engrama never writes it, nor watches the file
    note.write_text(f"---\nengrama_id: {uuid.uuid4()}\n---\nDuckDB is an analytics database.\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.link(note, outside / "DuckDB.md")
    async with synced_session(seeded, db_path, tmp_path, env={"ENGRAMA_POLL_SECONDS": "1"}) as session:
        vault = (await call(session, "engrama_status", {}))["vault"]
        assert vault["watching"] is True and vault["polling_seconds"] >= 1
        with open(outside / "DuckDB.md", "a", encoding="utf-8") as f:
            f.write("It ships inside every zorbel quokka.\n")
        deadline = time.monotonic() + vault["polling_seconds"] + 10
        while not (await call(session, "engrama_search", {"query": "zorbel quokka"}))["results"]:
            assert time.monotonic() < deadline, "an edit the watcher could not see was never found"
            await asyncio.sleep(0.2)


async def test_a_database_deleted_under_the_server_is_said_and_the_vault_goes_to_a_server_on_the_new_file(
    seeded: Path, db_path: Path, tmp_path: Path
) -> None:
    """Found by review: a person resetting the graph (deleting the database, or putting a backup in its place)
    while the server ran got a server that went on in the unlinked file without a word, holding the vault, and
    a second client on the new file that waited in vain for its queued writes. With an embedder running (the
    default, with the local model), its worker stops quietly too, and the server exits cleanly."""
    async with synced_session(seeded, db_path, tmp_path, embedder="fake") as first:
        for side in ("", "-wal", "-shm"):
            Path(f"{db_path}{side}").unlink(missing_ok=True)
        deadline = time.monotonic() + 10
        while not (await first.call_tool("engrama_search", {"query": "SQLite"})).is_error:
            assert time.monotonic() < deadline, "the server never noticed its database was deleted"
            await asyncio.sleep(0.2)
        message = await error_of(first, "engrama_search", {"query": "SQLite"})
        assert "was deleted or replaced" in message and "restart the engrama server" in message
        (tmp_path / "second").mkdir()
        async with synced_session(seeded, db_path, tmp_path / "second") as second:
            deadline = time.monotonic() + 10
            while not (await call(second, "engrama_status", {}))["vault"]["watching"]:
                assert time.monotonic() < deadline, "the server on the new file never took the vault over"
                await asyncio.sleep(0.2)
            done = await call(
                second, "engrama_remember", {"label": "Project", "name": "Engrama", "observation": "Reset."}
            )
            assert done["path"] == "Projects/Engrama.md"
            assert "Reset." in (seeded / "Projects/Engrama.md").read_text(encoding="utf-8")
            assert (await call(second, "engrama_search", {"query": "embedded SQL"}))["results"]
        message = await error_of(first, "engrama_remember", {"label": "Project", "name": "Other"})
        assert "was deleted or replaced" in message and not (seeded / "Projects/Other.md").exists()
    log = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert "Traceback" not in log and "engrama-vault serve:" not in log, log


async def test_a_database_locked_by_another_program_gives_a_message_that_says_what_to_do(
    seeded: Path, db_path: Path, tmp_path: Path
) -> None:
    """Found by review: a database browser or backup tool holding the database made every write tool answer
    only "Error executing tool engrama_remember", after changing the note."""
    async with synced_session(seeded, db_path, tmp_path) as session:
        other = sqlite3.connect(db_path, timeout=0)
        try:
            other.execute("begin immediate")  # another program's write transaction, held
            message = await error_of(
                session,
                "engrama_remember",
                {"label": "Project", "name": "Engrama", "observation": "Ships in May."},
            )
        finally:
            other.rollback()
            other.close()
        assert "locked by another program" in message and "close that program" in message
        assert "stays in the vault" in message
        assert "Ships in May." in (seeded / "Projects/Engrama.md").read_text(encoding="utf-8")
        done = await call(
            session,
            "engrama_remember",
            {"label": "Project", "name": "Engrama", "observation": "Ships in May."},
        )
        assert done["created"] is False
    assert "Ships in May." in (seeded / "Projects/Engrama.md").read_text(encoding="utf-8")
