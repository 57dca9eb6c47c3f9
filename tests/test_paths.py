"""Vault path rules: tool paths never leave the vault, and the sync knows a note from scratch files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_sync.errors import PathOutsideVault
from vault_sync.paths import (
    classify,
    cloud_placeholder_of,
    conflict_original,
    is_engrama_temp,
    make_temp_name,
    resolve_in_vault,
    to_rel,
)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "Projects").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("secret", encoding="utf-8")
    return root


def test_resolve_returns_path_inside_vault(vault: Path) -> None:
    assert resolve_in_vault(vault, "Projects/Engrama.md") == vault / "Projects" / "Engrama.md"


def test_resolve_normalises_dots_backslashes_and_double_slashes(vault: Path) -> None:
    assert resolve_in_vault(vault, "./Projects//x/../Engrama.md") == vault / "Projects" / "Engrama.md"
    assert resolve_in_vault(vault, "Projects\\Engrama.md") == vault / "Projects" / "Engrama.md"


def test_resolve_accepts_the_vault_root_itself(vault: Path) -> None:
    assert resolve_in_vault(vault, "") == vault


@pytest.mark.parametrize(
    "rel",
    [
        "..",
        "../outside/secret.md",
        "Projects/../../outside/secret.md",
        "Projects\\..\\..\\outside\\secret.md",
        "/etc/passwd",
        "C:\\Users\\me\\notes.md",
        "C:/Users/me/notes.md",
        "c:notes.md",
        "\\\\server\\share\\notes.md",
        "//server/share/notes.md",
        "~/notes.md",
        "Projects/a\x00.md",
        "Projects/\ud800.md",
    ],
)
def test_resolve_refuses_paths_that_are_not_vault_relative(vault: Path, rel: str) -> None:
    with pytest.raises(PathOutsideVault, match="relative to the vault, e.g. Projects/Engrama.md"):
        resolve_in_vault(vault, rel)


def test_resolve_refuses_symlinked_folder_leading_out(vault: Path) -> None:
    (vault / "Shared").symlink_to(vault.parent / "outside", target_is_directory=True)
    with pytest.raises(PathOutsideVault, match="symlink"):
        resolve_in_vault(vault, "Shared/secret.md")
    with pytest.raises(PathOutsideVault):
        resolve_in_vault(vault, "Shared/new-note.md")


def test_resolve_refuses_symlinked_file_leading_out(vault: Path) -> None:
    (vault / "secret.md").symlink_to(vault.parent / "outside" / "secret.md")
    with pytest.raises(PathOutsideVault):
        resolve_in_vault(vault, "secret.md")


def test_resolve_allows_symlinks_that_stay_inside(vault: Path) -> None:
    (vault / "Alias").symlink_to(vault / "Projects", target_is_directory=True)
    assert resolve_in_vault(vault, "Alias/Engrama.md") == vault / "Alias" / "Engrama.md"


def test_resolve_survives_a_symlink_loop(vault: Path) -> None:
    (vault / "a.md").symlink_to(vault / "b.md")
    (vault / "b.md").symlink_to(vault / "a.md")
    assert resolve_in_vault(vault, "a.md") == vault / "a.md"


def test_resolve_works_in_a_vault_reached_through_a_symlink(vault: Path) -> None:
    link = vault.parent / "vault-link"
    link.symlink_to(vault, target_is_directory=True)
    assert resolve_in_vault(link, "Projects/Engrama.md") == link / "Projects" / "Engrama.md"


def test_to_rel_gives_posix_paths_and_refuses_outsiders(vault: Path) -> None:
    assert to_rel(vault, vault / "Projects" / "Engrama.md") == "Projects/Engrama.md"
    assert to_rel(vault, vault) == ""
    with pytest.raises(PathOutsideVault):
        to_rel(vault, vault.parent / "outside" / "secret.md")
    with pytest.raises(PathOutsideVault):
        to_rel(vault, str(vault) + "-old/x.md")


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("Engrama.md", "note"),
        ("Projects/Deep/Engrama.MD", "note"),
        ("Projects/with space.Md", "note"),
        ("image.png", "ignored"),
        ("Projects/notes.txt", "ignored"),
        (".obsidian/workspace.md", "ignored"),
        (".git/COMMIT_EDITMSG.md", "ignored"),
        (".engrama/cache.md", "ignored"),
        ("Projects/.hidden/x.md", "ignored"),
        (".trash/Old.md", "trash"),
        (".trash/Sub/Old.md", "trash"),
        (".trash/picture.png", "ignored"),
        ("Projects/.trash/x.md", "ignored"),
        (".hidden.md", "ignored"),
        (".DS_Store", "ignored"),
        ("Projects/.Engrama.md.swp", "ignored"),
        ("Engrama.md.swo", "ignored"),
        ("Engrama.md.swx", "ignored"),
        ("Engrama.md~", "ignored"),
        ("4913", "ignored"),
        ("#Engrama.md#", "ignored"),
        (".#Engrama.md", "ignored"),
        ("Engrama.md.tmp", "ignored"),
        ("Engrama.md.TEMP", "ignored"),
        ("~$Engrama.md", "ignored"),
        (".engrama-tmp-0123456789abcdef.tmp", "ignored"),
    ],
)
def test_classify(rel: str, kind: str) -> None:
    assert classify(rel) == kind


@pytest.mark.parametrize(
    ("rel", "original"),
    [
        ("Projects/Atlas.sync-conflict-20240501-093000-ABCDEF1.md", "Projects/Atlas.md"),
        ("Atlas (Ann's conflicted copy 2024-05-01).md", "Atlas.md"),
        ("Atlas (Ann\u2019s conflicted copy 2024-05-01 (1)).md", "Atlas.md"),
        ("Atlas (conflicted copy 2024-05-01 093000).md", "Atlas.md"),
        ("Atlas (Conflicted copy Ann's iPhone 202405010930).md", "Atlas.md"),
        ("Atlas (SFConflict ann@example.com 2024-05-01-09-30-00).md", "Atlas.md"),
        ("Atlas_conflict-20240501-093000.md", "Atlas.md"),
        ("A/B/Atlas-LAPTOP-0A1B2C3.md", "A/B/Atlas.md"),
    ],
)
def test_sync_tools_conflict_copies_are_recognised_with_their_original(rel: str, original: str) -> None:
    assert (classify(rel), conflict_original(rel)) == ("conflict", original)


@pytest.mark.parametrize(
    "rel",
    ["Atlas 2.md", "Atlas (copy).md", "Conflicts.md", "Atlas-desktop-notes.md", "sync-conflict notes.md"],
)
def test_names_that_only_look_like_conflict_copies_are_notes(rel: str) -> None:
    assert (classify(rel), conflict_original(rel)) == ("note", None)


def test_icloud_placeholders_name_the_note_they_stand_for() -> None:
    assert cloud_placeholder_of(".Atlas.md.icloud") == "Atlas.md"
    assert cloud_placeholder_of(".photo.png.icloud") is None
    assert cloud_placeholder_of("Atlas.md") is None
    assert classify("Projects/.Atlas.md.icloud") == "ignored"


def test_temp_names_are_ignored_and_recognised() -> None:
    name = make_temp_name()
    assert classify(f"Projects/{name}") == "ignored"
    assert is_engrama_temp(name)
    assert not is_engrama_temp("Engrama.md")
    assert make_temp_name() != name


@pytest.fixture(scope="module")
def trap_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vault full of ways out: links to outside, to the parent, loops, and a link inside."""
    base = tmp_path_factory.mktemp("trap")
    root = base / "vault"
    (root / "a" / "b").mkdir(parents=True)
    (base / "outside").mkdir()
    (root / "out").symlink_to(base / "outside", target_is_directory=True)
    (root / "a" / "up").symlink_to("../..", target_is_directory=True)
    (root / "in").symlink_to(root / "a", target_is_directory=True)
    (root / "loop").symlink_to(root / "loop2")
    (root / "loop2").symlink_to(root / "loop")
    return root


_segment = st.sampled_from(
    ["..", ".", "", "a", "b", "up", "out", "in", "loop", "C:", "~", "x.md", "\\", "..\\.."]
)
_rel_paths = st.lists(_segment | st.text(max_size=6), max_size=8).map("/".join) | st.text(max_size=24)


@settings(max_examples=400, deadline=None)
@given(rel=_rel_paths)
def test_resolved_paths_never_leave_the_vault(trap_vault: Path, rel: str) -> None:
    try:
        resolved = resolve_in_vault(trap_vault, rel)
    except PathOutsideVault:
        return
    assert resolved.is_relative_to(trap_vault)
    assert Path(os.path.realpath(resolved)).is_relative_to(os.path.realpath(trap_vault))
