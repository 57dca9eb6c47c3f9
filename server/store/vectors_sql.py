"""SQL of passage vectors: one sqlite-vec `vec0` table keyed by chunk id (synchronous; run on the DB thread).

The table is created at run time, for the size the configured model gives, because a migration cannot know it.
Which model, size and storage filled it is recorded in `meta`; a different one drops the table and marks every
passage as waiting again, so vectors of two models are never mixed (their distances mean nothing together).

Vectors are stored as int8: each component of the unit vector times 127, rounded (no component of a unit
vector exceeds 1, so nothing is ever clipped, whatever the model). Chosen with figures (bench/embedding_bench.py
storage, 50,000 MiniLM vectors, k=100, 2 cores): int8 scans in ~22 ms of CPU against ~25 ms for float32, keeps
~97% of the exact float top 100 (on a deliberately crowded corpus; a reconstructed vector's cosine to the
original is 0.999), and takes 413 bytes per vector in the file against 1,571 (a 10,000-note vault: ~21 MB
instead of ~79 MB). Sign bits with int8 rescoring were no faster here and kept 89%. The query is quantized the
same way, and L2 distance between unit vectors ranks exactly like cosine similarity.

Only a connection with sqlite-vec loaded can touch a vec0 table. Deletes of passages are therefore recorded in
the plain table `vec_orphans` by a trigger (migration m003) and applied here, at the next embedding batch.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from server.store import passages_sql

VEC_TABLE = "chunk_vectors"
MMAP_BYTES = 1 << 30  # an upper bound: SQLite maps at most the file's size
META_MODEL = "vectors_model"
META_DIMS = "vectors_dimensions"
META_STORAGE = "vectors_storage"
STORAGE = "int8"  # what this version writes; a table of another storage (float32 before it) is rebuilt
INT8_SCALE = 127.0


@dataclass(frozen=True)
class PendingChunk:
    """A passage waiting for its vector, with the text the embedder sees (title and heading included)."""

    id: int
    title: str
    heading: str
    text: str

    def embedding_text(self) -> str:
        # The title line carries the note's name and date: on LoCoMo it helped every retrieval method.
        head = f"{self.title} > {self.heading}" if self.heading else self.title
        return f"{head}\n{self.text}"


def vector_blob(vector: Sequence[float]) -> bytes:
    """`vector` scaled to unit length and quantized to the int8 blob the table stores (zero stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    scale = INT8_SCALE / norm if norm > 0 else 0.0
    return array("b", (round(x * scale) for x in vector)).tobytes()


def blob_values(blob: bytes) -> array[int]:
    """The int8 components of a stored blob (divide by INT8_SCALE for the unit vector)."""
    values = array("b")
    values.frombytes(blob)
    return values


def _meta(conn: Any, key: str) -> str | None:
    row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def vector_space(conn: Any) -> tuple[str, int] | None:
    """(model, dimensions) of the stored vectors, or None when no vector table of this version exists yet."""
    model, dims = _meta(conn, META_MODEL), _meta(conn, META_DIMS)
    if model is None or dims is None or _meta(conn, META_STORAGE) != STORAGE:
        return None
    if conn.execute("select 1 from sqlite_master where name = ?", (VEC_TABLE,)).fetchone() is None:
        return None
    return model, int(dims)


def ensure_vector_table(conn: Any, model: str, dimensions: int) -> bool:
    """Make the vec0 table hold `model` vectors of `dimensions`; True when it was (re)created.

    On a change of model, size or storage the old vectors are dropped and every passage waits for a new one."""
    if dimensions < 1:
        raise ValueError(f"vector size must be positive, not {dimensions}")
    if vector_space(conn) == (model, dimensions):
        return False
    conn.execute(f"drop table if exists {VEC_TABLE}")
    conn.execute(f"create virtual table {VEC_TABLE} using vec0(embedding int8[{int(dimensions)}])")
    conn.execute("update chunks set embedded_model = null where embedded_model is not null")
    conn.execute("delete from vec_orphans")
    for key, value in ((META_MODEL, model), (META_DIMS, str(dimensions)), (META_STORAGE, STORAGE)):
        conn.execute(
            "insert into meta (key, value) values (?, ?) on conflict(key) do update set value = excluded.value",
            (key, value),
        )
    return True


def map_into_memory(conn: Any) -> None:
    """Let SQLite read the file through mmap. vec0 is brute force: every query reads every vector (130,000
    passages x 384 int8 = 50 MB on a 10,000-note generated vault, ~56 ms of CPU per scan); through mmap that
    costs ~40% less than copying them through the page cache (measured in bench/search_bench.py, docs/search.md)."""
    conn.execute(f"pragma mmap_size = {MMAP_BYTES}")


def backlog(conn: Any) -> int:
    """How many passages wait for a vector (served by the partial index chunks_unembedded)."""
    return conn.execute("select count(*) from chunks where embedded_model is null").fetchone()[0]


def pending_chunks(conn: Any, limit: int) -> list[PendingChunk]:
    rows = conn.execute(
        "select id, title, heading from chunks where embedded_model is null order by id limit ?",
        (limit,),
    ).fetchall()
    texts = passages_sql.chunk_texts(conn, [r[0] for r in rows])  # stored once per note (migration 9)
    return [PendingChunk(r[0], r[1], r[2], texts[r[0]]) for r in rows if r[0] in texts]


def drop_orphans(conn: Any) -> int:
    """Delete the vectors of passages that were deleted or edited since the last batch."""
    orphans = [r[0] for r in conn.execute("select chunk_id from vec_orphans")]
    if orphans and vector_space(conn) is not None:
        conn.executemany(f"delete from {VEC_TABLE} where rowid = ?", [(i,) for i in orphans])
    conn.execute("delete from vec_orphans")
    return len(orphans)


def store_vectors(
    conn: Any, model: str, chunks: Sequence[PendingChunk], vectors: Sequence[Sequence[float]]
) -> int:
    """Store the vectors of passages that still hold the text that was embedded; returns how many.

    The embedder ran outside any transaction, so a passage may have been deleted or edited meanwhile: its
    vector is then dropped (chunk ids are never reused, so a stale id can only be absent, never someone else's).
    """
    drop_orphans(conn)
    stored = 0
    texts = passages_sql.chunk_texts(conn, [chunk.id for chunk in chunks])  # stored once per note (m009)
    for chunk, vector in zip(chunks, vectors, strict=True):
        if texts.get(chunk.id) != chunk.text:
            continue
        marked = conn.execute(
            "update chunks set embedded_model = ? where id = ? and embedded_model is null "
            "and title = ? and heading = ?",
            (model, chunk.id, chunk.title, chunk.heading),
        ).rowcount
        if marked:
            conn.execute(f"delete from {VEC_TABLE} where rowid = ?", (chunk.id,))
            conn.execute(
                f"insert into {VEC_TABLE} (rowid, embedding) values (?, vec_int8(?))",
                (chunk.id, vector_blob(vector)),
            )
            stored += 1
    return stored


def nearest_chunks(
    conn: Any, query: Sequence[float], k: int, where_sql: str, params: Sequence[Any]
) -> list[tuple[int, str, float]]:
    """The `k` passages nearest to `query` whose node passes `where_sql` (over nodes aliased n):
    (chunk_id, node_id, cosine similarity). vec0 is brute force (FACTS.md), so k costs nothing extra."""
    rows = conn.execute(
        f"select c.id, c.node_id, v.distance from "
        f"(select rowid, distance from {VEC_TABLE} where embedding match vec_int8(?) and k = ?) v "
        f"join chunks c on c.id = v.rowid join nodes n on n.id = c.node_id where {where_sql}",
        [vector_blob(query), k, *params],
    )
    # For unit vectors |a-b|^2 = 2 - 2 cos(a, b); the distance is in int8 units.
    return [(r[0], r[1], 1.0 - (r[2] / INT8_SCALE) ** 2 / 2.0) for r in rows]


def stored_vectors(conn: Any, model: str, chunk_ids: Sequence[int]) -> dict[int, bytes]:
    """The int8 blobs of those passages whose vector of `model` is stored (one rowid lookup each: vec0 scans
    the whole table for `rowid in (...)`)."""
    if vector_space(conn) is None or _meta(conn, META_MODEL) != model:
        return {}
    marks = ",".join("?" * len(chunk_ids))
    ready = [
        r[0]
        for r in conn.execute(
            f"select id from chunks where id in ({marks}) and embedded_model = ?", [*chunk_ids, model]
        )
    ]
    found: dict[int, bytes] = {}
    for chunk_id in ready:
        row = conn.execute(f"select embedding from {VEC_TABLE} where rowid = ?", (chunk_id,)).fetchone()
        if row is not None:
            found[chunk_id] = row[0]
    return found


def unembedded_chunks(conn: Any, chunk_ids: Sequence[int]) -> list[PendingChunk]:
    """Those of `chunk_ids` that wait for a vector, with their texts, in the given order."""
    marks = ",".join("?" * len(chunk_ids))
    rows = conn.execute(
        f"select id, title, heading from chunks where id in ({marks}) and embedded_model is null",
        list(chunk_ids),
    ).fetchall()
    texts = passages_sql.chunk_texts(conn, [r[0] for r in rows])
    waiting = {r[0]: PendingChunk(r[0], r[1], r[2], texts[r[0]]) for r in rows if r[0] in texts}
    return [waiting[i] for i in dict.fromkeys(chunk_ids) if i in waiting]


def progress(conn: Any) -> tuple[int, int]:
    """(passages with a vector, passages waiting for one); both counts read indexes only."""
    total = conn.execute("select count(*) from chunks").fetchone()[0]
    waiting = backlog(conn)
    return total - waiting, waiting
