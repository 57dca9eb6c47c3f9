"""The safe writer: compare-and-swap edits, atomic creation, trash moves, and no stray temp files."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from vault_sync import writer
from vault_sync.checksum import sha256_hex
from vault_sync.errors import ConcurrentEdit, PathOutsideVault, UnreadableNote, VaultError
from vault_sync.paths import is_engrama_temp
from vault_sync.writer import (
    MAX_NOTE_BYTES,
    NoteBusy,
    NoteExists,
    Quiet,
    create_note,
    edit_note,
    move_to_trash,
    read_note,
)

NOTE = b"---\r\nname: Engrama\r\n---\r\nBody with [[SQLite]].\r\n"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Projects").mkdir(parents=True)
    (root / "Projects" / "Engrama.md").write_bytes(NOTE)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_bytes(b"secret")
    return root


def temp_files(root: Path) -> list[str]:
    return [name for _, _, names in os.walk(root) for name in names if is_engrama_temp(name)]


def append(text: bytes):
    return lambda data: data + text


def test_read_note_pairs_bytes_with_their_state(vault: Path) -> None:
    data, state = read_note(vault, "Projects/Engrama.md")
    st = (vault / "Projects" / "Engrama.md").stat()
    assert data == NOTE
    assert (state.path, state.size, state.mtime_ns) == ("Projects/Engrama.md", st.st_size, st.st_mtime_ns)
    assert state.checksum == sha256_hex(NOTE)


def test_read_note_refuses_oversized_files(vault: Path) -> None:
    with open(vault / "Huge.md", "wb") as huge:
        huge.truncate(MAX_NOTE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(UnreadableNote, match="MiB"):
        read_note(vault, "Huge.md")


def test_read_note_refuses_a_fifo_without_hanging(vault: Path) -> None:
    os.mkfifo(vault / "Pipe.md")
    with pytest.raises(UnreadableNote, match="not a regular file"):
        read_note(vault, "Pipe.md")


def test_read_note_refuses_a_symlink_out_of_the_vault(vault: Path) -> None:
    (vault / "Secret.md").symlink_to(vault.parent / "outside" / "secret.md")
    with pytest.raises(PathOutsideVault):
        read_note(vault, "Secret.md")


def test_read_note_of_a_missing_note_raises_file_not_found(vault: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_note(vault, "Nope.md")


def test_edit_writes_new_bytes_and_returns_their_state(vault: Path) -> None:
    result = edit_note(vault, "Projects/Engrama.md", append(b"More.\r\n"))
    note = vault / "Projects" / "Engrama.md"
    assert note.read_bytes() == NOTE + b"More.\r\n"
    assert result.changed and result.path == "Projects/Engrama.md"
    assert result.before_checksum == sha256_hex(NOTE)
    assert result.state.checksum == sha256_hex(note.read_bytes())
    assert (result.state.size, result.state.mtime_ns) == (note.stat().st_size, note.stat().st_mtime_ns)
    assert temp_files(vault) == []


def test_unchanged_edit_writes_nothing(vault: Path) -> None:
    note = vault / "Projects" / "Engrama.md"
    os.utime(note, ns=(1_000_000_000, 1_000_000_000))
    before = note.stat()
    result = edit_note(vault, "Projects/Engrama.md", lambda data: data)
    assert not result.changed
    assert note.stat().st_mtime_ns == before.st_mtime_ns and note.stat().st_ino == before.st_ino
    assert result.state.checksum == sha256_hex(NOTE)


def test_edit_keeps_permission_bits(vault: Path) -> None:
    note = vault / "Projects" / "Engrama.md"
    note.chmod(0o640)
    edit_note(vault, "Projects/Engrama.md", append(b"x"))
    assert stat.S_IMODE(note.stat().st_mode) == 0o640


def test_edit_rebases_on_a_change_made_between_read_and_replace(vault: Path) -> None:
    note = vault / "Projects" / "Engrama.md"
    calls: list[bytes] = []

    def edit(data: bytes) -> bytes:
        calls.append(data)
        if len(calls) == 1:  # the person saves in Obsidian while our edit is in flight
            note.write_bytes(data + b"Typed by the person.\r\n")
        return data + b"Added by engrama.\r\n"

    result = edit_note(vault, "Projects/Engrama.md", edit)
    assert len(calls) == 2
    assert note.read_bytes() == NOTE + b"Typed by the person.\r\nAdded by engrama.\r\n"
    assert result.before_checksum == sha256_hex(NOTE + b"Typed by the person.\r\n")
    assert temp_files(vault) == []


def test_edit_gives_up_with_concurrent_edit_when_interference_persists(vault: Path) -> None:
    note = vault / "Projects" / "Engrama.md"

    def edit(data: bytes) -> bytes:
        note.write_bytes(data + b"again\n")
        return data + b"ours\n"

    with pytest.raises(ConcurrentEdit, match="kept changing"):
        edit_note(vault, "Projects/Engrama.md", edit, attempts=3)
    assert note.read_bytes() == NOTE + b"again\n" * 3
    assert temp_files(vault) == []


def test_edit_based_on_a_stale_checksum_applies_to_current_bytes(vault: Path) -> None:
    note = vault / "Projects" / "Engrama.md"
    note.write_bytes(NOTE + b"newer\n")
    result = edit_note(vault, "Projects/Engrama.md", append(b"ours\n"), expected_checksum=sha256_hex(NOTE))
    assert note.read_bytes() == NOTE + b"newer\nours\n"
    assert result.before_checksum == sha256_hex(NOTE + b"newer\n")


def test_failing_edit_leaves_note_and_folder_untouched(vault: Path) -> None:
    def edit(data: bytes) -> bytes:
        raise VaultError("malformed")

    with pytest.raises(VaultError, match="malformed"):
        edit_note(vault, "Projects/Engrama.md", edit)
    assert (vault / "Projects" / "Engrama.md").read_bytes() == NOTE
    assert temp_files(vault) == []


def test_edit_refuses_a_symlink_out_of_the_vault(vault: Path) -> None:
    (vault / "Secret.md").symlink_to(vault.parent / "outside" / "secret.md")
    with pytest.raises(PathOutsideVault):
        edit_note(vault, "Secret.md", append(b"pwned"))
    assert (vault.parent / "outside" / "secret.md").read_bytes() == b"secret"


def test_edit_through_a_symlink_inside_the_vault_writes_the_target(vault: Path) -> None:
    link = vault / "Shortcut.md"
    link.symlink_to(Path("Projects") / "Engrama.md")
    result = edit_note(vault, "Shortcut.md", append(b"x"))
    assert link.is_symlink()
    assert result.path == "Projects/Engrama.md" == result.state.path
    assert (vault / "Projects" / "Engrama.md").read_bytes() == NOTE + b"x"


def test_edit_refuses_files_that_are_not_notes(vault: Path) -> None:
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "app.md").write_bytes(b"{}")
    with pytest.raises(VaultError, match="not a note path"):
        edit_note(vault, ".obsidian/app.md", append(b"x"))


def test_create_note_makes_folders_and_returns_state(vault: Path) -> None:
    result = create_note(vault, "People/Ada/Ada Lovelace.md", b"# Ada\n")
    path = vault / "People" / "Ada" / "Ada Lovelace.md"
    assert path.read_bytes() == b"# Ada\n"
    assert result.changed and result.before_checksum is None
    assert (result.state.path, result.state.checksum) == (
        "People/Ada/Ada Lovelace.md",
        sha256_hex(b"# Ada\n"),
    )
    assert result.state.mtime_ns == path.stat().st_mtime_ns
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    assert temp_files(vault) == []


def test_create_note_refuses_to_overwrite(vault: Path) -> None:
    with pytest.raises(NoteExists, match="never overwrites"):
        create_note(vault, "Projects/Engrama.md", b"clobbered")
    assert (vault / "Projects" / "Engrama.md").read_bytes() == NOTE
    assert temp_files(vault) == []


def test_create_note_refuses_even_a_dangling_symlink(vault: Path) -> None:
    (vault / "Ghost.md").symlink_to(vault / "Nowhere.md")
    with pytest.raises(NoteExists):
        create_note(vault, "Ghost.md", b"x")
    assert not (vault / "Nowhere.md").exists()


def test_create_note_refuses_non_notes_and_escapes(vault: Path) -> None:
    with pytest.raises(VaultError, match="not a note path"):
        create_note(vault, ".obsidian/plugins.md", b"x")
    with pytest.raises(PathOutsideVault):
        create_note(vault, "../outside/new.md", b"x")


def test_move_to_trash_moves_and_adds_suffix_on_collision(vault: Path) -> None:
    for n in range(3):
        (vault / "Projects" / "Engrama.md").write_bytes(b"version %d" % n)
        assert (
            move_to_trash(vault, "Projects/Engrama.md")
            == [
                ".trash/Engrama.md",
                ".trash/Engrama 1.md",
                ".trash/Engrama 2.md",
            ][n]
        )
    assert not (vault / "Projects" / "Engrama.md").exists()
    assert (vault / ".trash" / "Engrama 1.md").read_bytes() == b"version 1"


@pytest.mark.skipif(writer._NO_REPLACE is None, reason="this system has no rename that refuses to replace")
def test_a_save_by_rename_landing_as_a_note_is_moved_to_the_trash_stays(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: the move was a hard link into the trash, then removal of the note's name, so an
    editor's save by rename landing between the two was removed with it. Now the move is one rename: a save
    landing just after it is a note of its own at the old path."""
    note = vault / "Projects" / "Engrama.md"
    saved = NOTE + b"The person's new paragraph.\r\n"

    def editor_saves() -> None:
        other = note.with_name(".Engrama.md.swp")
        other.write_bytes(saved)
        os.rename(other, note)

    move, link = writer._NO_REPLACE, os.link

    def move_then_save(source: bytes, target: bytes) -> int:
        done = move(source, target)
        editor_saves()
        return done

    def link_then_save(source: object, target: object, **kw: object) -> None:  # the code before the fix
        link(source, target, **kw)  # type: ignore[arg-type]
        editor_saves()

    monkeypatch.setattr(writer, "_NO_REPLACE", move_then_save)
    monkeypatch.setattr(writer.os, "link", link_then_save)
    assert move_to_trash(vault, "Projects/Engrama.md") == ".trash/Engrama.md"
    assert (vault / ".trash" / "Engrama.md").read_bytes() == NOTE
    assert note.read_bytes() == saved


def test_move_to_trash_refuses_what_is_already_there(vault: Path) -> None:
    trashed = move_to_trash(vault, "Projects/Engrama.md")
    with pytest.raises(VaultError, match="already in the trash"):
        move_to_trash(vault, trashed)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_edits_racing_in_threads_of_one_process_lose_no_line(vault: Path) -> None:
    # Soak seed 25112027: an assistant's remember and forget on one note ran at once (each tool call's write
    # runs in a thread); both passed the re-read that guards the swap before either replaced the file, so the
    # second replace dropped the first's line. Writes of one process now swap one at a time.
    import threading

    lines = [[f"thread {t} line {i}\r\n".encode() for i in range(40)] for t in range(6)]
    failures: list[BaseException] = []

    def writer(mine: list[bytes]) -> None:
        try:
            for line in mine:
                edit_note(vault, "Projects/Engrama.md", append(line), attempts=10_000)
        except BaseException as exc:  # reported below: a thread's exception would otherwise vanish
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(mine,)) for mine in lines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    text = (vault / "Projects" / "Engrama.md").read_bytes()
    missing = [line for mine in lines for line in mine if line not in text]
    assert missing == [] and text.startswith(NOTE)
    assert temp_files(vault) == []


def test_tool_calls_on_one_note_at_once_each_land_and_none_waits_out_the_quiet_window(vault: Path) -> None:
    """Found by review: six remembers on one note at once in one server; each write re-read the note after
    another had replaced it, started over, and two gave up after three attempts ("kept changing"), or found
    the note changed a moment ago by the tool itself and waited for quiet. A process's edits of one note now
    take turns, and a note exactly as this process's last write left it has not been saved by anyone since."""
    import threading
    import time

    note = vault / "Projects" / "Engrama.md"
    st = note.stat()
    os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))  # saved a minute ago
    st = note.stat()
    quiet = Quiet(settle=2.0, seen=(st.st_size, st.st_mtime_ns), wait=0.5)  # as the graph last read it
    failures: list[BaseException] = []

    def remember(n: int) -> None:
        def slow_append(data: bytes) -> bytes:
            time.sleep(0.05)  # parsing, rendering: long enough for the others to read the same bytes
            return data + f"fact {n}\r\n".encode()

        try:
            edit_note(vault, "Projects/Engrama.md", slow_append, quiet=quiet)
        except BaseException as exc:  # reported below: a thread's exception would otherwise vanish
            failures.append(exc)

    threads = [threading.Thread(target=remember, args=(n,)) for n in range(6)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    text = note.read_bytes()
    assert all(f"fact {n}\r\n".encode() in text for n in range(6))
    assert time.monotonic() - started < quiet.settle  # none waited for its own process's writes to settle


def test_tool_calls_queued_on_a_note_being_typed_into_give_up_together_not_one_after_another(
    vault: Path,
) -> None:
    """Edits of one note take turns; each one's wait for quiet still counts from when it was asked, so six
    calls on a note the person keeps typing into say "being edited" after one wait, not six."""
    import threading
    import time

    note = vault / "Projects" / "Engrama.md"
    typing = threading.Event()

    def person_types() -> None:
        while not typing.is_set():
            with open(note, "ab") as handle:
                handle.write(b"x")
            time.sleep(0.05)

    quiet = Quiet(settle=2.0, seen=None, wait=0.5)
    busy: list[BaseException] = []

    def tool_call() -> None:
        try:
            edit_note(vault, "Projects/Engrama.md", append(b"fact\r\n"), quiet=quiet)
        except NoteBusy as exc:
            busy.append(exc)

    typist = threading.Thread(target=person_types)
    typist.start()
    try:
        calls = [threading.Thread(target=tool_call) for _ in range(6)]
        started = time.monotonic()
        for call in calls:
            call.start()
        for call in calls:
            call.join()
        took = time.monotonic() - started
    finally:
        typing.set()
        typist.join()
    assert len(busy) == 6 and b"fact" not in note.read_bytes()
    assert took < 4 * quiet.wait, took  # one after another would take six waits


def test_a_note_a_sync_tool_just_brought_is_not_written_until_half_a_minute_after_its_save(
    vault: Path,
) -> None:
    """Found by review (two computers, a sync tool keeping the newer file): the assistant on one computer wrote
    into its copy of a note the person was typing on the other; that copy, newer, replaced their next save
    there. A tool write now waits, as an id line does, until the save it would build on is ARRIVED_QUIET old:
    it says so at once when that is further off than it may wait, and writes nothing."""
    import time

    from vault_sync.writer import ARRIVED_QUIET

    note = vault / "Projects" / "Engrama.md"
    then = time.time() - 4  # saved 4 s ago on the other computer; written here now (its change time)
    os.utime(note, (then, then))
    st = note.stat()
    quiet = Quiet(settle=2.0, seen=(st.st_size, st.st_mtime_ns), wait=1.0, brought=ARRIVED_QUIET)
    started = time.monotonic()
    with pytest.raises(NoteBusy, match="another computer") as caught:
        edit_note(vault, "Projects/Engrama.md", append(b"fact\r\n"), quiet=quiet)
    assert time.monotonic() - started < quiet.wait  # no use waiting a second for what takes 26
    assert re.search(r"Try again in 2[56] s", str(caught.value)) and note.read_bytes() == NOTE
    # Just under the half minute: the write waits the rest of it, then lands.
    then = time.time() - ARRIVED_QUIET + 0.5
    os.utime(note, (then, then))
    started = time.monotonic()
    edit_note(vault, "Projects/Engrama.md", append(b"fact\r\n"), quiet=quiet)
    assert time.monotonic() - started >= 0.4 and note.read_bytes() == NOTE + b"fact\r\n"


def test_an_edit_that_does_not_ask_for_the_wait_writes_a_note_a_sync_tool_brought(vault: Path) -> None:
    """The id-line writer judges arrivals itself (a first sync writes the lines of a vault copied with its
    times at once); its edits do not ask for the wait (`brought` 0)."""
    import time

    note = vault / "Projects" / "Engrama.md"
    then = time.time() - 4
    os.utime(note, (then, then))
    edit_note(vault, "Projects/Engrama.md", append(b"fact\r\n"), quiet=Quiet(settle=2.0, seen=None, wait=0.5))
    assert note.read_bytes() == NOTE + b"fact\r\n"


def test_a_note_engrama_created_is_not_taken_for_one_a_sync_tool_brought(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review: with a slow disk (an fsync over a second), the link that puts a new note in place came
    more than a second after its bytes were written, so the note looked arrived and the next tool write into it
    was refused for half a minute."""
    import time

    from vault_sync.writer import ARRIVED_QUIET

    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(1.2)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    created = create_note(vault, "Projects/New.md", b"# New\n")
    monkeypatch.setattr(os, "fsync", real_fsync)
    note = vault / "Projects" / "New.md"
    st = note.stat()
    quiet = Quiet(settle=0.5, seen=(st.st_size, st.st_mtime_ns), wait=1.0, brought=ARRIVED_QUIET)
    edit_note(vault, "Projects/New.md", append(b"fact\n"), quiet=quiet)
    assert note.read_bytes() == b"# New\nfact\n" and created.changed


def test_a_tool_write_saved_over_by_an_older_copy_is_given_back_but_a_change_made_on_top_of_it_stays(
    tmp_path: Path,
) -> None:
    """Review 22g: a save of the editor's older buffer (typed before the write, saved after it) wiped a tool's
    write. For a moment after the write, such a save gives back the write's edit to be made again; a save made
    on top of the write (the person changing the value the tool set) is the person's and gives nothing back."""
    from vault_sync.notes import update_note
    from vault_sync.writer import Quiet, kept_edit

    note = tmp_path / "Atlas.md"
    before = b"---\nengrama_id: 01a2\nstatus: active\n---\nAtlas is our build system.\n"
    note.write_bytes(before)
    old = note.stat().st_mtime - 60
    os.utime(note, (old, old))  # left alone a minute ago

    def paused(data: bytes) -> bytes:
        return update_note(
            data, properties={"status": "paused"}, observation="Paused for Q3.", today="2026-11-27"
        )

    edit_note(tmp_path, "Atlas.md", paused, quiet=Quiet(settle=1.0, wait=0.5, keep=True))
    written = note.read_bytes()
    assert b"status: paused" in written and b"Paused for Q3." in written
    assert kept_edit(tmp_path, "Atlas.md") is None  # as written: nothing lost
    note.write_bytes(before + b"A line typed before the write, saved after it.\n")  # the older buffer
    again = kept_edit(tmp_path, "Atlas.md")
    assert again is not None
    redone = again(note.read_bytes())
    assert b"status: paused" in redone and b"Paused for Q3." in redone and b"saved after it." in redone
    note.write_bytes(written.replace(b"status: paused", b"status: done"))  # the person's own change on top
    assert kept_edit(tmp_path, "Atlas.md") is None
    note.write_bytes(before + b"Another older copy.\n")
    edit_note(tmp_path, "Atlas.md", lambda d: d, quiet=None)  # nothing: a later plain read changes nothing
    writer._KEPT.clear()  # the moment has passed
    assert kept_edit(tmp_path, "Atlas.md") is None


def test_two_writes_a_moment_apart_are_both_made_again_over_an_older_copy(tmp_path: Path) -> None:
    """Review 23k: two remembers into one note a tenth of a second apart, then the editor's save of its buffer
    from before both: only the second write was kept (the first's record replaced), so the first was lost.
    Writes made one on another are kept together, from the bytes before the first."""
    from vault_sync.notes import update_note
    from vault_sync.writer import Quiet, kept_edit

    note = tmp_path / "Atlas.md"
    before = b"---\nengrama_id: 01a2\n---\nAtlas is our build system.\n"
    note.write_bytes(before)
    old = note.stat().st_mtime - 60
    os.utime(note, (old, old))
    quiet = Quiet(settle=1.0, wait=0.5, keep=True)
    edit_note(
        tmp_path,
        "Atlas.md",
        lambda d: update_note(d, properties={}, observation="First fact.", today="2026-11-27"),
        quiet=quiet,
    )
    edit_note(
        tmp_path,
        "Atlas.md",
        lambda d: update_note(
            d, properties={"owner": "Maya"}, observation="Second fact.", today="2026-11-27"
        ),
        quiet=quiet,
    )
    note.write_bytes(before + b"A sentence typed.\n")  # the editor's buffer from before both writes
    again = kept_edit(tmp_path, "Atlas.md")
    assert again is not None
    redone = again(note.read_bytes())
    assert all(
        part in redone for part in (b"First fact.", b"Second fact.", b"owner: Maya", b"A sentence typed.")
    )
    assert redone.count(b"First fact.") == 1
