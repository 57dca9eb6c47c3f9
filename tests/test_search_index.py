"""The note-level full-text rows (migration m003): filled by every sync, backfilled for older databases."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlean

from server.runtime import open_runtime
from server.search.service import search
from server.services.context import context
from server.services.remember import remember
from server.settings import Settings
from server.store import forget_sql, migrations, passages_sql, search_sql, sync_sql
from server.store.database import connect_sync
from vault_sync.model import Chunk, FileState, ParsedNote


def note_rows(conn, word: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "select d.node_id from notes_fts join note_docs d on d.doc = notes_fts.rowid "
            "where notes_fts match ? order by d.node_id",
            (f'"{word}"',),
        )
    ]


def test_a_database_from_before_the_note_rows_is_backfilled(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "old.db"
    conn = sqlean.connect(str(path), isolation_level=None)
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:2])
    migrations.apply_migrations(conn)
    conn.execute(
        "insert into nodes (id, label, name, created_at, updated_at) values ('n1', 'Note', 'Garden', 'x', 'x')"
    )
    conn.executemany(
        "insert into chunks (node_id, ordinal, title, text) values ('n1', ?, 'Garden', ?)",
        [(0, "Tomatoes want sun."), (1, "Basil wants water.")],
    )
    conn.close()
    monkeypatch.undo()
    conn, _ = connect_sync(path)
    assert note_rows(conn, "basil") == ["n1"] and note_rows(conn, "tomatoes") == ["n1"]
    assert note_rows(conn, "garden") == ["n1"]  # the name is indexed too


def _apply(conn, node_id: str, name: str, texts: list[str], checksum: str) -> None:
    """One note synced as the vault's sync applies it (its passages stored, its rows indexed)."""
    note = ParsedNote(
        path=f"{name}.md", engrama_id=node_id, label="Note", name=name, aliases=(), links=(), body=""
    )
    chunks = [Chunk(i, "", text) for i, text in enumerate(texts)]
    sync_sql.apply_note(conn, note, node_id, chunks, FileState(note.path, 1, 1, checksum, node_id), "x")


def index_words(conn, word: str) -> int:
    """Rows of the whole-note index holding `word`, whether or not a node still has them."""
    return conn.execute("select count(*) from notes_fts where notes_fts match ?", (f'"{word}"',)).fetchone()[
        0
    ]


def test_reindexing_a_note_replaces_its_row(tmp_path: Path) -> None:
    conn, _ = connect_sync(tmp_path / "g.db", load_vec=False)
    _apply(conn, "a", "A", ["old words here"], "1")
    _apply(conn, "b", "B", ["old words too"], "1")
    _apply(conn, "a", "A", ["new text"], "2")
    assert note_rows(conn, "old") == ["b"] and index_words(conn, "old") == 1
    assert note_rows(conn, "new") == ["a"]


def test_purging_a_node_takes_its_row_out_of_the_index(tmp_path: Path) -> None:
    conn, _ = connect_sync(tmp_path / "g.db", load_vec=False)
    _apply(conn, "a", "A", ["ephemeral words"], "1")
    _apply(conn, "b", "B", ["lasting words"], "1")
    forget_sql.purge_node(conn, "a", "A.md", "y")
    assert index_words(conn, "ephemeral") == 0 and index_words(conn, "words") == 1
    assert conn.execute("select count(*) from note_docs").fetchone()[0] == 1


@pytest.mark.parametrize(
    ("as_of", "valid"),
    [("2024-01-01", True), ("2023-12-31", False), ("2024-06-30", True), ("2024-07-01", False)],
)
def test_the_as_of_filter_compares_whole_days(tmp_path: Path, as_of: str, valid: bool) -> None:
    conn, _ = connect_sync(tmp_path / "g.db", load_vec=False)
    conn.execute(
        "insert into nodes (id, label, name, valid_from, valid_to, created_at, updated_at) "
        "values ('a', 'Note', 'A', '2024-01-01T23:00:00Z', '2024-06-30T01:00:00Z', 'x', 'x')"
    )
    found = search_sql.node_rows(conn, ["a"], search_sql.NodeFilter(as_of=as_of))
    assert ("a" in found) is valid


async def test_a_note_written_for_a_node_made_in_the_graph_alone_gets_its_whole_note_row(
    vault: Path, db_path: Path
) -> None:
    # Soak seed 4711: a second client's assistant made the entity in the graph alone; the holder then wrote its
    # note, a heading and nothing else (no passages). Nothing "changed" in its passages, so the note never got
    # its whole-note row and its name did not find it.
    from server.runtime import open_runtime
    from server.settings import Settings
    from server.store import search_sql

    name = "Under-connected - Juniper has no relations"
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        node_id, _ = await rt.store.merge_entity("Concept", name, {})
        path = vault / "Concepts" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nengrama_id: {node_id}\ntype: Concept\nname: {name}\n---\n# {name}\n", "utf-8")
        await rt.require_sync().sync_vault()
        rows = await rt.store.read(lambda c: c.execute("select name from note_docs").fetchall())
        hits = await rt.store.read(search_sql.note_hits, '"juniper"', 5, search_sql.NodeFilter())
    assert [tuple(r) for r in rows] == [(name,)]
    assert [n for n, _ in hits] == [node_id]


async def test_a_notes_tags_are_kept_and_found(vault: Path, db_path: Path) -> None:
    """Review 21a: frontmatter `tags:` were parsed and kept nowhere: a note tagged `q3-goals` was not found by
    it, `engrama_context` showed no tags, and tags an assistant remembered into the note vanished likewise."""
    (vault / "Projects").mkdir()
    heron = vault / "Projects/Heron.md"
    heron.write_text("---\ntype: Project\ntags: [birdwatching, q3-goals]\n---\nA field guide app.\n", "utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()

        async def found(query: str) -> list[str]:
            return [hit.name for hit in (await search(rt, query)).results]

        assert await found("q3-goals") == ["Heron"] and await found("birdwatching") == ["Heron"]
        assert (await context(rt, "Heron")).node.properties["tags"] == ["birdwatching", "q3-goals"]
        await remember(rt, "Project", "Heron", properties={"tags": ["birdwatching", "q3-goals", "mobile"]})
        assert await found("mobile") == ["Heron"]
        assert (await context(rt, "Heron")).node.properties["tags"] == ["birdwatching", "q3-goals", "mobile"]
        text = heron.read_text("utf-8")
        assert "mobile" in text  # written into the note by remember
        front, body = text.split("\n---\n", 1)
        kept = [line for line in front.splitlines() if line.startswith(("---", "type:", "engrama_id:"))]
        heron.write_text("\n".join(kept) + "\n---\n" + body, "utf-8")  # the person takes the tags out
        await rt.require_sync().sync_path("Projects/Heron.md")
        assert await found("mobile") == [] and "tags" not in (await context(rt, "Heron")).node.properties


HARBOR = """---
type: Project
aliases: [HA pipeline]
status: blocked
client: "[[Meridian Freight]]"
reviewers:
  - Olu
  - Ingrid
deadline: 2024-09-30
priority: 2
---
Dashboards for the port.
"""


async def test_what_a_notes_frontmatter_states_finds_it(vault: Path, db_path: Path) -> None:
    """A note is found by the words of its properties and aliases, as Obsidian's search finds it: `status:
    blocked` answers "which project is blocked?". Dates and numbers are not words of it."""
    (vault / "Projects").mkdir()
    harbor = vault / "Projects/Harbor.md"
    harbor.write_text(HARBOR, "utf-8")
    (vault / "Projects/Kestrel.md").write_text(
        "---\ntype: Project\nstatus: active\n---\nA port app.\n", "utf-8"
    )
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()

        async def found(query: str) -> list[str]:
            return [hit.name for hit in (await search(rt, query)).results]

        assert await found("which project is blocked") == ["Harbor"]
        assert await found("Meridian Freight") == ["Harbor"]
        assert await found("Ingrid") == ["Harbor"]
        assert await found("pipeline") == ["Harbor"]  # a word of an alias
        assert await found("2024") == [] and await found("30") == []
        assert await found("active port") == ["Kestrel", "Harbor"]
        harbor.write_text(HARBOR.replace("status: blocked", "status: done"), "utf-8")
        await rt.require_sync().sync_path("Projects/Harbor.md")
        assert await found("blocked") == [] and await found("done") == ["Harbor"]


async def test_an_upgraded_database_finds_notes_by_their_properties(vault: Path, db_path: Path) -> None:
    """Migration 18: the whole-note rows made before it held the name and tags only; every note is read once
    more at the next start, so its properties' words find it."""
    (vault / "Projects").mkdir()
    (vault / "Projects/Harbor.md").write_text(HARBOR, "utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
    conn, _ = connect_sync(db_path)  # the row as the version before migration 18 made it
    [(node_id,)] = conn.execute("select id from nodes where name = 'Harbor'").fetchall()
    with conn:
        body = passages_sql.stored_note_texts(conn, [node_id])[node_id]
        search_sql.index_note_docs(conn, [(node_id, "Harbor", body)])
        conn.execute("delete from schema_migrations where number = 18")
    assert note_rows(conn, "blocked") == []
    assert migrations.apply_migrations(conn) == 1
    conn.close()
    async with open_runtime(settings) as rt:
        report = await rt.require_sync().sync_vault()
        assert report.updated == 1 and not report.errors
        assert [hit.name for hit in (await search(rt, "blocked")).results] == ["Harbor"]
