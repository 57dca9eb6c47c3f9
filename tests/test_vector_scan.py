"""The two-stage vector scan: signs first, exact int8 distances for the best candidates (issue 13)."""

from __future__ import annotations

import random
from array import array
from pathlib import Path
from typing import Any

import pytest

from server.embeddings import FakeEmbedder
from server.embeddings.worker import embed_pending
from server.runtime import Runtime, open_runtime
from server.settings import Settings
from server.store import vectors_sql
from server.store.database import connect_sync

np = pytest.importorskip("numpy")  # the two-stage scan needs numpy (the local extra installs it)

DIMS = 384


def clustered(count: int, clusters: int, seed: int) -> tuple[Any, Any]:
    """Unit vectors in `clusters` groups (cosine to their centre ~0.73), and the centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIMS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    members = centres[np.arange(count) % clusters] + rng.normal(0, 0.05, size=(count, DIMS))
    return members / np.linalg.norm(members, axis=1, keepdims=True), centres


def store(conn: Any, vectors: Any, batch: int = 500) -> None:
    conn.execute("begin")
    vectors_sql.ensure_vector_table(conn, "test:clusters", DIMS)
    entries = [(i + 1, vectors_sql.vector_blob(v.tolist())) for i, v in enumerate(vectors)]
    for start in range(0, len(entries), batch):
        vectors_sql.add_vectors(conn, entries[start : start + batch])
    conn.execute("commit")


def same_nearest(found: list[tuple[int, float]], exact: list[tuple[int, float]]) -> bool:
    """The same passages at the same distances, nearest first (passages at equal distances in any order)."""
    distances = [d for _, d in found]
    return distances == sorted(distances) and {i: round(d, 3) for i, d in found} == {
        i: round(d, 3) for i, d in exact
    }


def signed_ids(conn: Any) -> list[int]:
    ids: list[int] = []
    for (blob,) in conn.execute(f"select ids from {vectors_sql.SIGNS_TABLE}"):
        part = array("q")
        part.frombytes(blob)
        ids += part
    return sorted(ids)


def test_the_two_stage_scan_returns_exactly_the_int8_scans_nearest(tmp_path: Path) -> None:
    conn, vec = connect_sync(tmp_path / "graph.db")
    assert vec.ok, vec.reason
    vectors, centres = clustered(3000, 60, seed=1)
    store(conn, vectors)
    k = 40  # 640 exact distances out of 3,000: the first stages leave most passages out
    assert vectors_sql.RESCORE_FACTOR * k < len(vectors)
    for centre in centres[:10]:
        blob = vectors_sql.vector_blob(centre.tolist())
        two_stage = vectors_sql._two_stage(conn, blob, k)
        exact = vectors_sql.int8_scan(conn, blob, k)
        assert two_stage is not None and same_nearest(two_stage, exact)
        assert vectors_sql.nearest_vectors(conn, centre.tolist(), k) == two_stage
    conn.close()


def test_the_finer_estimate_is_the_querys_sum_over_the_set_sign_bits() -> None:
    rng = np.random.default_rng(5)
    signs = rng.integers(0, 2, size=(50, 20)).astype(bool)  # 20 dimensions: the last byte is padded
    query = rng.integers(-127, 128, size=20).astype(np.int8)
    packed = np.packbits(signs, axis=1, bitorder="little")
    assert [vectors_sql.sign_bits(row.astype(np.int8).tobytes()) for row in signs] == [
        row.tobytes() for row in packed
    ]
    expected = (signs * query.astype(np.float32)).sum(axis=1)
    assert vectors_sql._signed_dot(packed, query) == pytest.approx(expected)


def test_small_batches_are_merged_into_full_rows_of_signs(tmp_path: Path) -> None:
    conn, _ = connect_sync(tmp_path / "graph.db")
    vectors, _ = clustered(1500, 10, seed=2)
    store(conn, vectors, batch=4)  # the local model's backfill stores 4 passages at a time
    rows = conn.execute(f"select n from {vectors_sql.SIGNS_TABLE}").fetchall()
    small = [n for (n,) in rows if n < vectors_sql.SIGN_ROW]
    assert len(small) <= vectors_sql.MAX_SMALL_ROWS + 1
    assert signed_ids(conn) == list(range(1, 1501))  # every passage once
    conn.close()


def test_a_store_without_signs_is_scanned_whole_until_they_are_filled_once(tmp_path: Path) -> None:
    conn, _ = connect_sync(tmp_path / "graph.db")
    vectors, centres = clustered(2000, 40, seed=3)
    store(conn, vectors)

    def as_before_signs() -> None:  # what the version before the signs left: the int8 table alone
        conn.execute(f"drop table {vectors_sql.SIGNS_TABLE}")
        conn.execute("delete from meta where key = ?", (vectors_sql.META_SIGNS,))

    as_before_signs()
    query = centres[0].tolist()
    exact = vectors_sql.int8_scan(conn, vectors_sql.vector_blob(query), 30)
    assert vectors_sql.nearest_vectors(conn, query, 30) == exact  # still answers, by the int8 scan
    conn.execute("begin")
    assert vectors_sql.ensure_vector_table(conn, "test:clusters", DIMS) is False  # no vector is re-embedded
    conn.execute("commit")
    assert signed_ids(conn) == list(range(1, 2001))
    two_stage = vectors_sql._two_stage(conn, vectors_sql.vector_blob(query), 30)
    assert two_stage is not None and same_nearest(two_stage, exact)
    conn.close()


async def test_signs_follow_the_vectors_of_deleted_and_edited_passages(vault: Path, db_path: Path) -> None:
    words = "sun water basil soil seed frost stake prune compost mulch".split()
    rng = random.Random(4)
    for n in range(6):
        lines = [" ".join(rng.choices(words, k=30)) for _ in range(12)]
        (vault / f"Note {n}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False, embedding_provider="fake")
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        await embed_pending(rt, FakeEmbedder(16), batch_size=4)
        assert await stored_and_signed(rt) == (await chunk_ids(rt),) * 2
        (vault / "Note 0.md").write_text("Now one short line.\n", encoding="utf-8")
        (vault / "Note 1.md").unlink()
        await rt.require_sync().sync_vault()
        await embed_pending(rt, FakeEmbedder(16), batch_size=4)
        vectors, signs = await stored_and_signed(rt)
        assert vectors == signs == await chunk_ids(rt)


async def chunk_ids(rt: Runtime) -> list[int]:
    return await rt.store.read(lambda c: sorted(r[0] for r in c.execute("select id from chunks")))


async def stored_and_signed(rt: Runtime) -> tuple[list[int], list[int]]:
    def read(conn: Any) -> tuple[list[int], list[int]]:
        vectors = sorted(r[0] for r in conn.execute(f"select rowid from {vectors_sql.VEC_TABLE}"))
        return vectors, signed_ids(conn)

    return await rt.store.read(read)
