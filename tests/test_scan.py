"""Scanning the vault: nested notes found, dot-folders skipped, links and unreadable folders reported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vault_sync.errors import PathOutsideVault, VaultError
from vault_sync.scan import ScanResult, StatEntry, not_on_disk, presence, scan_vault


def write(root: Path, rel: str, text: str = "note") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def paths(result: ScanResult) -> list[str]:
    return [entry.rel_path for entry in result.notes]


def error_paths(result: ScanResult) -> list[str]:
    return [path for path, _ in result.errors]


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write(root, "Inbox.md")
    write(root, "Projects/Engrama.md", "# Engrama")
    write(root, "Projects/Deep/Deeper/Plan.MD")
    (tmp_path / "outside").mkdir()
    write(tmp_path, "outside/Secret.md")
    return root


def test_scan_finds_nested_notes_with_size_and_mtime(vault: Path) -> None:
    result = scan_vault(vault)
    assert paths(result) == ["Inbox.md", "Projects/Deep/Deeper/Plan.MD", "Projects/Engrama.md"]
    st = (vault / "Projects" / "Engrama.md").stat()
    assert StatEntry("Projects/Engrama.md", st.st_size, st.st_mtime_ns, st.st_ino) in result.notes
    assert result.errors == ()


def test_scan_skips_dot_folders_trash_and_scratch_files(vault: Path) -> None:
    for rel in [".obsidian/workspace.md", ".git/x.md", ".trash/Old.md", "Projects/.hidden/x.md"]:
        write(vault, rel)
    for rel in ["Projects/.Engrama.md.swp", "Projects/Engrama.md~", "Projects/4913", "image.png", "#a.md#"]:
        write(vault, rel)
    (vault / ".#Inbox.md").symlink_to("root@host.1234")  # emacs lock: a dangling link by design
    result = scan_vault(vault)
    assert paths(result) == ["Inbox.md", "Projects/Deep/Deeper/Plan.MD", "Projects/Engrama.md"]
    assert result.errors == ()


def test_a_symlink_to_a_note_of_the_vault_is_that_note_not_a_second_one(vault: Path) -> None:
    (vault / "Shortcut.md").symlink_to(Path("Projects") / "Engrama.md")
    result = scan_vault(vault)
    assert "Shortcut.md" not in paths(result) and "Projects/Engrama.md" in paths(result)
    assert result.errors == ()


def test_a_symlink_to_a_file_no_other_path_lists_as_a_note_counts_at_the_link_path(vault: Path) -> None:
    write(vault, ".templates/Daily.md")  # in a hidden folder: not a note at its own path
    (vault / "Daily template.md").symlink_to(Path(".templates") / "Daily.md")
    result = scan_vault(vault)
    assert "Daily template.md" in paths(result)
    shortcut = next(entry for entry in result.notes if entry.rel_path == "Daily template.md")
    assert shortcut.size == (vault / ".templates/Daily.md").stat().st_size


def test_symlinks_out_of_the_vault_are_reported_not_followed(vault: Path) -> None:
    (vault / "Shared").symlink_to(vault.parent / "outside", target_is_directory=True)
    (vault / "Secret.md").symlink_to(vault.parent / "outside" / "Secret.md")
    (vault / "photo.png").symlink_to(vault.parent / "outside" / "Secret.md")  # not a note: not our business
    result = scan_vault(vault)
    assert not any("Secret" in path for path in paths(result))
    assert error_paths(result) == ["Secret.md", "Shared"]
    assert all("outside the vault" in message for _, message in result.errors)


def test_broken_symlink_is_reported(vault: Path) -> None:
    (vault / "Gone.md").symlink_to(vault / "Deleted.md")
    result = scan_vault(vault)
    assert result.errors == (
        ("Gone.md", f"broken symlink (to {vault / 'Deleted.md'}); fix or remove the link"),
    )


def test_symlink_loops_end_the_walk_and_are_reported(vault: Path) -> None:
    (vault / "Projects" / "Back").symlink_to("..", target_is_directory=True)  # a folder loop
    (vault / "a.md").symlink_to(vault / "b.md")
    (vault / "b.md").symlink_to(vault / "a.md")
    result = scan_vault(vault)
    assert paths(result) == ["Inbox.md", "Projects/Deep/Deeper/Plan.MD", "Projects/Engrama.md"]
    assert error_paths(result) == ["a.md", "b.md"]
    assert all("symlink loop" in message for _, message in result.errors)


def test_scan_of_a_folder_lists_only_that_folder(vault: Path) -> None:
    result = scan_vault(vault, "Projects/Deep")
    assert paths(result) == ["Projects/Deep/Deeper/Plan.MD"]
    assert result.covers("Projects/Deep/Gone.md")
    assert not result.covers("Projects/Engrama.md")


def test_scan_refuses_bad_folders(vault: Path) -> None:
    write(vault, ".obsidian/x.md")
    with pytest.raises(PathOutsideVault):
        scan_vault(vault, "../outside")
    with pytest.raises(VaultError, match="hidden folder"):
        scan_vault(vault, ".obsidian")
    with pytest.raises(VaultError, match="not a folder"):
        scan_vault(vault, "Nowhere")


def test_scan_of_an_unreadable_vault_raises_rather_than_reporting_nothing(tmp_path: Path) -> None:
    with pytest.raises(VaultError, match="is missing: is it on a drive that is unplugged"):
        scan_vault(tmp_path / "unmounted-vault")


def test_cloud_placeholders_and_conflict_copies_are_listed_apart_from_notes(vault: Path) -> None:
    write(vault, "Projects/.Evicted.md.icloud", "")  # iCloud's stand-in for Evicted.md
    write(vault, "Projects/.Engrama.md.icloud", "")  # downloaded again: the note itself is there too
    write(vault, "Projects/Engrama.sync-conflict-20240501-093000-ABCDEF1.md")
    result = scan_vault(vault)
    assert paths(result) == ["Inbox.md", "Projects/Deep/Deeper/Plan.MD", "Projects/Engrama.md"]
    assert result.placeholders == ("Projects/Evicted.md",)
    assert result.conflicts == (
        ("Projects/Engrama.sync-conflict-20240501-093000-ABCDEF1.md", "Projects/Engrama.md"),
    )
    assert not result.covers("Projects/Evicted.md") and result.covers("Projects/Gone.md")


def test_files_the_os_keeps_in_the_cloud_only_are_placeholders() -> None:
    class Stat:
        def __init__(self, flags: int = 0, attributes: int = 0) -> None:
            self.st_flags, self.st_file_attributes = flags, attributes

    assert not_on_disk(Stat(flags=0x40000000))  # type: ignore[arg-type]  # macOS SF_DATALESS
    assert not_on_disk(Stat(attributes=0x400000))  # type: ignore[arg-type]  # RECALL_ON_DATA_ACCESS
    assert not_on_disk(Stat(attributes=0x1000))  # type: ignore[arg-type]  # OFFLINE
    assert not not_on_disk(Stat(flags=0x20, attributes=0x20))  # type: ignore[arg-type]  # archive bits


def test_presence_tells_gone_from_unseen(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, "Projects/Engrama.md")
    write(root, "Projects/.Evicted.md.icloud", "")
    write(root, "Flat", "a file where a folder was")
    assert presence(root, "Projects/Engrama.md").state == "there"
    assert presence(root, "Projects/Gone.md").state == "gone"
    assert presence(root, "Deleted folder/Note.md").state == "gone"
    assert presence(root, "Flat/Note.md").state == "gone"
    assert presence(root, "Projects/Evicted.md").state == "unseen"
    assert presence(root, "Projects", folder=True).state == "there"
    assert presence(root, "Flat", folder=True).state == "gone"
    missing = presence(tmp_path / "unplugged", "Projects/Engrama.md")
    assert missing.state == "unseen" and "is missing" in missing.reason


def test_covers_excludes_paths_below_errors() -> None:
    result = ScanResult(folder="", notes=(), errors=(("Private", "permission denied"),))
    assert result.covers("Projects/Engrama.md")
    assert not result.covers("Private/Diary.md")
    assert result.covers("Private-not/x.md")


def test_permission_denied_folder_is_reported_and_walk_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    write(root, "Public.md")
    write(root, "Private/Diary.md")
    (root / "Private").chmod(0o000)
    try:
        notes, errors = _scan_without_root_powers(root)
    finally:
        (root / "Private").chmod(0o755)
    assert notes == ["Public.md"]
    assert [path for path, _ in errors] == ["Private"]
    assert "permission denied" in errors[0][1]


def _scan_without_root_powers(root: Path) -> tuple[list[str], list[list[str]]]:
    """Scan in-process, or, as root (whom chmod 000 does not stop), in a child stripped of the DAC capabilities."""
    if os.geteuid() != 0:
        result = scan_vault(root)
        return paths(result), [list(error) for error in result.errors]
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip(
            "running as root, where chmod 000 does not block reads, and util-linux setpriv is missing"
        )
    code = (
        "import json, sys; from vault_sync.scan import scan_vault; r = scan_vault(sys.argv[1]); "
        "print(json.dumps([[n.rel_path for n in r.notes], r.errors]))"
    )
    drop = "-dac_override,-dac_read_search"
    child = subprocess.run(
        [setpriv, "--bounding-set", drop, "--inh-caps", drop, "--", sys.executable, "-c", code, str(root)],
        capture_output=True,
        text=True,
    )
    if child.returncode != 0 and "vault_sync" not in child.stderr:
        pytest.skip(f"running as root and cannot drop capabilities here: {child.stderr.strip()[-200:]}")
    assert child.returncode == 0, child.stderr
    notes, errors = json.loads(child.stdout)
    return notes, errors


def test_scan_of_ten_thousand_notes_finds_every_one(tmp_path: Path) -> None:
    # Speed is measured in bench/sync_bench.py, not asserted here (machines are noisy).
    root = tmp_path / "big"
    for folder in range(100):
        (root / f"Folder {folder}").mkdir(parents=True)
        for note in range(100):
            (root / f"Folder {folder}" / f"Note {note}.md").write_bytes(b"x")
    result = scan_vault(root)
    assert len(result.notes) == 10_000
    assert len({entry.rel_path for entry in result.notes}) == 10_000
