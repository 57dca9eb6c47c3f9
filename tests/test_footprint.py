# pyright: reportAttributeAccessIssue=false
# (sqlean re-exports its names from a compiled module without type stubs, so pyright cannot see them.)
"""Issue 15, the footprint: each passage's text stored once, a database sized to the vault, and a database made
before migration 9 upgraded in place with the same search results. Real vaults (bench/vaultgen.py), real
SQLite files, the real sync."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import sqlean
from mcp import Client

from bench.vaultgen import generate_vault
from server.app import create_server
from server.runtime import open_runtime
from server.search import fts_query
from server.search.service import search
from server.settings import Settings
from server.store import database, forget_sql, migrations, passages_sql, search_sql, vectors_sql
from server.store.search_sql import NodeFilter
from vault_sync.chunking import chunk_body
from vault_sync.parse import parse_note

QUERIES = ("kamine tezi", "lo", "ruva sapa zi", "hija", "orus elka")


def _settings(vault: Path, db: Path) -> Settings:
    return Settings(vault=vault, db_path=db, embedding_provider="none", watch=False)


async def _sync(vault: Path, db: Path) -> None:
    async with open_runtime(_settings(vault, db), take_lease=True) as rt:
        await rt.require_sync().sync_vault()


def _vault_bytes(vault: Path) -> int:
    return sum(p.stat().st_size for p in vault.rglob("*.md"))


def _table_bytes(db: Path) -> dict[str, int]:
    conn = sqlean.connect(str(db))
    try:
        return dict(conn.execute("select name, sum(pgsize) from dbstat group by name").fetchall())
    finally:
        conn.close()


def _queries(vault: Path) -> list[str]:
    """Words the notes use (so queries match), from a few notes' bodies."""
    words = []
    for path in sorted(vault.rglob("*.md"))[:12]:
        body = path.read_text(encoding="utf-8").split("---", 2)[-1]
        words.extend(w.strip(".,[]|#!").lower() for w in body.split()[10:13])
    picked = [" ".join(words[i : i + 2]) for i in range(0, len(words), 3)]
    return [*QUERIES, *picked]


@pytest.mark.parametrize("mode", ["realistic", "small-vocab"])
async def test_the_database_stores_each_passage_once_and_stays_near_the_vaults_size(
    tmp_path: Path, mode: str
) -> None:
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    generate_vault(vault, 300, seed=3, mode=mode)
    await _sync(vault, db)
    vault_bytes = _vault_bytes(vault)
    tables = _table_bytes(db)
    # Passage texts overlap (a window shares lines with the next) and were stored in full on every passage:
    # 1.2x the vault's bytes before migration 9. Packed per note they take about half the vault.
    assert tables["note_passages"] + tables["note_passages_node"] <= 0.6 * vault_bytes
    assert "chunks_fts_content" not in tables  # the passage index holds no copy of the text
    # The whole file: 3.9-4.3x the vault before (issue 15). What is left is the two positional indexes and
    # the graph (see the report in bench/scale.py); this bound fails if any text is stored twice again (the
    # passages' texts alone are about half the vault). Measured 3.47-3.50x on small-vocab since each note's date
    # is stored and indexed (`nodes.note_day`, migration 13: ~0.5%), a page or two apart from run to run.
    assert db.stat().st_size <= 3.6 * vault_bytes


async def test_stored_passages_are_the_notes_passages(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    paths = generate_vault(vault, 20, seed=5, mode="small-vocab")
    await _sync(vault, db)
    async with open_runtime(_settings(vault, db)) as rt:
        for path in paths[:5]:
            rel = path.relative_to(vault).as_posix()
            note = parse_note(rel, path.read_bytes(), folder_labels={}, canonical_label=lambda _: None)
            expected = [c.text for c in chunk_body(note.body)]
            node = await rt.store.read(
                lambda c, p: c.execute("select id from nodes where path = ?", (p,)).fetchone()[0], rel
            )
            stored = await rt.store.read(search_sql.passages_of, [node])
            assert [text for _, _, text in stored] == expected
            ids = [chunk_id for chunk_id, _, _ in stored]
            assert await rt.store.read(search_sql.passage_texts, ids) == dict(zip(ids, expected, strict=True))


async def test_an_edited_passage_leaves_the_index_and_its_new_text_enters_it(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    paths = generate_vault(vault, 10, seed=1, mode="small-vocab")
    await _sync(vault, db)
    path = paths[3]
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\nA line about quixotic xylophones.\n", encoding="utf-8")
    await _sync(vault, db)
    async with open_runtime(_settings(vault, db)) as rt:
        hits = await rt.store.read(search_sql.passage_hits, '"xylophones"', 5, NodeFilter())
        assert len(hits) == 1
        path.write_text(text, encoding="utf-8")
        await rt.require_sync().sync_vault()
        assert await rt.store.read(search_sql.passage_hits, '"xylophones"', 5, NodeFilter()) == []
        assert await rt.store.read(_integrity) == "ok"


def _integrity(conn: Any) -> str:
    conn.execute("insert into chunks_fts (chunks_fts, rank) values ('integrity-check', 1)")
    return "ok"


async def test_edits_leave_bm25_as_a_fresh_index_of_the_same_notes_would_give(tmp_path: Path) -> None:
    # A passage, and a note's whole-note row, leave their index with their words, so row counts and lengths stay
    # exact however often notes change (a `contentless_delete` index keeps counting what was deleted, and its
    # scores drift with every edit: the whole-note index did until migration 10).
    vault, edited, fresh = tmp_path / "vault", tmp_path / "edited.db", tmp_path / "fresh.db"
    paths = generate_vault(vault, 30, seed=6, mode="small-vocab")
    await _sync(vault, edited)
    for round_ in range(3):
        for path in paths[:10]:
            text = path.read_text(encoding="utf-8")
            body = text.index("\n---\n", 4) + 5  # edit the body (its first passage), not the frontmatter
            edited_body = text[body:].replace(". ", f". Round {round_} words. ", 1)
            path.write_text(text[:body] + edited_body, encoding="utf-8")
        await _sync(vault, edited)
    await _sync(vault, fresh)
    queries = [q for q in _queries(vault) if q.strip()]

    async def scores(db: Path) -> tuple[list[list[tuple[str, int, float]]], list[list[tuple[str, float]]]]:
        async with open_runtime(_settings(vault, db)) as rt:
            found, notes = [], []
            paths = await rt.store.read(_paths)
            for query in queries:
                match = " OR ".join(f'"{w}"' for w in query.split())
                hits = await rt.store.read(search_sql.passage_hits, match, 50, NodeFilter())
                found.append([(paths[h.node_id], h.ordinal, round(h.score, 9)) for h in hits])
                rows = await rt.store.read(search_sql.note_hits, match, 30, NodeFilter())
                notes.append(sorted((paths[n], round(score, 9)) for n, score in rows))
            return found, notes

    (after_edits, notes_edited), (rebuilt, notes_rebuilt) = await scores(edited), await scores(fresh)
    assert any(after_edits) and any(notes_edited)
    assert notes_edited == notes_rebuilt
    for one, other in zip(after_edits, rebuilt, strict=True):
        # Equal scores may come in another order (edited passages have newer ids): compare scores, and each
        # passage's score where both lists hold it.
        assert [score for _, _, score in one] == [score for _, _, score in other]
        mine = {(path, ordinal): score for path, ordinal, score in one}
        assert all(mine[(p, o)] == score for p, o, score in other if (p, o) in mine)


async def test_a_note_read_again_unchanged_is_not_counted_twice_by_whole_note_bm25(tmp_path: Path) -> None:
    # Notes whose words did not change (an id written into them, a frontmatter edit) keep their whole-note row:
    # re-indexing them would cost a first sync time for nothing.
    vault, edited, fresh = tmp_path / "vault", tmp_path / "edited.db", tmp_path / "fresh.db"
    paths = generate_vault(vault, 30, seed=7, mode="small-vocab")
    await _sync(vault, edited)
    for round_ in range(3):
        for path in paths[:10]:
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("\n", f"\nreviewed: {round_}\n", 1), encoding="utf-8")
        await _sync(vault, edited)
    await _sync(vault, fresh)
    queries = [q for q in _queries(vault) if q.strip()]

    async def scores(db: Path) -> list[list[float]]:
        async with open_runtime(_settings(vault, db)) as rt:
            found = []
            for query in queries:
                match = " OR ".join(f'"{w}"' for w in query.split())
                found.append(
                    [
                        round(s, 9)
                        for _, s in await rt.store.read(search_sql.note_hits, match, 30, NodeFilter())
                    ]
                )
            return found

    after_edits, rebuilt = await scores(edited), await scores(fresh)
    assert any(after_edits) and after_edits == rebuilt


async def test_a_purged_note_leaves_nothing_in_the_passage_index(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    paths = generate_vault(vault, 10, seed=8, mode="small-vocab")
    path = paths[2]
    path.write_text(path.read_text(encoding="utf-8") + "\nOnly here: zanzibarish.\n", encoding="utf-8")
    await _sync(vault, db)
    async with open_runtime(_settings(vault, db)) as rt:
        node = await rt.store.read(
            lambda c, p: c.execute("select id from nodes where path = ?", (p,)).fetchone()[0],
            path.relative_to(vault).as_posix(),
        )
        await rt.store.write(forget_sql.purge_node, node, None, "2026-11-25T12:00:00Z")
        assert await rt.store.read(_fts_rows, '"zanzibarish"') == 0
        assert (
            await rt.store.read(lambda c: c.execute("select count(*) from note_passages").fetchone()[0]) > 0
        )
        left = await rt.store.read(
            lambda c, n: c.execute("select count(*) from note_passages where node_id = ?", (n,)).fetchone()[
                0
            ],
            node,
        )
        assert left == 0
        assert await rt.store.read(_integrity) == "ok"


def _paths(conn: Any) -> dict[str, str]:
    return dict(conn.execute("select id, path from nodes where path is not null").fetchall())


def _fts_rows(conn: Any, match: str) -> int:
    return conn.execute("select count(*) from chunks_fts where chunks_fts match ?", (match,)).fetchone()[0]


# --- upgrading a database made before migration 9 ----------------------------------------------------------


def _raw_body(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split("\n---\n", 1)[1] if text.startswith("---\n") else text


def _make_m007_copy(vault: Path, fresh: Path, old: Path) -> None:
    """A database as the code before migration 9 left it, with the same graph and passages as `fresh`:
    the migrations up to 7 run on an empty file, the graph is copied over, each passage's text goes back into
    `chunks.text` with its external-content index rebuilt, and the whole-note rows are indexed from the notes'
    raw bodies, as that code did."""
    conn = sqlean.connect(str(old), isolation_level=None)
    passages_sql.register_functions(conn)
    original = migrations.MIGRATIONS
    migrations.MIGRATIONS = tuple(m for m in original if m[0] <= 7)
    try:
        migrations.apply_migrations(conn)
    finally:
        migrations.MIGRATIONS = original
    conn.execute("attach database ? as fresh", (str(fresh),))
    conn.execute("begin")
    for table in ("nodes", "node_keys", "edges", "note_links", "files", "note_docs", "insights"):
        columns = ", ".join(r[1] for r in conn.execute(f"pragma main.table_info({table})"))
        conn.execute(f"insert into main.{table} ({columns}) select {columns} from fresh.{table}")
    rows = conn.execute(
        "select id, node_id, ordinal, title, heading from fresh.chunks order by id"
    ).fetchall()
    parts: dict[str, list[bytes]] = {}
    for node_id, piece in conn.execute(
        "select node_id, packed from fresh.note_passages order by node_id, part"
    ):
        parts.setdefault(node_id, []).append(piece)
    packed = {node_id: passages_sql.unpack(b"".join(pieces)) for node_id, pieces in parts.items()}
    conn.executemany(
        "insert into main.chunks (id, node_id, ordinal, title, heading, text) values (?, ?, ?, ?, ?, ?)",
        [(r[0], r[1], r[2], r[3], r[4], packed[r[1]][r[2]]) for r in rows],
    )
    conn.execute("insert into main.chunks_fts (chunks_fts) values ('rebuild')")
    conn.executemany(
        "insert into main.notes_fts (rowid, name, body) values (?, ?, ?)",
        [
            (doc, name, _raw_body(vault / path))
            for doc, name, path in conn.execute(
                "select d.doc, n.name, n.path from main.note_docs d join main.nodes n on n.id = d.node_id"
            ).fetchall()
        ],
    )
    conn.execute("delete from main.sqlite_sequence")
    conn.execute("insert into main.sqlite_sequence select * from fresh.sqlite_sequence")
    # As if the newest passages had been deleted since: ids up to here were given out and must stay unused.
    conn.execute("update main.sqlite_sequence set seq = seq + 1000 where name = 'chunks'")
    conn.execute("commit")
    conn.execute("detach database fresh")
    conn.close()


async def _answers(vault: Path, db: Path, queries: list[str]) -> list[Any]:
    found: list[Any] = []
    async with open_runtime(_settings(vault, db), take_lease=True) as rt:
        await rt.require_sync().sync_vault()  # the catch-up a server runs at start (nothing, when in step)
        for query in queries:
            match = " OR ".join(f'"{w}"' for w in query.split())
            found.append(await rt.store.read(search_sql.passage_hits, match, 40, NodeFilter()))
            found.append(await rt.store.read(search_sql.note_hits, match, 40, NodeFilter()))
            response = await search(rt, query)
            found.append([(h.id, round(h.score, 6), h.snippet) for h in response.results])
        node_ids = await rt.store.read(
            lambda c: [r[0] for r in c.execute("select id from nodes order by id")]
        )
        found.append(await rt.store.read(search_sql.passages_of, node_ids[:30]))
    return found


async def test_a_database_made_before_migration_9_upgrades_in_place_and_searches_the_same(
    tmp_path: Path,
) -> None:
    vault, fresh, old = tmp_path / "vault", tmp_path / "fresh.db", tmp_path / "old.db"
    generate_vault(vault, 80, seed=2, mode="small-vocab")
    await _sync(vault, fresh)
    _make_m007_copy(vault, fresh, old)
    conn = sqlean.connect(str(old))
    assert conn.execute("select max(number) from schema_migrations").fetchone()[0] == 7
    assert "text" in [r[1] for r in conn.execute("pragma table_info(chunks)")]
    conn.close()

    queries = _queries(vault)
    assert await _answers(vault, old, queries) == await _answers(vault, fresh, queries)

    conn = sqlean.connect(str(old))
    assert conn.execute("select max(number) from schema_migrations").fetchone()[0] >= 9
    assert "text" not in [r[1] for r in conn.execute("pragma table_info(chunks)")]
    # Chunk ids are never reused (vectors are keyed by them): the highest one ever given survives the copy.
    sequence = "select seq from sqlite_sequence where name = 'chunks'"
    assert (
        conn.execute(sequence).fetchone()[0]
        == sqlean.connect(str(fresh)).execute(sequence).fetchone()[0] + 1000
    )
    assert (
        conn.execute("pragma freelist_count").fetchone()[0]
        < 0.25 * conn.execute("pragma page_count").fetchone()[0]
    )
    conn.close()
    # The upgraded file keeps the index in step with edits like a new one.
    path = sorted(vault.rglob("*.md"))[7]
    path.write_text(path.read_text(encoding="utf-8") + "\nNotes on quixotic xylophones.\n", encoding="utf-8")
    await _sync(vault, old)
    async with open_runtime(_settings(vault, old)) as rt:
        assert len(await rt.store.read(search_sql.passage_hits, '"xylophones"', 5, NodeFilter())) == 1
        assert await rt.store.read(_integrity) == "ok"


# --- memory that stays flat, and a warm first search -------------------------------------------------------


def _cache_and_mmap(conn: Any) -> tuple[int, int]:
    return conn.execute("pragma cache_size").fetchone()[0], conn.execute("pragma mmap_size").fetchone()[0]


async def test_page_caches_are_sized_to_the_file_and_mmap_waits_for_vectors(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    generate_vault(vault, 10, seed=4, mode="small-vocab")
    await _sync(vault, db)
    floor = database.CACHE_MIN_KIB
    async with open_runtime(_settings(vault, db)) as rt:
        assert await rt.store.read(_cache_and_mmap) == (-floor, 0)  # a small file: the floor
        assert rt.store.db.aside(_cache_and_mmap).result() == (-floor, 0)
        assert await rt.store.read(lambda c: c.execute("pragma temp_store").fetchone()[0]) == 1  # file
        await rt.store.write(vectors_sql.ensure_vector_table, "fake:fake-hash", 4)
        cache, mapped = rt.store.db.aside(_cache_and_mmap).result()
        assert cache == -floor and mapped > 0  # vec0 scans read through mmap


def test_a_connections_cache_holds_a_share_of_the_file_between_a_floor_and_a_cap() -> None:
    mib = 2**20
    assert database.cache_kib(0) == database.CACHE_MIN_KIB
    assert database.cache_kib(27 * mib) == database.CACHE_MIN_KIB  # 1,000 notes
    assert database.cache_kib(266 * mib) == 266 * 1024 // database.CACHE_SHARE  # 10,000 notes: ~2 MiB
    assert database.cache_kib(2700 * mib) == database.CACHE_MAX_KIB  # 100,000 notes


async def test_a_big_file_gets_a_bigger_cache_on_both_connections(tmp_path: Path) -> None:
    db = tmp_path / "graph.db"
    conn, _ = database.connect_sync(db, load_vec=False)
    conn.execute("create table filler (x blob)")
    conn.executemany("insert into filler values (zeroblob(4000))", [()] * 50_000)  # ~200 MiB of pages
    conn.close()
    want = -database.cache_kib(db.stat().st_size)
    assert want < -database.CACHE_MIN_KIB
    conn, _ = database.connect_sync(db, load_vec=False)
    aside = database.connect_aside(db, vec=False)
    try:
        assert _cache_and_mmap(conn)[0] == want and _cache_and_mmap(aside)[0] == want
    finally:
        conn.close()
        aside.close()


def _sqlite_memory_used() -> int:
    """Bytes SQLite holds right now in this process (sqlite3_memory_used of the library sqlean bundles)."""
    import ctypes

    import sqlean._sqlite3 as bundled  # type: ignore[import-not-found]

    used = ctypes.CDLL(bundled.__file__).sqlite3_memory_used
    used.restype = ctypes.c_int64
    return used()


def _held_after_staging(conn: Any) -> int:
    """Stage ~20 MiB in a temp table as a sync stages a batch's texts, empty it, and return what SQLite holds."""
    conn.execute("create temp table stage (text text)")
    conn.executemany("insert into temp.stage values (?)", [("x" * 2000,)] * 10_000)
    conn.execute("delete from temp.stage")
    return _sqlite_memory_used()


def test_staged_temp_tables_leave_memory_once_past_the_temp_cache(tmp_path: Path) -> None:
    conn, _ = database.connect_sync(tmp_path / "graph.db", load_vec=False)
    try:
        before = _sqlite_memory_used()
        # With `temp_store = memory` the ~20 MiB staged would all be held until the connection closes.
        assert _held_after_staging(conn) - before < 4 * 2**20
    finally:
        conn.close()


async def test_the_server_warms_search_up_after_start(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    generate_vault(vault, 10, seed=4, mode="small-vocab")
    fts_query._token_pattern.cache_clear()  # what the first search built (~40 ms), cold again
    settings = Settings(vault=vault, db_path=db, embedding_provider="none", watch=False)
    async with Client(create_server(settings)):
        deadline = time.monotonic() + 20
        while fts_query._token_pattern.cache_info().currsize == 0:  # built by the warm-up, not by a search
            assert time.monotonic() < deadline, "no warm-up search ran after start-up"
            await asyncio.sleep(0.02)


def test_the_console_script_module_imports_nothing_a_reader_process_would_carry() -> None:
    """Reader processes are spawned and re-import the console script's module: it must stay tiny."""
    import subprocess
    import sys
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["engrama-vault"] == "server.entry:main"
    code = "import sys, server.entry; print(sorted(m for m in ('server.cli', 'mcp', 'pydantic') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- the first sync's process tree --------------------------------------------------------------------------

WORKER_MODULES = "sorted(m for m in __import__('sys').modules if m.split('.')[0] in {names!r})"
NOT_IN_A_READER = ("asyncio", "multiprocessing", "concurrent", "ssl", "mcp", "pydantic", "server", "sqlean")


async def test_a_reader_process_imports_only_what_reading_a_note_needs(tmp_path: Path) -> None:
    from profiles.loader import load_profile
    from server.runtime import note_rules
    from vault_sync.reader_process import ReaderProcess, pickled_rules

    vault = tmp_path / "vault"
    generate_vault(vault, 20, seed=2, mode="realistic")
    paths = [p.relative_to(vault).as_posix() for p in sorted(vault.rglob("*.md"))]
    rules = pickled_rules(note_rules(load_profile("base", ["teaching"])))
    assert rules is not None
    async with ReaderProcess(vault, rules, writable=False, workers=1) as process:
        reads = await process.read_batch(paths, {}, dry_run=True)
        assert [r.path for r in reads] == paths and all(r.note is not None for r in reads)
        # A multiprocessing worker carried asyncio (and ssl), its queues, and the parent's main module; and the
        # SDK or the server would be tens of MiB per reader.
        assert await process.run(eval, WORKER_MODULES.format(names=NOT_IN_A_READER)) == []


def test_opening_the_database_imports_neither_numpy_nor_the_sqlite_vec_package(tmp_path: Path) -> None:
    """sqlite_vec's `__init__` imports numpy when it is installed (the [local] extra): ~12 MB in every process
    that opens the database, the server and the sync alike, for nothing when no model is configured."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from server.store import database; "
        f"conn, vec = database.connect_sync(Path({str(tmp_path / 'graph.db')!r})); "
        "assert vec.ok, vec.reason; "
        "print(sorted(m for m in ('numpy', 'sqlite_vec') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_server_imports_no_http_client_or_numpy_until_a_model_needs_them() -> None:
    """A server without an embedding endpoint or a local model never uses httpx (with click and pygments,
    ~1.6 MB) or numpy (~12 MB): importing the whole server must not load them."""
    import subprocess
    import sys

    code = (
        "import sys, server.app; print(sorted(m for m in ('httpx', 'numpy', 'pygments') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _cache(conn: Any) -> int:
    return -conn.execute("pragma cache_size").fetchone()[0]


async def test_a_burst_of_long_writes_gets_a_bigger_cache_until_the_writes_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = await database.Database.open(tmp_path / "graph.db", load_vec=False)
    try:
        sized = await db.run(_cache)
        monkeypatch.setattr(database, "WRITE_BURST_S", 3600.0)  # an edit of a note: no burst
        await db.transaction(lambda c: c.execute("create table t (x)"))
        assert await db.run(_cache) == sized
        monkeypatch.setattr(database, "WRITE_BURST_S", 0.0)  # a first sync's batch: a burst starts
        monkeypatch.setattr(database, "BURST_IDLE_S", 3600.0)
        await db.transaction(lambda c: c.execute("insert into t values (1)"))
        assert await db.run(_cache) == database.WRITE_CACHE_KIB > sized
        monkeypatch.setattr(database, "BURST_IDLE_S", 0.0)  # the writes have stopped
        assert await db.run(_cache) == sized
    finally:
        await db.close()
