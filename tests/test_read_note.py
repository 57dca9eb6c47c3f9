"""`engrama_read_note` through the real server over stdio: pages of a 1 MB note, names resolved as Obsidian
resolves links, links and backlinks, and paths that must be refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_e2e_stdio import COMMAND, call, error_of
from tests.test_resources import served

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


def big_note() -> str:
    lines = [f"Line {i:06} of a long log: caf\u00e9 \u2014 r\u00e9sum\u00e9\r\n" for i in range(24_000)]
    return "---\ntype: Note\n---\n" + "".join(lines)


async def test_a_one_megabyte_note_is_read_in_pages_that_reassemble_it(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    text = big_note()
    (vault / "Log.md").write_bytes(text.encode("utf-8"))
    assert (vault / "Log.md").stat().st_size > 1_000_000
    async with served(vault, db_path, tmp_path) as session:
        pages, offset = [], 0
        while offset is not None:
            page = await call(
                session, "engrama_read_note", {"path": "Log.md", "offset": offset, "max_chars": 150_000}
            )
            assert page["total_chars"] == len(text) and page["offset"] == offset
            pages.append(page["text"])
            offset = page["next_offset"]
        assert len(pages) == 7 and "".join(pages) == text
        whole_default = await call(session, "engrama_read_note", {"path": "Log.md"})
        assert len(whole_default["text"]) == 20_000 and whole_default["next_offset"] == 20_000


async def test_a_note_is_found_by_name_alias_or_path_with_its_links(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    (vault / "Projects").mkdir()
    (vault / "Projects" / "Engrama.md").write_text(
        "---\ntype: Project\naliases: [engrama-vault]\nrelations:\n  USES: ['[[SQLite]]']\n---\n"
        "Memory in a vault, see [[Idea]].\n",
        encoding="utf-8",
    )
    (vault / "Idea.md").write_text("Why [[Engrama]] exists.\n", encoding="utf-8")
    async with served(vault, db_path, tmp_path) as session:
        await call(session, "engrama_sync_vault", {})
        by_alias = await call(session, "engrama_read_note", {"name": "ENGRAMA-VAULT"})
        by_path = await call(session, "engrama_read_note", {"path": "Projects/Engrama.md"})
        assert by_alias == by_path
        assert by_alias["label"] == "Project" and by_alias["name"] == "Engrama" and by_alias["id"]
        assert by_alias["text"] == (vault / "Projects" / "Engrama.md").read_text(encoding="utf-8")
        assert {(link["name"], link["rel_type"]) for link in by_alias["links"]} == {
            ("SQLite", "USES"),
            ("Idea", "LINKS_TO"),
        }
        assert by_alias["backlinks"] == 1 and by_alias["next_offset"] is None
        assert "has no note yet" in await error_of(session, "engrama_read_note", {"name": "sqlite"})
        assert "nothing is called" in await error_of(session, "engrama_read_note", {"name": "Nobody"})


async def test_paths_out_of_the_vault_and_ignored_files_are_refused(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("outside\n", encoding="utf-8")
    (vault / "escape.md").symlink_to(secret)
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "app.md").write_text("settings\n", encoding="utf-8")
    (vault / "bad.md").write_bytes(b"caf\xe9\n")
    async with served(vault, db_path, tmp_path) as session:
        assert "climbs out" in await error_of(session, "engrama_read_note", {"path": "../secret.md"})
        assert "absolute" in await error_of(session, "engrama_read_note", {"path": str(secret)})
        assert "symlink" in await error_of(session, "engrama_read_note", {"path": "escape.md"})
        assert "not a note" in await error_of(session, "engrama_read_note", {"path": ".obsidian/app.md"})
        assert "give the note's path" in await error_of(session, "engrama_read_note", {})  # was "not both"
        bad = await call(session, "engrama_read_note", {"path": "bad.md"})
        assert bad["replaced_bytes"] is True and bad["text"] == "caf\ufffd\n"
