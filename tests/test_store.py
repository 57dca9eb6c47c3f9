"""The graph store on real SQLite files: merge, passages with FTS, migrations, archive, degraded vectors."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import sqlean

from server.store import GraphStore, memory_sql
from server.store.database import connect_sync
from server.store.migrations import MIGRATIONS, apply_migrations
from vault_sync.model import Chunk, FileState, Link, ParsedNote


def note(
    path: str, name: str, *, links: tuple[Link, ...] = (), aliases: tuple[str, ...] = (), label="Project"
):
    return ParsedNote(
        path=path, engrama_id=None, label=label, name=name, aliases=aliases, links=links, body=""
    )


def state(path: str, checksum: str = "c1") -> FileState:
    return FileState(path=path, size=10, mtime_ns=1, checksum=checksum, node_id=None)


async def neighbours(store: GraphStore, node_id: str) -> list:
    """Rows of (node, rel_type, direction, hops, via) one hop out, as `engrama_context` reads them."""
    rows, _ = await store.read(memory_sql.neighbourhood, node_id, 1, 100)
    return rows


def fts_hits(conn, word: str) -> list[int]:
    return [
        r[0] for r in conn.execute("select rowid from chunks_fts where chunks_fts match ?", (f'"{word}"',))
    ]


async def test_apply_note_twice_is_idempotent(store: GraphStore) -> None:
    n = note("Projects/Engrama.md", "Engrama", links=(Link("USES", "SQLite", "frontmatter"),))
    chunks = [Chunk(0, "", "memory for assistants")]
    assert await store.apply_note(n, "id-1", chunks, state(n.path)) is True
    assert await store.apply_note(n, "id-1", chunks, state(n.path)) is False

    def tally(conn):
        return (
            conn.execute("select count(*) from nodes").fetchone()[0],
            conn.execute("select count(*) from edges").fetchone()[0],
            conn.execute("select count(*) from chunks").fetchone()[0],
        )

    assert await store.read(tally) == (2, 1, 1)  # the note + a stub for SQLite; one edge; one passage


async def test_merge_entity_by_label_and_name_never_duplicates(store: GraphStore) -> None:
    first, created = await store.merge_entity("Technology", "SQLite", {"kind": "database"})
    again, created_again = await store.merge_entity("Technology", "sqlite", {"version": "3.50"})
    assert created and not created_again and first == again
    node = await store.get_node(first)
    assert node is not None and node.properties == {"kind": "database", "version": "3.50"}
    assert node.created_at and node.updated_at


async def test_merge_entity_promotes_a_stub_of_that_name(store: GraphStore) -> None:
    n = note("Projects/Engrama.md", "Engrama", links=(Link("USES", "watchdog", "frontmatter"),))
    await store.apply_note(n, "id-1", [], state(n.path))
    [stub] = await store.find_nodes("watchdog")
    assert stub.status == "stub"
    merged, created = await store.merge_entity("Technology", "watchdog", {})
    assert merged == stub.id and created
    promoted = await store.get_node(stub.id)
    assert promoted is not None and (promoted.status, promoted.label) == ("active", "Technology")


async def test_fts_rows_follow_chunk_insert_update_delete(store: GraphStore) -> None:
    n = note("Notes/a.md", "A")
    await store.apply_note(
        n, "a", [Chunk(0, "", "alpha words"), Chunk(1, "", "beta words")], state(n.path, "1")
    )
    assert len(await store.read(fts_hits, "alpha")) == 1
    await store.apply_note(n, "a", [Chunk(0, "", "gamma words")], state(n.path, "2"))
    assert await store.read(fts_hits, "alpha") == []
    assert await store.read(fts_hits, "beta") == []
    assert len(await store.read(fts_hits, "gamma")) == 1
    assert len(await store.read(fts_hits, "words")) == 1


async def test_unchanged_passages_keep_their_rows(store: GraphStore) -> None:
    n = note("Notes/a.md", "A")
    await store.apply_note(n, "a", [Chunk(0, "", "same"), Chunk(1, "", "old")], state(n.path, "1"))
    ids_before = await store.read(lambda c: dict(c.execute("select ordinal, id from chunks").fetchall()))
    await store.apply_note(n, "a", [Chunk(0, "", "same"), Chunk(1, "", "new")], state(n.path, "2"))
    ids_after = await store.read(lambda c: dict(c.execute("select ordinal, id from chunks").fetchall()))
    assert ids_after[0] == ids_before[0] and ids_after[1] != ids_before[1]


def test_migrations_run_from_empty_and_are_noops_the_second_time(tmp_path: Path) -> None:
    conn, _ = connect_sync(tmp_path / "m.db")
    assert apply_migrations(conn) == 0  # connect_sync already applied them all
    applied = [r[0] for r in conn.execute("select number from schema_migrations order by number")]
    assert applied == [number for number, _, _ in MIGRATIONS]
    conn.close()
    fresh = sqlean.connect(str(tmp_path / "fresh.db"), isolation_level=None)
    assert apply_migrations(fresh) == len(MIGRATIONS)
    assert apply_migrations(fresh) == 0


def test_fact_change_ids_are_never_given_twice_and_start_past_what_briefs_saw(tmp_path: Path) -> None:
    """Migration 14: `property_history` ids come from AUTOINCREMENT (a purge's deleted rows leave their ids
    unused), and an upgraded database numbers new changes past the highest id a brief already marked."""
    conn, _ = connect_sync(tmp_path / "m.db")
    now = "2026-11-27T00:00:00Z"
    conn.execute(
        "insert into nodes (id, label, name, created_at, updated_at) values ('n', 'Note', 'N', ?, ?)",
        (now, now),
    )
    add = "insert into property_history (node_id, key, valid_to, source) values ('n', 'status', ?, 'note')"
    conn.execute(add, (now,))
    conn.execute(add, (now,))
    conn.execute("delete from property_history where id = 2")
    assert conn.execute(add, (now,)).lastrowid == 3  # a plain rowid would give 2 again
    conn.execute("insert into brief_marks (client, briefed_at, history_id) values ('cursor', ?, 50)", (now,))
    conn.execute("delete from schema_migrations where number = 14")  # the upgrade, run again on this file
    assert apply_migrations(conn) == 1
    assert conn.execute(add, (now,)).lastrowid == 51
    assert [r[0] for r in conn.execute("select id from property_history order by id")] == [1, 3, 51]
    conn.close()


async def test_archived_nodes_are_hidden_from_lookups_and_neighbours(store: GraphStore) -> None:
    a = note("Projects/A.md", "A", links=(Link("LINKS_TO", "B", "wikilink"),))
    b = note("Projects/B.md", "B")
    await store.apply_note(b, "b", [], state(b.path))
    await store.apply_note(a, "a", [], state(a.path))
    assert [node.name for node, *_ in await neighbours(store, "b")] == ["A"]
    assert await store.archive_path("Projects/A.md") == "a"
    assert await store.find_nodes("A") == []
    assert [n.name for n in await store.find_nodes("A", include_archived=True)] == ["A"]
    assert await neighbours(store, "b") == []
    edge_closed = await store.read(lambda c: c.execute("select valid_to from edges").fetchone()[0])
    assert edge_closed is not None  # closed, not deleted


async def test_links_resolve_by_alias_and_stubs_are_absorbed(store: GraphStore) -> None:
    a = note("Projects/A.md", "A", links=(Link("LINKS_TO", "Memory Server", "wikilink"),))
    await store.apply_note(a, "a", [], state(a.path))
    [stub] = await store.find_nodes("memory server")
    assert stub.status == "stub"
    m = note("Projects/engrama-vault.md", "engrama-vault", aliases=("Memory Server",))
    await store.apply_note(m, "m", [], state(m.path))
    assert await store.get_node(stub.id) is None
    assert [(node.id, direction) for node, _, direction, *_ in await neighbours(store, "m")] == [("a", "in")]


async def test_a_store_without_sqlite_vec_degrades_to_full_text(db_path: Path) -> None:
    store = await GraphStore.open(db_path, vec_extension=str(db_path.parent / "no-such-vec0"))
    try:
        assert store.db.vec.ok is False
        assert "sqlite-vec could not be loaded" in (store.db.vec.reason or "")
        n = note("Notes/a.md", "A")
        await store.apply_note(n, "a", [Chunk(0, "", "still searchable")], state(n.path))
        assert len(await store.read(fts_hits, "searchable")) == 1
    finally:
        await store.close()


def test_opening_waits_for_another_process_that_is_setting_the_database_up(tmp_path: Path) -> None:
    # Two clients starting at once: one holds the new file's lock while the other switches it to WAL.
    import threading

    path = tmp_path / "shared.db"
    other = sqlean.connect(str(path), isolation_level=None, check_same_thread=False)
    other.execute("create table schema_migrations (number integer primary key, name text, applied_at text)")
    other.execute("begin immediate")
    other.execute("insert into schema_migrations values (0, 'setting up', '')")
    releaser = threading.Timer(0.5, lambda: other.execute("commit"))
    releaser.start()
    try:
        conn, _ = connect_sync(path)
        assert conn.execute("pragma journal_mode").fetchone()[0] == "wal"
        conn.close()
    finally:
        releaser.join()
        other.close()


async def test_the_aside_connection_reads_in_parallel_and_cannot_write(store: GraphStore) -> None:
    await store.apply_note(note("Projects/Harbor.md", "Harbor"), "id-1", [], state("Projects/Harbor.md"))

    def where_and_what(conn) -> tuple[str, list[str]]:
        return threading.current_thread().name, [r[0] for r in conn.execute("select name from nodes")]

    thread, names = store.read_aside(where_and_what).result(timeout=10)
    assert thread.startswith("engrama-db-aside") and names == ["Harbor"]
    main_thread = await store.read(lambda conn: threading.current_thread().name)
    assert main_thread != thread  # a thread (and connection) of its own

    def write(conn) -> None:
        conn.execute("delete from nodes")

    with pytest.raises(sqlean.OperationalError, match="readonly|read-only|query_only"):
        store.read_aside(write).result(timeout=10)
    assert await store.read(lambda conn: conn.execute("select count(*) from nodes").fetchone()[0]) == 1
    # It sees what the main connection commits after it opened.
    await store.apply_note(note("Projects/Kiln.md", "Kiln"), "id-2", [], state("Projects/Kiln.md"))
    assert sorted(store.read_aside(where_and_what).result(timeout=10)[1]) == ["Harbor", "Kiln"]


async def test_closing_the_store_ends_the_aside_thread(db_path: Path) -> None:
    graph = await GraphStore.open(db_path)
    graph.read_aside(lambda conn: conn.execute("select 1").fetchone()).result(timeout=10)
    assert any(t.name.startswith("engrama-db-aside") for t in threading.enumerate())
    await graph.close()
    assert not any(t.name.startswith("engrama-db-aside") for t in threading.enumerate())


async def test_the_wal_gives_back_what_a_burst_of_writes_made_it_grow_to(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by review of a long session: after a first sync or a big checkout the -wal file kept its largest
    size (66 MiB) for as long as the server ran. Once a burst of writes is over, its frames are checkpointed,
    and the next write starts the WAL over, cut back to WAL_KEPT_BYTES."""
    from server.store import database
    from server.store.database import WAL_KEPT_BYTES

    monkeypatch.setattr(database, "BURST_IDLE_S", 0.2)
    store = await GraphStore.open(db_path)
    try:
        wal = db_path.with_name(db_path.name + "-wal")

        def burst(conn) -> None:  # type: ignore[no-untyped-def]
            conn.execute("create table if not exists scratch (x blob)")
            conn.executemany("insert into scratch values (randomblob(4096))", [()] * 3000)

        for _ in range(3):  # ~36 MiB through the WAL, under the automatic checkpoint
            await store.write(burst)
        grown = wal.stat().st_size
        await asyncio.sleep(0.3)  # the burst is over
        await store.write(lambda conn: conn.execute("delete from scratch where rowid = 1"))
        assert grown > 4 * WAL_KEPT_BYTES and wal.stat().st_size <= WAL_KEPT_BYTES
    finally:
        await store.close()
