"""The vault's own disk full (review 22e): a note engrama creates appears whole or not at all, a note the person
saved is searchable though its id line cannot be written yet, and the assistant is told what happened.

A real small file system: a 1 MiB tmpfs mounted for the test (root only; skipped elsewhere), filled until only
the room each case needs is left. A file system without hard links (FAT, exFAT, some network shares) is the
one thing stood in for: `os.link` refuses as it does there."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.runtime import open_runtime
from server.search.service import search
from server.services.remember import remember
from server.settings import Settings
from vault_sync import writer
from vault_sync.identify import read_id
from vault_sync.writer import NoteUnwritable, create_note


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def leave_free(disk: Path, room: int) -> Path:
    """Fill `disk` until about `room` bytes are free; the filler's path (delete it to free the space)."""
    filler = disk / "filler"
    filler.unlink(missing_ok=True)
    stat = os.statvfs(disk)
    filler.write_bytes(b"x" * max(0, stat.f_bavail * stat.f_frsize - room))
    return filler


def test_a_new_note_on_a_full_disk_without_hard_links_is_whole_or_absent(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without hard links the note was written a second time in place; the disk filled half way through and
    a note cut off mid-sentence stayed, indexed, and was appended to later."""
    vault = small_disk / "vault"
    vault.mkdir()

    def no_hard_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(writer.os, "link", no_hard_links)
    text = ("The migration plan in detail, step by step. " * 130).encode()  # ~5.7 KB
    leave_free(small_disk, 12 * 1024)  # room for one copy of the note, not two
    done = create_note(vault, "Projects/Migration.md", text)
    assert (vault / "Projects/Migration.md").read_bytes() == text and done.changed
    assert [p.name for p in (vault / "Projects").iterdir()] == ["Migration.md"]  # no temp file left
    leave_free(small_disk, 2 * 1024)
    with pytest.raises(NoteUnwritable, match="the disk holding the vault is full"):
        create_note(vault, "Projects/Second.md", text)
    assert [p.name for p in (vault / "Projects").iterdir()] == ["Migration.md"]  # nothing half-written


async def test_a_note_saved_on_a_full_disk_is_searchable_and_gets_its_id_line_once_there_is_room(
    small_disk: Path, db_path: Path
) -> None:
    vault = small_disk / "vault"
    vault.mkdir()
    (vault / "Home.md").write_text("home\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        sync = rt.require_sync()
        await sync.sync_vault()
        filler = leave_free(small_disk, 40 * 1024)
        meeting = vault / "Meeting with Dana.md"
        saved = "Dana agreed on the capybara budget.\n" + "detail line\n" * 2500  # ~30 KB: it fits once
        meeting.write_text(saved, encoding="utf-8")
        report = await sync.sync_vault()
        assert not report.errors, report.errors
        assert [n.path for n in report.ids_not_written] == ["Meeting with Dana.md"]
        assert "disk holding the vault is full" in report.ids_not_written[0].error
        assert [h.name for h in (await search(rt, "capybara budget")).results] == ["Meeting with Dana"]
        assert meeting.read_text(encoding="utf-8") == saved  # untouched
        with pytest.raises(Exception, match="disk holding the vault is full"):
            await remember(rt, "Note", "Meeting with Dana", observation="Told on a full disk.")
        assert meeting.read_text(encoding="utf-8") == saved
        filler.unlink()  # space freed
        await sync.sync_vault()
        assert read_id(meeting.read_bytes()) is not None
        assert meeting.read_text(encoding="utf-8").endswith(saved)
