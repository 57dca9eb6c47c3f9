"""Big syncs read notes in a worker process: same graph, same ids, same report as reading in-process.

The process threshold is lowered to 0 here, so a handful of notes takes the process path.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from profiles.loader import load_profile
from server.runtime import note_rules
from server.store import GraphStore
from vault_sync import reader_process
from vault_sync.identify import read_id
from vault_sync.paths import is_engrama_temp
from vault_sync.reader_process import ReaderProcess, pickled_rules
from vault_sync.reconcile import PROCESS_THRESHOLD, NoteRules, VaultSync

KNOWN_ID = "11111111-2222-4333-8444-555555555555"
RULES = note_rules(load_profile("base", ["teaching"]))
NOTES = {
    "Projects/Engrama.md": '---\ntype: Project\nrelations:\n  USES: ["[[SQLite]]"]\n---\nSee [[Idempotent writes]].\n',
    "Technologies/SQLite.md": "---\ntype: Technology\naliases: [sqlite3]\n---\nEmbedded database.\n",
    "Concepts/Idempotent writes.md": "# Idempotent\n\nRepeatable. Links to [[Missing Note]] and [[sqlite3|the db]].\n",
    "Courses/Databases.md": "---\ntype: Course\nrelations:\n  COVERS: [[Idempotent writes]]\n---\n",
    "Daily/2024-05-01.md": "\ufeff---\r\ntitle: A day\r\n---\r\nMet about [[Engrama]].\r\n",
    "Notes/Has id.md": f"---\nengrama_id: {KNOWN_ID}\n---\nAlready known.\n",
    "Notes/Has id copy.md": f"---\nengrama_id: {KNOWN_ID}\n---\nAlready known.\n",  # a copy: gets an id
}
BAD = {
    "Notes/Broken yaml.md": b"---\ntype: [unclosed\n---\nbody\n",
    "Notes/Binary.md": b"\x00\x01\x02\xff\xfe binary",
}


def fill(vault: Path, notes: Mapping[str, str | bytes]) -> None:
    for rel, text in notes.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)


async def graph_view(store: GraphStore) -> tuple[set, set, set, int]:
    """Nodes (label, name, status, path), open edges by name, (path, id) pairs, and the passage count."""

    def read(conn):
        rows = conn.execute("select id, label, name, status, path from nodes").fetchall()
        nodes = {(r["label"], r["name"], r["status"], r["path"]) for r in rows}
        ids = {(r["path"], r["id"]) for r in rows if r["path"]}
        edges = set(
            conn.execute(
                "select s.name, e.type, t.name from edges e join nodes s on s.id = e.source "
                "join nodes t on t.id = e.target where e.valid_to is null"
            ).fetchall()
        )
        passages = conn.execute("select count(*) from chunks").fetchone()[0]
        return nodes, {tuple(e) for e in edges}, ids, passages

    return await store.read(read)


def report_view(report) -> tuple:
    errors = sorted(e["path"] for e in report.as_dict()["errors"])
    return (
        report.scanned,
        report.created,
        report.updated,
        report.unchanged,
        sorted(report.ids_injected),
        errors,
    )


async def sync_with(vault: Path, db: Path, threshold: int) -> tuple[tuple, tuple]:
    store = await GraphStore.open(db)
    try:
        report = await VaultSync(vault, store, RULES, process_threshold=threshold).sync_vault()
        return report_view(report), await graph_view(store)
    finally:
        await store.close()


async def test_reading_in_a_process_gives_the_same_graph_ids_and_report(tmp_path: Path) -> None:
    fill(tmp_path / "a", {**NOTES, **BAD})
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    in_process = await sync_with(tmp_path / "a", tmp_path / "a.db", threshold=10**9)
    in_worker = await sync_with(tmp_path / "b", tmp_path / "b.db", threshold=0)
    (report_a, (nodes_a, edges_a, ids_a, passages_a)) = in_process
    (report_b, (nodes_b, edges_b, ids_b, passages_b)) = in_worker
    assert report_b == report_a
    assert report_b[5] == sorted(BAD) and len(report_b[4]) == len(NOTES) - 1  # all but the note with an id
    assert {p for p, i in ids_b if i == KNOWN_ID} == {
        p for p, i in ids_a if i == KNOWN_ID
    }  # copy loses the id
    assert (nodes_b, edges_b, passages_b) == (nodes_a, edges_a, passages_a)
    for path, node_id in ids_b:  # every id the graph holds is the one now written in the note
        assert read_id((tmp_path / "b" / path).read_bytes()) == node_id
    assert ("Engrama", "USES", "SQLite") in edges_b


async def test_bad_notes_are_reported_by_name_and_left_byte_identical(vault: Path, db_path: Path) -> None:
    fill(vault, {**NOTES, **BAD})
    report, _ = await sync_with(vault, db_path, threshold=0)
    assert report[5] == sorted(BAD)
    for rel, data in BAD.items():
        assert (vault / rel).read_bytes() == data
    crlf = (vault / "Daily/2024-05-01.md").read_bytes()  # only the id line was added, in the note's style
    assert crlf.startswith(b"\xef\xbb\xbf---\r\ntitle: A day\r\nengrama_id: ") and crlf.endswith(
        b"[[Engrama]].\r\n"
    )


async def test_a_second_sync_in_a_process_finds_everything_unchanged(vault: Path, db_path: Path) -> None:
    fill(vault, NOTES)
    await sync_with(vault, db_path, threshold=0)
    for path in vault.rglob("*.md"):  # new mtimes, same bytes: read again, recognised by checksum
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    report, _ = await sync_with(vault, db_path, threshold=0)
    assert report[:5] == (len(NOTES), 0, 0, len(NOTES), [])


async def test_rules_that_cannot_reach_a_worker_are_used_in_process(vault: Path, db_path: Path) -> None:
    rules = NoteRules(
        {"Projects": "Project"}, lambda name: name.title() if name.lower() == "project" else None
    )
    assert pickled_rules(rules) is None  # a lambda cannot be pickled
    fill(vault, NOTES)
    store = await GraphStore.open(db_path)
    try:
        report = await VaultSync(vault, store, rules, process_threshold=0).sync_vault()
        nodes, *_ = await graph_view(store)
    finally:
        await store.close()
    assert (report.created, report.errors) == (len(NOTES), [])
    assert ("Project", "Engrama", "active", "Projects/Engrama.md") in nodes


def _die(paths: list[str], known: dict, dry_run: bool) -> list:
    os._exit(3)  # what the OOM killer or a kill -9 looks like from the parent


async def test_a_reader_process_that_dies_fails_its_notes_and_the_sync_still_ends(
    vault: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(vault, NOTES)
    monkeypatch.setattr(reader_process, "_read_in_worker", _die)
    report, _ = await asyncio.wait_for(sync_with(vault, db_path, threshold=0), timeout=120)
    assert report[5] == sorted(NOTES) and report[1] == 0
    for rel, text in NOTES.items():  # nothing was half-written
        assert (vault / rel).read_bytes() == text.encode("utf-8")
    monkeypatch.undo()
    report, _ = await sync_with(vault, db_path, threshold=0)  # the next sync picks them all up
    assert (report[1], report[5]) == (len(NOTES), [])


async def test_a_reader_process_that_cannot_start_fails_its_notes_and_the_sync_still_ends(
    vault: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(vault, NOTES)
    monkeypatch.setattr(reader_process, "BOOT", "import sys; sys.exit(3)")  # e.g. a broken install
    report, _ = await asyncio.wait_for(sync_with(vault, db_path, threshold=0), timeout=120)
    assert report[5] == sorted(NOTES) and report[1] == 0
    monkeypatch.undo()
    report, _ = await sync_with(vault, db_path, threshold=0)
    assert (report[1], report[5]) == (len(NOTES), [])


async def test_the_reader_process_never_writes_to_stdout(
    vault: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    rules = pickled_rules(RULES)
    assert rules is not None
    async with ReaderProcess(vault, rules, writable=False) as process:
        await process.run(print, "printed in the worker")
        await process.run(os.write, 1, b"written to fd 1 in the worker\n")
    out, err = capfd.readouterr()
    assert out == ""  # stdout is the MCP wire under `engrama-vault serve`
    assert "printed in the worker" in err and "written to fd 1 in the worker" in err


SERVE = Path(sys.executable).parent / "engrama-vault"


@pytest.mark.skipif(not SERVE.exists(), reason="engrama-vault is not installed in this venv")
async def test_the_server_answers_over_stdio_while_worker_processes_read_the_vault(
    vault: Path, db_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    count = PROCESS_THRESHOLD + 20  # just over the threshold: the startup sync reads in worker processes
    fill(vault, {f"Notes/n{i}.md": f"Note {i} links to [[n{(i + 1) % count}]].\n" for i in range(count)})
    params = StdioServerParameters(
        command=str(SERVE),
        args=["serve", "--vault", str(vault), "--db", str(db_path), "--embedding-provider", "none"],
    )
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            deadline = time.monotonic() + 120
            while True:  # the wire must carry every answer intact while the sync runs
                result = await session.call_tool("engrama_status", {})
                assert not result.is_error and result.structured_content is not None, result.content
                if result.structured_content["vault"]["note_count"] == count:
                    break
                assert time.monotonic() < deadline, "the startup sync did not finish"
                await asyncio.sleep(0.1)
            found = await session.call_tool("engrama_search", {"query": "Note 7 links"})
            assert not found.is_error
            # The notes were written a moment before the server started: they are indexed at once and get
            # their id line once they have been quiet for the settle window, without another event.
            while not all(read_id((vault / f"Notes/n{i}.md").read_bytes()) for i in range(count)):
                assert time.monotonic() < deadline + 30, "the ids owed to fresh notes were never written"
                await asyncio.sleep(0.2)
    garbled = [r for r in caplog.records if "Failed to parse JSONRPC" in r.getMessage()]
    # Nothing but JSON-RPC on the wire. (While serving, the MCP SDK itself points fd 1 at stderr, so workers
    # inherit that; the workers' own redirect is what protects `engrama-vault sync --json`, tested above.)
    assert garbled == []
    assert all(read_id((vault / f"Notes/n{i}.md").read_bytes()) for i in range(count))


def fill_a_big_vault(vault: Path, count: int = 2500) -> int:
    """`count` linked notes without ids: above the worker-process threshold, and seconds of work to sync."""
    for i in range(count):
        (vault / f"note {i:04}.md").write_text(f"Note {i} links [[note {(i + 1) % count:04}]].\n" * 20)
    return count


def wait_until_ids_are_written(vault: Path, proc: subprocess.Popen[bytes], at_least: int = 300) -> None:
    """Return once `at_least` notes carry an id, i.e. the sync in `proc` is busy reading and writing ids."""
    deadline = time.monotonic() + 60
    while sum(1 for p in vault.glob("*.md") if b"engrama_id:" in p.read_bytes()[:200]) < at_least:
        assert time.monotonic() < deadline and proc.poll() is None, "the sync never started writing ids"
        time.sleep(0.1)


def test_reader_workers_exit_when_the_sync_that_started_them_is_killed(vault: Path, db_path: Path) -> None:
    fill_a_big_vault(vault)
    command = Path(sys.executable).parent / "engrama-vault"
    proc = subprocess.Popen(
        [str(command), "sync", "--vault", str(vault), "--db", str(db_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # inherited by the workers: it reaches end-of-file once they are all gone
    )
    wait_until_ids_are_written(vault, proc)
    proc.send_signal(signal.SIGKILL)  # no teardown at all in the parent
    proc.wait()
    gone = threading.Event()
    threading.Thread(target=lambda: (proc.stderr.read(), gone.set()), daemon=True).start()  # type: ignore[union-attr]
    assert gone.wait(15), "reader workers outlived the sync that started them"
    assert not [p for p in vault.rglob("*") if is_engrama_temp(p.name)]  # each finished its batch's writes
    for path in vault.glob("*.md"):
        text = path.read_text()
        assert text.count("engrama_id:") <= 1 and text.endswith("]].\n")  # whole notes, no half writes


def test_a_reader_process_is_not_stopped_by_the_terminals_ctrl_c() -> None:
    """Review 23i: a Ctrl-C on a long sync reaches the whole process group; each reader process printed a
    KeyboardInterrupt traceback (ending in the middle of a note write) that looked like a crash. The workers
    ignore it; their parent handles it and ends them by closing their input."""
    import signal
    import subprocess
    import sys
    import time

    from vault_sync.reader_process import BOOT

    worker = subprocess.Popen(
        [sys.executable, "-c", BOOT], stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    try:
        time.sleep(0.5)  # started, waiting for its parent's first message
        worker.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert worker.poll() is None  # still there, for its parent to end
    finally:
        worker.kill()
        _, err = worker.communicate(timeout=10)
    assert b"KeyboardInterrupt" not in err
