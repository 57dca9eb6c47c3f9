"""An editor's save into a file a tool's swap had just replaced is put back (vault_sync.orphans).

A save in place opens the note, truncates it and writes it a moment later. When engrama's compare-and-swap
replaces the note in between, the editor's text goes into a file no name points to. These tests open the note
"as the editor" at that moment and check the text reaches the note (or a conflict copy), never a lost inode."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import gc
import os
import random
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.test_e2e_stdio import COMMAND, call, serve_args, synced_session
from tests.test_settle import wait_for_holder
from vault_sync import orphans, writer
from vault_sync.checksum import sha256_hex
from vault_sync.errors import ConcurrentEdit
from vault_sync.lease import lease_path
from vault_sync.leftovers import remove_leftover_temps
from vault_sync.paths import classify, conflict_original, is_engrama_temp, sum_in_name, temp_name_parts
from vault_sync.writer import edit_note

pytestmark = pytest.mark.skipif(not orphans.SUPPORTED, reason="replaced files are watched on POSIX only")

MARK = b"- engrama's observation\n"


def add_mark(data: bytes) -> bytes:
    return data if MARK in data else data + MARK


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else 0


def kept_aside(vault: Path) -> str:
    return "".join(p.read_text() for p in vault.glob("*conflicted copy*"))


def editor_truncating_during(note: Path, holder: dict[str, object]) -> Callable[[bytes], bytes]:
    """The tool's edit; the first time it runs, the person's editor starts a save in place (open, truncate)."""

    def edit(data: bytes) -> bytes:
        if "editor" not in holder:
            holder["editor"] = open(note, "wb")  # noqa: SIM115 - the editor keeps it open past this call
        return add_mark(data)

    return edit


def test_an_editors_save_into_the_replaced_file_is_put_back_into_the_note(tmp_path: Path) -> None:
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nThe person's first line.\n")
    holder: dict[str, object] = {}
    # No quiet rule: the swap itself is what races the editor here.
    result = edit_note(tmp_path, "Topic.md", editor_truncating_during(note, holder))
    assert result.changed
    saved = b"# Topic\nThe person's first line.\nAnd the line they just typed.\n"
    editor = holder["editor"]
    editor.write(saved)  # type: ignore[attr-defined]
    editor.close()  # type: ignore[attr-defined]
    wait_for(lambda: note.read_bytes() == add_mark(saved))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert note.read_bytes() == add_mark(saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


def replaced_by_another_program(note: Path, data: bytes) -> None:
    """The note changes again, by rename, as a sync tool saves it."""
    other = note.with_name(".other.tmp")
    other.write_bytes(data)
    os.replace(other, note)


def test_when_the_note_changed_again_the_editors_text_goes_to_a_conflict_copy(tmp_path: Path) -> None:
    note = tmp_path / "Topic.md"
    note.write_bytes(b"The person's first line.\n")
    holder: dict[str, object] = {}
    edit_note(tmp_path, "Topic.md", editor_truncating_during(note, holder))
    replaced_by_another_program(note, b"Another program's version.\n")  # before the editor's text arrives
    saved = b"The person's first line.\nTheir second line.\n"
    editor = holder["editor"]
    editor.write(saved)  # type: ignore[attr-defined]
    editor.close()  # type: ignore[attr-defined]
    wait_for(lambda: len(list(tmp_path.glob("*conflicted copy*"))) == 1)
    (copy,) = tmp_path.glob("*conflicted copy*")
    assert copy.read_bytes() == saved
    rel = copy.name
    assert classify(rel) == "conflict" and conflict_original(rel) == "Topic.md"
    assert note.read_bytes() == b"Another program's version.\n"


def test_a_save_that_truncated_and_never_wrote_leaves_the_note_as_the_tool_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orphans, "LONGEST", 0.5)
    note = tmp_path / "Topic.md"
    note.write_bytes(b"The person's line.\n")
    holder: dict[str, object] = {}
    edit_note(tmp_path, "Topic.md", editor_truncating_during(note, holder))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    # The editor still has the replaced file open when the watch ends: where the system tells, the file keeps
    # its temp name (a save written later stays on disk) until the next start's clean-up, which finds it
    # empty and closed and removes it.
    assert len(temp_names(tmp_path)) == (1 if leases_tell(tmp_path) else 0)
    holder["editor"].close()  # type: ignore[attr-defined]
    remove_leftover_temps(tmp_path)
    assert note.read_bytes() == add_mark(b"")  # what the re-based edit wrote: never emptied by the watch
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


def mark_new_note(root: Path, rel: str) -> None:
    """A note just made, then a tool's edit of it: one replaced file to watch, nothing written into it."""
    (root / rel).write_bytes(b"text\n")
    edit_note(root, rel, add_mark)


def leases_tell(folder: Path) -> bool:
    """Whether this system says if a file is open for writing (Linux leases, `writer.open_for_writing`)."""
    probe = folder / ".probe"
    probe.write_bytes(b"")
    fd = os.open(probe, os.O_RDONLY)
    try:
        return writer.open_for_writing(fd) is not None
    finally:
        os.close(fd)
        probe.unlink()


def temp_names(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if is_engrama_temp(p.name)]


def test_a_replaced_file_no_program_hasopen_for_writing_is_not_watched(tmp_path: Path) -> None:
    """No editor can save into it any more: nothing is held for it (a first sync swaps every note)."""
    if not leases_tell(tmp_path):
        pytest.skip("this system cannot tell: every replaced file is watched (the next test)")
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    before = open_fds()
    for n in range(5):
        mark_new_note(tmp_path, f"N{n}.md")
    assert orphans.WATCHER.pending() == 0
    assert open_fds() == before and temp_names(tmp_path) == []
    assert all((tmp_path / f"N{n}.md").read_bytes() == b"text\n" + MARK for n in range(5))


def test_a_replaced_file_an_editor_holds_open_and_never_writes_into_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orphans, "WATCH", 2.0)
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    before = open_fds()
    editors = []
    started = time.monotonic()
    for n in range(5):
        (tmp_path / f"N{n}.md").write_bytes(b"text\n")
        editors.append(open(tmp_path / f"N{n}.md", "r+b"))  # noqa: SIM115 - opened to save in place, never does
        edit_note(tmp_path, f"N{n}.md", add_mark)
    watched, held = orphans.WATCHER.pending(), temp_names(tmp_path)
    if time.monotonic() - started < orphans.WATCH:  # a loaded machine's fsyncs may outlast the watch
        assert watched == 5
        # While an editor may still save into it, the replaced note keeps a (hidden) name: a crash then
        # leaves the save on disk for the next start to keep (test_leftovers).
        assert len(held) == (5 if leases_tell(tmp_path) else 0)
    for editor in editors:  # closed without saving before the watch ends
        editor.close()
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert open_fds() == before and temp_names(tmp_path) == []
    assert all((tmp_path / f"N{n}.md").read_bytes() == b"text\n" + MARK for n in range(5))
    # with nothing left to watch, its thread ends by itself (the suite's leak checks let it run meanwhile)
    wait_for(lambda: not any(t.name == "engrama-orphans" for t in threading.enumerate()))


def test_a_save_put_back_from_the_replaced_note_is_named_stored_so_a_crash_then_leaves_no_copy(
    tmp_path: Path,
) -> None:
    """Once the editor's save is back in the note, the replaced file's temp name carries that save's checksum:
    a process killed before letting go of it leaves a leftover the next start removes, with no copy."""
    if not leases_tell(tmp_path):
        pytest.skip("this system cannot tell whether a file is open for writing")
    note = tmp_path / "Topic.md"
    note.write_bytes(b"The person's first line.\n")
    editor = open(note, "r+b")  # noqa: SIM115 - the person's editor has begun a save in place
    edit_note(tmp_path, "Topic.md", add_mark)
    (held,) = temp_names(tmp_path)
    saved = b"The person's first line.\nAnd what they typed since.\n"
    editor.truncate()
    editor.write(saved)
    editor.close()
    wait_for(lambda: note.read_bytes() == add_mark(saved))
    wait_for(lambda: temp_names(tmp_path) != [held])
    names = temp_names(tmp_path)
    if names:  # still watched: its name now says the save is stored
        assert sum_in_name(sha256_hex(saved)) in temp_name_parts(names[0])[0]
        remove_leftover_temps(tmp_path)  # as if the process were killed now, and the next one took the lease
    assert temp_names(tmp_path) == [] and not list(tmp_path.glob("*conflicted copy*"))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert note.read_bytes() == add_mark(saved) and temp_names(tmp_path) == []


KILLED_WRITER = """
import sys, time
from pathlib import Path
from vault_sync.writer import edit_note
edit_note(Path(sys.argv[1]), "Topic.md", lambda data: data + b"- engrama's observation\\n")
print("swapped", flush=True)
time.sleep(60)
"""


def test_an_editors_save_into_the_replaced_note_outlives_the_writer_being_killed(tmp_path: Path) -> None:
    """A SIGKILL after a swap, while the editor's save in place into the replaced note waits to be put back:
    the save stays on disk under the replaced note's temp name, and the next process to take the vault's
    lease keeps it as a conflict copy (before, its bytes lived only in a descriptor and were gone)."""
    if not leases_tell(tmp_path):
        pytest.skip("this system cannot tell whether a file is open for writing (the note's 'Left alone')")
    note = tmp_path / "Topic.md"
    note.write_bytes(b"The person's first line.\n")
    editor = open(note, "r+b")  # noqa: SIM115 - the person's editor has begun a save in place
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path)], stdout=subprocess.PIPE, cwd=tmp_path
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"swapped\n"
        child.send_signal(signal.SIGSTOP)  # from here on it can put nothing back
        os.waitpid(child.pid, os.WUNTRACED)
        saved = b"The person's first line.\nAnd what they typed since.\n"
        editor.seek(0)
        editor.truncate()
        editor.write(saved)
        editor.close()
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert note.read_bytes() == b"The person's first line.\n- engrama's observation\n"
    remove_leftover_temps(tmp_path)  # what the next process to take the vault's lease does first
    copies = list(tmp_path.glob("Topic (engrama conflicted copy *).md"))
    assert [c.read_bytes() for c in copies] == [saved]
    assert temp_names(tmp_path) == []


class _Bulky:
    """Stands for what an edit may hold: a whole note's bytes (the first sync's id line edit does)."""


def test_an_edit_is_not_kept_once_the_file_it_replaced_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first sync swaps every note of the vault; what each swap keeps must go when its watch ends, or the
    # server holds every note it wrote in the last half minute (50 MiB on a 10,000-note first sync).
    monkeypatch.setattr(orphans, "WATCH", 0.2)
    kept: list[weakref.ref[_Bulky]] = []
    for n in range(20):
        note = tmp_path / f"N{n}.md"
        note.write_bytes(b"text\n")
        bulky = _Bulky()
        kept.append(weakref.ref(bulky))
        edit_note(tmp_path, note.name, lambda data, held=bulky: add_mark(data) if held else data)
        edit_note(tmp_path, note.name, lambda data: data + b"- a second swap on top\n")
        del bulky
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    gc.collect()
    assert [ref for ref in kept if ref() is not None] == []
    assert all(
        (tmp_path / f"N{n}.md").read_bytes() == b"text\n" + MARK + b"- a second swap on top\n"
        for n in range(20)
    )


def test_a_hard_linked_note_is_not_watched(tmp_path: Path) -> None:
    note = tmp_path / "Topic.md"
    note.write_bytes(b"text\n")
    os.link(note, tmp_path / "elsewhere.txt")  # the old bytes stay reachable under that name
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    edit_note(tmp_path, "Topic.md", add_mark)
    assert orphans.WATCHER.pending() == 0


def test_saves_in_place_racing_tool_edits_lose_no_line(tmp_path: Path) -> None:
    """An editor saving in place (a gap between truncate and write, or none) while a tool edits the note over
    and over, with no quiet rule to keep them apart: every line the editor wrote ends up in the note."""
    note = tmp_path / "Race.md"
    note.write_bytes(b"line 0\n")
    rng = random.Random(20261125)
    lines = ["line 0"]
    stop = threading.Event()

    def editor() -> None:
        try:
            for n in range(1, 41):
                text = note.read_text()
                lines.append(f"line {n}")
                with open(note, "w") as handle:  # open, truncate ...
                    handle.flush()
                    time.sleep(rng.choice([0.0, 0.0, 0.002, 0.02]))
                    handle.write(text + f"line {n}\n")  # ... and the text a moment later
                time.sleep(0.01)
                # the next save starts from the note as the editor shows it: with this line, once it is back
                wait_for(lambda line=f"line {n}\n": line in note.read_text() + kept_aside(tmp_path), 5.0)
        finally:
            stop.set()

    thread = threading.Thread(target=editor)
    thread.start()
    edits = 0
    while not stop.is_set():
        try:
            edit_note(
                tmp_path,
                "Race.md",
                lambda data: data + b"- tool\n" if not data.endswith(b"- tool\n") else data,
            )
            edits += 1
        except (
            Exception
        ):  # ConcurrentEdit when it keeps changing: the tool gives up, the editor's text is safe
            pass
        time.sleep(0.003)
    thread.join()
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    final = note.read_text().splitlines()
    text = "\n".join(final)
    missing = [line for line in lines if line not in final]
    assert edits > 10
    assert missing == [], f"{missing} lost; the note now:\n{text}"
    # Only the editor and the tool touch the note: every put-back goes into it, through the tool's later edits.
    assert kept_aside(tmp_path) == ""


KILLED_AFTER_THE_EXCHANGE = """
import os, signal, sys
from pathlib import Path
from vault_sync import writer
root = Path(sys.argv[1])
exchange, take = writer._exchange, writer._take_displaced
def landing(tmp, real):  # another program saves the note by rename in the instant before the exchange
    other = real.with_name(".other.tmp")
    other.write_bytes(b"Saved by another program in that very instant.\\n")
    os.replace(other, real)
    return exchange(tmp, real)
def stopped(*args):  # the exchange has put that save at the temp name: stop before it is moved aside
    print("exchanged", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    return take(*args)
writer._exchange, writer._take_displaced = landing, stopped
writer.edit_note(root, "Topic.md", lambda data: data + b"- engrama's observation\\n")
"""


@pytest.mark.skipif(writer._EXCHANGE is None, reason="this system swaps no two names atomically")
def test_a_save_the_exchange_displaced_outlives_the_writer_being_killed_before_moving_it_aside(
    tmp_path: Path,
) -> None:
    """A SIGKILL between the exchange and the rename that moves a displaced save to its conflict-copy name
    leaves that save at the temp name; the next process to take the lease keeps it (before: removed it)."""
    note = tmp_path / "Topic.md"
    note.write_bytes(b"The person's first line.\n")
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_AFTER_THE_EXCHANGE, str(tmp_path)], stdout=subprocess.PIPE, cwd=tmp_path
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"exchanged\n"
        os.waitpid(child.pid, os.WUNTRACED)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert note.read_bytes() == b"The person's first line.\n- engrama's observation\n"
    assert len(temp_names(tmp_path)) == 1
    remove_leftover_temps(tmp_path)
    copies = list(tmp_path.glob("Topic (engrama conflicted copy *).md"))
    assert [c.read_bytes() for c in copies] == [b"Saved by another program in that very instant.\n"]
    assert temp_names(tmp_path) == []


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_through_the_server_a_save_racing_a_tool_write_keeps_the_persons_text_and_the_tools(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """The real server over stdio, with no settle window so that nothing holds the tool back (with one, it waits
    for the note to be quiet and an empty note is never written): the person's editor has begun a save in place
    when the assistant's observation is written."""
    note = vault / "Concepts" / "Lantern.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    first = "---\ntype: Concept\n---\nThe person's first line.\n"
    note.write_text(first, encoding="utf-8")
    # The suite's settle window (none), which a spawned server gets only when given the environment.
    params = StdioServerParameters(
        command=str(COMMAND), args=serve_args(vault, db_path), env=dict(os.environ)
    )
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await wait_for_holder(session)
            editor = open(note, "wb")  # noqa: SIM115, ASYNC230 - the save in place begins: the note is empty
            try:
                await call(
                    session,
                    "engrama_remember",
                    {"label": "Concept", "name": "Lantern", "observation": "Lit at dusk by the assistant"},
                )
                editor.write((first + "The line the person just typed.\n").encode())
            finally:
                editor.close()
            deadline = time.monotonic() + 15
            while True:
                text = note.read_text(encoding="utf-8")
                found = await call(session, "engrama_search", {"query": "line the person just typed"})
                names = [hit["name"] for hit in found["results"]]
                done = (
                    "The line the person just typed." in text and "Lit at dusk" in text and "Lantern" in names
                )
                if done:
                    break
                assert time.monotonic() < deadline, (text, names)
                await asyncio.sleep(0.1)
    assert text.count("engrama_id:") == 1
    assert "The person's first line." in text
    assert "put back" in (tmp_path / "stderr.log").read_text(encoding="utf-8") or "back in the note" in (
        tmp_path / "stderr.log"
    ).read_text(encoding="utf-8")
    assert sorted(p.name for p in note.parent.iterdir()) == ["Lantern.md"]


@pytest.mark.skipif(writer._EXCHANGE is None, reason="this system swaps no two names atomically")
def test_a_save_by_rename_landing_between_the_check_and_the_swap_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program saves the note (temp file + rename, as most editors and sync tools do) in the instant
    between the writer's last check and its swap: the swap displaces that save, which is put back at once."""
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nThe person's first line.\n")
    saved = b"# Topic\nThe person's first line.\nSaved in that very instant.\n"
    exchange = writer._exchange

    def save_then_exchange(tmp: Path, real: Path) -> bool:
        if real == note and not hasattr(save_then_exchange, "done"):
            save_then_exchange.done = True  # type: ignore[attr-defined]
            other = tmp_path / ".Topic.md.editor-tmp"
            other.write_bytes(saved)
            os.replace(other, note)
        return exchange(tmp, real)

    monkeypatch.setattr(writer, "_exchange", save_then_exchange)
    edit_note(tmp_path, "Topic.md", add_mark)
    wait_for(lambda: note.read_bytes() == add_mark(saved))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert note.read_bytes() == add_mark(saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


@pytest.mark.skipif(writer._EXCHANGE is None, reason="this system swaps no two names atomically")
def test_a_note_deleted_between_the_check_and_the_swap_is_not_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp_path / "Topic.md"
    note.write_bytes(b"text\n")
    exchange = writer._exchange

    def delete_then_exchange(tmp: Path, real: Path) -> bool:
        note.unlink()
        return exchange(tmp, real)

    monkeypatch.setattr(writer, "_exchange", delete_then_exchange)
    with pytest.raises(ConcurrentEdit):
        edit_note(tmp_path, "Topic.md", add_mark)
    assert list(tmp_path.iterdir()) == []


def editor_opening_during(note: Path, holder: dict[str, int]) -> Callable[[bytes], bytes]:
    """The tool's edit; the first time it runs, an editor opens the note to save in place (truncating later)."""

    def edit(data: bytes) -> bytes:
        if "fd" not in holder:
            holder["fd"] = os.open(note, os.O_WRONLY)
        return add_mark(data)

    return edit


def save_into(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.close(fd)


def vault_text(vault: Path) -> str:
    return "".join(p.read_text() for p in vault.rglob("*.md"))


def test_the_editors_text_is_kept_when_the_notes_folder_is_renamed_before_it_is_put_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "Projects").mkdir()
    note = tmp_path / "Projects" / "Atlas.md"
    note.write_bytes(b"# Atlas\nold line\n")
    holder: dict[str, int] = {}
    edit_note(tmp_path, "Projects/Atlas.md", editor_opening_during(note, holder))
    save_into(holder["fd"], b"# Atlas\nold line\nThe line the person typed.\n")
    (tmp_path / "Projects").rename(tmp_path / "Work")  # the person renames the folder that instant
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert "The line the person typed." in vault_text(tmp_path)
    (copy,) = tmp_path.glob("*conflicted copy*")  # at the vault's top: the note's folder is gone
    assert conflict_original(copy.name) == "Atlas.md"


def test_a_server_stopped_by_a_signal_keeps_a_save_it_had_not_put_back_yet(tmp_path: Path) -> None:
    """The stop-on-signal path ends with os._exit, which runs no atexit handler: the last look must run
    before it, or a save made within the settle time (0.3 s) of the stop is lost."""
    note = tmp_path / "Atlas.md"
    note.write_bytes(b"# Atlas\nold line\n")
    child = f"""
import os, signal
from pathlib import Path
from server.signals import SignalStop
from tests.test_orphans import editor_opening_during, save_into
from vault_sync.writer import edit_note
holder = {{}}
edit_note(Path({str(tmp_path)!r}), "Atlas.md", editor_opening_during(Path({str(note)!r}), holder))
save_into(holder["fd"], b"# Atlas\\nold line\\nThe line typed as the server stopped.\\n")
stop = SignalStop()
stop.received = signal.SIGTERM  # what the handler records before cancelling the lifespan
stop.after_teardown()
raise SystemExit("after_teardown returned")
"""
    done = subprocess.run(
        [sys.executable, "-c", child],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "The line typed as the server stopped." in vault_text(tmp_path)
    assert MARK.decode() in note.read_text()


def test_descriptors_held_stay_within_the_cap_however_fast_notes_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orphans, "MAX_WATCHED", 4)
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    before = open_fds()
    for n in range(40):
        mark_new_note(tmp_path, f"N{n}.md")
        assert orphans.WATCHER.pending() <= 4
        assert open_fds() <= before + 4
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"N{n}.md" for n in range(40))
    wait_for(lambda: orphans.WATCHER.pending() == 0)


def test_a_put_back_running_while_a_later_swap_finishes_reapplies_that_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later swap of the note must be known to a put-back from the moment it is made, not once its folder
    is synced: else the put-back takes the note for changed by someone else and writes a conflict copy."""
    note = tmp_path / "Atlas.md"
    note.write_bytes(b"# Atlas\nold line\n")
    holder: dict[str, int] = {}
    edit_note(tmp_path, "Atlas.md", editor_opening_during(note, holder))
    typed = b"# Atlas\nold line\nThe line the person typed.\n"
    save_into(holder["fd"], typed)
    synced = writer._fsync_folder

    def slow_disk(folder: Path) -> None:
        synced(folder)
        if threading.current_thread().name == "second":
            time.sleep(orphans.STILL * 3)  # the put-back of the first swap runs meanwhile

    monkeypatch.setattr(writer, "_fsync_folder", slow_disk)
    second = b"- a second edit\n"
    thread = threading.Thread(
        name="second",
        target=lambda: edit_note(tmp_path, "Atlas.md", lambda d: d if second in d else d + second),
    )
    thread.start()
    thread.join()
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert note.read_bytes() == add_mark(typed) + second
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Atlas.md"]


@pytest.mark.parametrize("again", ["the same bytes", "the bytes with the edit"])
def test_no_conflict_copy_when_the_editor_saved_its_text_again_through_the_note(
    tmp_path: Path, again: str
) -> None:
    note = tmp_path / "Atlas.md"
    note.write_bytes(b"# Atlas\nold line\n")
    holder: dict[str, int] = {}
    edit_note(tmp_path, "Atlas.md", editor_opening_during(note, holder))
    typed = b"# Atlas\nold line\nThe line the person typed.\n"
    save_into(holder["fd"], typed)
    note.write_bytes(typed if again == "the same bytes" else add_mark(typed))  # its next save, by the path
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert note.read_bytes() == add_mark(typed)  # the tool's edit is not lost either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Atlas.md"]


def displacing(note: Path, saved: bytes) -> Callable[[Path, Path], bool]:
    """`writer._exchange` with another program's save by rename landing just before it, once."""
    exchange = writer._exchange
    landed: list[bool] = []

    def save_then_exchange(tmp: Path, real: Path) -> bool:
        if real == note and not landed:
            landed.append(True)
            other = note.with_name(f".{note.name}.editor-tmp")
            other.write_bytes(saved)
            os.replace(other, note)
        return exchange(tmp, real)

    return save_then_exchange


@pytest.mark.skipif(writer._EXCHANGE is None, reason="this system swaps no two names atomically")
def test_a_displaced_save_stays_in_the_vault_until_it_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the watcher puts it back, the displaced save is a conflict copy in the vault, not only an open
    descriptor: a process killed in between loses nothing."""
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nfirst line\n")
    saved = b"# Topic\nfirst line\nSaved in that very instant.\n"
    monkeypatch.setattr(writer, "_exchange", displacing(note, saved))
    monkeypatch.setattr(orphans, "POLL", 2.0)  # the copy is looked for before the first look
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    wait_for(lambda: not any(t.name == "engrama-orphans" for t in threading.enumerate()))
    edit_note(tmp_path, "Topic.md", add_mark)
    (copy,) = tmp_path.glob("*conflicted copy*")
    assert copy.read_bytes() == saved
    wait_for(lambda: note.read_bytes() == add_mark(saved))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


@pytest.mark.skipif(writer._EXCHANGE is None, reason="this system swaps no two names atomically")
def test_an_empty_save_by_rename_is_a_finished_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The person emptied the note and their editor saved it by rename as the tool wrote: that is the note's
    text now (with the tool's edit on it), at once, not a save in place still to come."""
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nfirst line\n")
    monkeypatch.setattr(writer, "_exchange", displacing(note, b""))
    started = time.monotonic()
    edit_note(tmp_path, "Topic.md", add_mark)
    wait_for(lambda: note.read_bytes() == add_mark(b""), 5.0)
    assert time.monotonic() - started < orphans.LONGEST / 2
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


@pytest.mark.skipif(writer._EXCHANGE is None, reason="this system swaps no two names atomically")
def test_a_sandbox_refusing_the_exchange_falls_back_to_a_plain_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Container and service sandboxes answer system calls they do not list with EPERM."""

    def refused(*_: object) -> int:
        ctypes.set_errno(errno.EPERM)
        return -1

    monkeypatch.setattr(writer, "_EXCHANGE", refused)
    note = tmp_path / "Topic.md"
    note.write_bytes(b"text\n")
    assert edit_note(tmp_path, "Topic.md", add_mark).changed
    assert note.read_bytes() == add_mark(b"text\n")


class _MacLibc:
    """A C library with macOS's `renamex_np(from, to, flags)`, carried out here by Linux's exchange: what
    this checks is how the writer calls it (which names, in which order, with which flag)."""

    def __init__(self, exchange: Callable[[bytes, bytes], int]) -> None:
        def renamex_np(source: bytes, target: bytes, flags: int) -> int:
            if flags != 0x2:  # RENAME_SWAP in macOS's <stdio.h>; anything else would not swap
                ctypes.set_errno(errno.EINVAL)
                return -1
            return exchange(source, target)

        self.renamex_np = renamex_np


@pytest.mark.skipif(
    writer._load_rename("exchange", "linux") is None, reason="needs Linux's exchange to stand in for macOS's"
)
def test_on_macos_a_save_by_rename_landing_as_the_tool_writes_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS swaps two names with `renamex_np(RENAME_SWAP)`: the writer uses it as it uses Linux's exchange."""
    linux = writer._load_rename("exchange", "linux")
    assert linux is not None
    mac = writer._load_rename("exchange", "darwin", _MacLibc(linux))
    assert mac is not None
    monkeypatch.setattr(writer, "_EXCHANGE", mac)
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nfirst line\n")
    saved = b"# Topic\nfirst line\nSaved in that very instant.\n"
    monkeypatch.setattr(writer, "_exchange", displacing(note, saved))
    edit_note(tmp_path, "Topic.md", add_mark)
    wait_for(lambda: note.read_bytes() == add_mark(saved))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


def test_the_atomic_exchange_is_looked_up_where_the_system_has_one() -> None:
    assert writer._load_rename("exchange", "win32") is None
    assert writer._load_rename("exchange", "darwin", object()) is None  # macOS before 10.12: no renamex_np
    assert writer._load_rename("exchange", "linux", object()) is None  # a C library without renameat2


def test_a_save_written_in_two_parts_with_a_pause_between_is_put_back_whole(tmp_path: Path) -> None:
    """Found by review: an editor that paused in the middle of its save (longer than orphans.STILL) had its
    first part put back as if it were the whole save, the descriptor closed, and the rest written into a file
    no name pointed to: 21 of 45 lines lost, no conflict copy. A put-back is now provisional: the rest is
    put back too, over the first part, with the tool's edit on it once."""
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nThe person's first line.\n")
    holder: dict[str, int] = {}
    opening = editor_opening_during(note, holder)
    edit_note(tmp_path, "Topic.md", lambda data: opening(data) and data + MARK)  # an edit applied twice shows
    saved = b"# Topic\nThe person's first line.\n" + b"".join(
        f"Line {i:02d} typed before the save.\n".encode() for i in range(40)
    )
    fd, half = holder["fd"], len(saved) // 2
    os.ftruncate(fd, 0)
    os.pwrite(fd, saved[:half], 0)
    wait_for(lambda: note.read_bytes() == add_mark(saved[:half]))  # the first part, put back provisionally
    time.sleep(orphans.STILL)
    os.pwrite(fd, saved[half:], half)
    os.close(fd)
    wait_for(lambda: note.read_bytes() == add_mark(saved))
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert note.read_bytes() == add_mark(saved) and note.read_bytes().count(MARK) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Topic.md"]


def test_a_save_in_two_parts_kept_as_a_conflict_copy_leaves_one_copy_holding_the_whole(
    tmp_path: Path,
) -> None:
    """Found by review: when the note had changed otherwise, the first part went to a conflict copy and the
    whole save to a second one, both listed for the person. The copy of the part goes once the whole is kept."""
    note = tmp_path / "Topic.md"
    note.write_bytes(b"# Topic\nThe person's first line.\n")
    holder: dict[str, int] = {}
    edit_note(tmp_path, "Topic.md", editor_opening_during(note, holder))
    replaced_by_another_program(note, b"# Topic\nFrom the other computer.\n")  # a sync tool, meanwhile
    saved = b"# Topic\nThe person's first line.\n" + b"".join(f"Line {i:02d}.\n".encode() for i in range(40))
    fd, half = holder["fd"], len(saved) // 2
    os.ftruncate(fd, 0)
    os.pwrite(fd, saved[:half], 0)
    wait_for(lambda: kept_aside(tmp_path) == saved[:half].decode())
    time.sleep(orphans.STILL)
    os.pwrite(fd, saved[half:], half)
    os.close(fd)
    wait_for(lambda: orphans.WATCHER.pending() == 0)
    assert kept_aside(tmp_path) == saved.decode() and len(list(tmp_path.glob("*conflicted copy*"))) == 1
    assert note.read_bytes() == b"# Topic\nFrom the other computer.\n"


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_through_the_server_a_save_into_the_replaced_note_outlives_a_kill_and_is_kept_at_the_next_start(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """The real server over stdio writes the assistant's observation while the person's editor has the note
    open to save into it; the server is killed before it can put the save back. The next server to start
    (taking the vault's lease) keeps the save beside the note, and the observation is in the note."""
    if not leases_tell(tmp_path):
        pytest.skip("this system cannot tell whether a file is open for writing (the note's 'Left alone')")
    note = vault / "Concepts" / "Lantern.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    first = "---\ntype: Concept\n---\nThe person's first line.\n"
    note.write_text(first, encoding="utf-8")
    typed = first + "The line the person typed as the server died.\n"
    env = dict(os.environ)  # the suite's settle window (none): nothing holds the tool back
    async with synced_session(vault, db_path, tmp_path, env=env) as session:
        await wait_for_holder(session)
        pid = int(lease_path(db_path).read_text(encoding="utf-8"))
        editor = open(note, "r+b")  # noqa: SIM115, ASYNC230 - the person's editor is about to save in place
        try:
            await call(
                session,
                "engrama_remember",
                {"label": "Concept", "name": "Lantern", "observation": "Lit at dusk by the assistant"},
            )
            os.kill(pid, signal.SIGSTOP)  # it can put nothing back from here on
            editor.seek(0)
            editor.truncate()
            editor.write(typed.encode())
        finally:
            editor.close()
            os.kill(pid, signal.SIGKILL)
    assert "Lit at dusk" in note.read_text(encoding="utf-8")
    async with synced_session(vault, db_path, tmp_path, env=env) as session:
        await wait_for_holder(session)
        copies = list(note.parent.glob("Lantern (engrama conflicted copy *).md"))
        assert [c.read_text(encoding="utf-8") for c in copies] == [typed]
        assert not [p for p in vault.rglob("*") if is_engrama_temp(p.name)]
    assert (
        "Lit at dusk" in note.read_text(encoding="utf-8")
        and note.read_text(encoding="utf-8").count("engrama_id:") == 1
    )
    assert "kept as Lantern (engrama conflicted copy" in (tmp_path / "stderr.log").read_text(encoding="utf-8")
