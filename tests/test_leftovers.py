"""No leftovers (issue 12, item 7): a writer killed between writing its temp file and renaming it over the note
leaves `.engrama-tmp-*.tmp` behind; the next process to take the vault's lease removes them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server.live import live_sync
from server.runtime import drop_stubs_left_over, open_runtime
from server.settings import Settings
from server.store import memory_sql
from server.store.clock import utc_now
from tests.test_e2e_stdio import synced_session
from tests.test_live import eventually, no_leaked_threads  # noqa: F401 (an autouse fixture)
from tests.test_settle import wait_for_holder
from vault_sync.checksum import sha256_hex
from vault_sync.identify import read_id
from vault_sync.lease import lease_path
from vault_sync.leftovers import remove_leftover_temps
from vault_sync.paths import classify, is_engrama_temp, make_temp_name

COMMAND = Path(sys.executable).parent / "engrama-vault"
BODY = "Line of the person's text, kept whole.\n" * 1500  # ~60 KB: each id write takes a while on disk


def temps(vault: Path) -> list[Path]:
    return sorted(p for p in vault.rglob("*") if is_engrama_temp(p.name))


HALF = b"half an edit"


def plant_temps(vault: Path) -> tuple[list[Path], list[Path]]:
    """Temp files as a killed writer leaves them (ours: their names carry what they hold), and look-alikes
    the clean-up must leave alone."""
    named = make_temp_name([sha256_hex(HALF), sha256_hex(b"the note before")], "Atlas.md")
    ours = [vault / named, vault / "Projects" / named, vault / "Areas/Deep" / named]
    theirs = [vault / ".git" / named, vault / ".trash" / named]
    for path in [*ours, *theirs]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(HALF)
    return ours, theirs


def test_a_leftover_holding_a_save_engrama_did_not_write_is_kept_beside_its_note(vault: Path) -> None:
    """What a temp file's name says it may hold is removed; anything else is a person's save that landed in
    it (an editor's save in place into the replaced note, or a save by rename the exchange displaced) and is
    kept as a conflict copy beside the note the name points to, never removed."""
    (vault / "Projects").mkdir()
    note = vault / "Projects" / "Atlas.md"
    note.write_bytes(b"Atlas, as engrama wrote it.\n")
    before, written = b"Atlas, before the tool's edit.\n", b"Atlas, as engrama wrote it.\n"
    name = make_temp_name([sha256_hex(written), sha256_hex(before)], "Atlas.md")
    shapes = {
        "what engrama was writing": (written, False),
        "the version the swap replaced": (before, False),
        "empty: a save in place truncated it and never wrote": (b"", False),
        "the person's save": (b"Atlas, and the sentence the person just typed.\n", True),
    }
    for what, (data, kept) in shapes.items():
        (vault / "Projects" / name).write_bytes(data)
        assert remove_leftover_temps(vault) == (0 if kept else 1), what
        assert temps(vault) == [], what
        copies = list((vault / "Projects").glob("Atlas (engrama conflicted copy *).md"))
        assert [c.read_bytes() for c in copies] == ([data] if kept else []), what
        if kept:  # listed for the person as a copy of Atlas, never synced as a note of its own
            assert classify(copies[0].relative_to(vault).as_posix()) == "conflict"
            copies[0].unlink()
    assert note.read_bytes() == written


def test_a_leftover_of_an_earlier_version_is_removed_only_when_a_note_holds_the_same(vault: Path) -> None:
    (vault / "Atlas.md").write_bytes(b"Atlas.\n")
    (vault / make_temp_name()).write_bytes(b"Atlas.\n")  # names no checksum: its bytes are a note's
    assert remove_leftover_temps(vault) == 1
    (vault / make_temp_name()).write_bytes(b"Something no note holds.\n")
    assert remove_leftover_temps(vault) == 0
    (copy,) = vault.glob("engrama recovered save (engrama conflicted copy *).md")
    assert copy.read_bytes() == b"Something no note holds.\n" and temps(vault) == []


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
def test_a_sync_killed_while_writing_ids_leaves_temp_files_that_the_next_sync_removes(
    vault: Path, db_path: Path
) -> None:
    count = 300  # below the worker-process threshold: ids are written by the sync process itself
    for i in range(count):
        (vault / f"note {i:03}.md").write_text(f"# Note {i}\n{BODY}", encoding="utf-8")
    sync = [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)]
    proc = subprocess.Popen(sync, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:  # stop the sync at random moments until one is stopped with a temp file on disk
            assert proc.poll() is None and time.monotonic() < deadline, "never caught an id write in flight"
            time.sleep(random.uniform(0.0, 0.01))
            proc.send_signal(signal.SIGSTOP)
            os.waitpid(proc.pid, os.WUNTRACED)  # returns once it is stopped (it is not reaped)
            if temps(vault):
                break
            proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGKILL)  # killed mid-write: the temp file stays
    finally:
        proc.kill()
        proc.wait()
    left = temps(vault)
    assert left, "the kill left no temp file"
    done = subprocess.run(sync, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert temps(vault) == []
    for path in vault.glob("*.md"):
        assert path.read_text(encoding="utf-8").endswith(BODY) and read_id(path.read_bytes())


async def test_taking_the_lease_removes_leftover_temps_and_a_follower_leaves_them(
    vault: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text("Atlas.\n", encoding="utf-8")
    ours, theirs = plant_temps(vault)
    caplog.set_level(logging.INFO, logger="server.runtime")
    settings = Settings(vault=vault, db_path=db_path)
    async with (
        open_runtime(settings) as first,
        open_runtime(settings) as second,
        live_sync(first, quiet=0.05) as holder,
    ):
        await holder.wait_idle(30)
        assert not any(p.exists() for p in ours) and all(p.exists() for p in theirs)
        assert "removed 3 temp file(s)" in caplog.text
        async with live_sync(second, quiet=0.05, retry=0.05) as follower:
            assert follower.role == "follower"
            ours, _ = plant_temps(vault)  # as if the holder were killed mid-write right now
            await holder.stop()  # the lease is free: the follower takes over
            await eventually(lambda: follower.is_holder, timeout=30)
            assert not any(p.exists() for p in ours) and all(p.exists() for p in theirs)


def test_a_one_shot_sync_that_takes_the_lease_removes_leftover_temps(vault: Path, db_path: Path) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects/Atlas.md").write_text("Atlas.\n", encoding="utf-8")
    ours, theirs = plant_temps(vault)
    sync = [sys.executable, "-m", "server.cli", "sync", "--vault", str(vault), "--db", str(db_path)]
    done = subprocess.run([*sync, "--log-level", "INFO"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not any(p.exists() for p in ours) and all(p.exists() for p in theirs)
    assert "removed 3 temp file(s)" in done.stderr


def test_a_save_that_only_deleted_lines_is_kept_though_the_note_holds_every_line_of_it(vault: Path) -> None:
    """The person's save into the replaced note removed a line (one they wanted gone); the note, the version
    before with engrama's edit on it, holds every line of that save. Only the checksums the name carries say
    a leftover is engrama's; this one is the person's, and is kept (review 16b)."""
    before = b"Atlas.\nMy PIN is 4711, delete me.\nThe plan.\n"
    (vault / "Atlas.md").write_bytes(before + b"- engrama's observation\n")
    name = make_temp_name([sha256_hex(before + b"- engrama's observation\n"), sha256_hex(before)], "Atlas.md")
    (vault / name).write_bytes(b"Atlas.\nThe plan.\n")
    assert remove_leftover_temps(vault) == 0
    (copy,) = vault.glob("Atlas (engrama conflicted copy *).md")
    assert copy.read_bytes() == b"Atlas.\nThe plan.\n" and temps(vault) == []


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="only Linux says whether a file is open for writing"
)
def test_a_leftover_a_program_still_has_open_for_writing_is_kept_and_its_save_lands_in_the_copy(
    vault: Path,
) -> None:
    """The writer was killed while an editor had the replaced note open to save into it and had not written
    yet; the next process takes the lease at once. Removing the leftover (it still holds the version the swap
    replaced) would send the editor's save into a file with no name (review 16b)."""
    before = b"Atlas, before the tool's edit.\n"
    (vault / "Atlas.md").write_bytes(b"Atlas, as engrama wrote it.\n")
    leftover = vault / make_temp_name(
        [sha256_hex(b"Atlas, as engrama wrote it.\n"), sha256_hex(before)], "Atlas.md"
    )
    leftover.write_bytes(before)
    with open(leftover, "r+b") as editor:  # the save in place has begun
        assert remove_leftover_temps(vault) == 0
        editor.truncate()
        editor.write(b"Atlas, and what the person typed.\n")
    (copy,) = vault.glob("Atlas (engrama conflicted copy *).md")
    assert copy.read_bytes() == b"Atlas, and what the person typed.\n" and temps(vault) == []


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_a_relation_target_a_killed_call_made_is_gone_at_the_next_start(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """`engrama_relate` makes its target's placeholder node, then waits for the note the person just saved to
    go quiet before writing it. A server killed in that wait left the placeholder for good: a name no note
    holds, which `engrama_context` showed and a rebuild from the vault would not have (review 16)."""
    (vault / "Projects").mkdir()
    note = vault / "Projects" / "Atlas.md"
    note.write_text("---\ntype: Project\n---\nAtlas is a thing the person wrote.\n", encoding="utf-8")
    env = dict(os.environ) | {"ENGRAMA_SETTLE_SECONDS": "3"}  # the production quiet window
    relate = {"source": "Atlas", "source_label": "Project", "rel_type": "USES", "target": "Zookeeper"}

    def zookeepers() -> int:
        with contextlib.closing(sqlite3.connect(db_path)) as conn:
            return conn.execute("select count(*) from nodes where name = 'Zookeeper'").fetchone()[0]

    async with synced_session(vault, db_path, tmp_path, env=env) as session:
        await wait_for_holder(session)
        pid = int(lease_path(db_path).read_text(encoding="utf-8"))
        with note.open("a", encoding="utf-8") as f:
            f.write("The person's next line.\n")  # just saved: the tool waits for the note to be quiet
        call = asyncio.create_task(session.call_tool("engrama_relate", relate))
        deadline = time.monotonic() + 10
        while zookeepers() == 0:  # its placeholder is made before the wait
            assert time.monotonic() < deadline and not call.done(), "the relation's target was never made"
            await asyncio.sleep(0.05)
        os.kill(pid, signal.SIGKILL)  # in the wait: the note is never written, the call never returns
        with contextlib.suppress(Exception):
            await call
    assert "Zookeeper" not in note.read_text(encoding="utf-8") and zookeepers() == 1
    with contextlib.closing(sqlite3.connect(db_path)) as conn, conn:  # killed over a minute ago (STUB_GRACE)
        conn.execute("update nodes set updated_at = '2026-01-01T00:00:00Z' where name = 'Zookeeper'")
    async with synced_session(vault, db_path, tmp_path, env=env) as session:
        await wait_for_holder(session)
        assert zookeepers() == 0
        found = await session.call_tool("engrama_context", {"name": "Zookeeper"})
        assert found.is_error  # "nothing is called 'Zookeeper'"


async def test_a_placeholder_another_process_may_be_using_is_left_until_its_grace_is_over(
    vault: Path, db_path: Path
) -> None:
    """A follower's call makes (or finds) its target's placeholder, then writes its relation a moment later: a
    process taking the lease in between must not take the placeholder away (the follower's write would fail)."""
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        now = utc_now()
        stub, created = await rt.store.write(memory_sql.ensure_target, "Zookeeper", None, now)
        assert created and stub.id not in memory_sql.RUNNING_STUBS  # as another process's call would leave it
        assert await drop_stubs_left_over(rt.store) == 0
        assert await rt.store.get_node(stub.id) is not None
        old = "2026-01-01T00:00:00Z"
        await rt.store.write(
            lambda conn: conn.execute("update nodes set updated_at = ? where id = ?", (old, stub.id))
        )
        again, created = await rt.store.write(memory_sql.ensure_target, "Zookeeper", None, utc_now())
        assert again.id == stub.id and not created  # found by a call: its grace starts anew
        assert await drop_stubs_left_over(rt.store) == 0
        await rt.store.write(
            lambda conn: conn.execute("update nodes set updated_at = ? where id = ?", (old, stub.id))
        )
        assert await drop_stubs_left_over(rt.store) == 1
        assert await rt.store.get_node(stub.id) is None
