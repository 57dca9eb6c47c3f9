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

The scan runs in stages (issue 13: at 10,000 notes, ~130,000 passages, the int8 scan alone cost ~56 ms of CPU
per search). Beside each int8 vector the sign of each component is kept (48 bytes for 384 dimensions) in the
plain table `vector_signs`, packed many passages to a row. A search 1. ranks every passage by the Hamming
distance between its signs and the query's (numpy's popcount over the packed bits: ~4 ms at 130,000) and keeps
the best POOL_FACTOR x k; 2. ranks those by the query's own components summed over each passage's set sign
bits (an asymmetric estimate of the dot product: the query keeps its precision, a finer ranking than Hamming
distance), keeping RESCORE_FACTOR x k; 3. computes their exact int8 distances (rowid lookups in vec0) and
returns the k nearest: exactly what the int8 scan returns whenever its k nearest survive the first two
stages. On a deliberately crowded corpus (bench/model_latency.py recall: LoCoMo's passages and noisy copies of
them, 130,000, k=100) the stages keep 0.93 of the exact float top 100 against 0.94 for the int8 scan (Hamming
alone, then exact distances for 8 x k: 0.78), in a quarter to a third of its time; on real vectors (6,390
LongMemEval passages, 100 questions) they return exactly the int8 scan's top 100, and padded to 130,000 with
noisy copies, 0.953 of the exact top 100 against 0.957. sqlite-vec's own `bit[]`
columns were measured first and do not help: its k-nearest selection costs O(rows x k), so a bit scan keeping
400 candidates costs as much as the int8 scan keeping 100. Without numpy (a plain install talking to a remote
embedder), or while the signs are not complete, the int8 scan runs as before.

Only a connection with sqlite-vec loaded can touch a vec0 table. Deletes of passages are therefore recorded in
the plain table `vec_orphans` by a trigger (migration m003) and applied here, at the next embedding batch.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from server.store import passages_sql
from server.store.nodes_sql import get_meta, set_meta

VEC_TABLE = "chunk_vectors"
MMAP_BYTES = 1 << 30  # an upper bound: SQLite maps at most the file's size
META_MODEL = "vectors_model"
META_DIMS = "vectors_dimensions"
META_STORAGE = "vectors_storage"
STORAGE = "int8"  # what this version writes; a table of another storage (float32 before it) is rebuilt
INT8_SCALE = 127.0
SIGNS_TABLE = "vector_signs"
META_SIGNS = "vectors_signs"  # "complete" once every stored vector has its signs (filled once on upgrade)
# Passages a full row of vector_signs holds (~230 KB; a scan reads 32 rows at 130,000 passages). Fewer, larger
# rows cost the scan fewer steps of Python: beside bm25 on the other thread, a search's scan at 10,000 notes
# took 25-29 ms with rows of 4,096 against 31-36 ms with rows of 1,024 (bench/model_latency.py scale, runs
# alternated on a shared machine).
SIGN_ROW = 4096
MAX_SMALL_ROWS = 32  # rows holding fewer than SIGN_ROW before they are merged (the backfill adds rows of 4)
POOL_FACTOR = 80  # passages kept by Hamming distance per passage wanted, for the finer estimate
RESCORE_FACTOR = 16  # passages whose exact int8 distance is computed per passage wanted


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


def vector_space(conn: Any) -> tuple[str, int] | None:
    """(model, dimensions) of the stored vectors, or None when no vector table of this version exists yet."""
    model, dims = get_meta(conn, META_MODEL), get_meta(conn, META_DIMS)
    if model is None or dims is None or get_meta(conn, META_STORAGE) != STORAGE:
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
        if get_meta(conn, META_SIGNS) != "complete":
            fill_signs(conn)  # vectors stored by a version without signs: once, from the stored vectors
        return False
    conn.execute(f"drop table if exists {VEC_TABLE}")
    conn.execute(f"create virtual table {VEC_TABLE} using vec0(embedding int8[{int(dimensions)}])")
    conn.execute("update chunks set embedded_model = null where embedded_model is not null")
    conn.execute("delete from vec_orphans")
    _create_signs(conn)
    for key, value in (
        (META_MODEL, model),
        (META_DIMS, str(dimensions)),
        (META_STORAGE, STORAGE),
        (META_SIGNS, "complete"),
    ):
        set_meta(conn, key, value)
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
        _remove_signs(conn, orphans)
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
    stored: list[tuple[int, bytes]] = []
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
            stored.append((chunk.id, vector_blob(vector)))
    add_vectors(conn, stored)
    return len(stored)


def add_vectors(conn: Any, entries: Sequence[tuple[int, bytes]]) -> None:
    """Put int8 blobs (`vector_blob`) under these chunk ids, with their signs; the caller has checked the
    passages (store_vectors does)."""
    for chunk_id, blob in entries:
        conn.execute(f"delete from {VEC_TABLE} where rowid = ?", (chunk_id,))
        conn.execute(f"insert into {VEC_TABLE} (rowid, embedding) values (?, vec_int8(?))", (chunk_id, blob))
    _add_signs(conn, entries)


def nearest_chunks(
    conn: Any, query: Sequence[float], k: int, where_sql: str, params: Sequence[Any]
) -> list[tuple[int, str, float]]:
    """The `k` passages nearest to `query`, of those whose node passes `where_sql` (over nodes aliased n),
    nearest first: (chunk_id, node_id, cosine similarity)."""
    nearest = nearest_vectors(conn, query, k)
    if not nearest:
        return []
    marks = ",".join("?" * len(nearest))
    rows = conn.execute(
        f"select c.id, c.node_id from chunks c join nodes n on n.id = c.node_id "
        f"where c.id in ({marks}) and {where_sql}",
        [*(chunk_id for chunk_id, _ in nearest), *params],
    )
    node_of = dict(rows.fetchall())
    # For unit vectors |a-b|^2 = 2 - 2 cos(a, b); the distance is in int8 units.
    return [
        (chunk_id, node_of[chunk_id], 1.0 - (distance / INT8_SCALE) ** 2 / 2.0)
        for chunk_id, distance in nearest
        if chunk_id in node_of
    ]


def nearest_vectors(conn: Any, query: Sequence[float], k: int) -> list[tuple[int, float]]:
    """The `k` stored vectors nearest to `query` by int8 L2 distance: (chunk_id, distance), nearest first.
    In two stages when the signs are complete and numpy is installed (see the module's docstring)."""
    blob = vector_blob(query)
    if get_meta(conn, META_SIGNS) == "complete" and (found := _two_stage(conn, blob, k)) is not None:
        return found
    return int8_scan(conn, blob, k)


def int8_scan(conn: Any, blob: bytes, k: int) -> list[tuple[int, float]]:
    """vec0's brute-force scan of every int8 vector: (chunk_id, distance), nearest first."""
    sql = f"select rowid, distance from {VEC_TABLE} where embedding match vec_int8(?) and k = ?"
    return [(r[0], r[1]) for r in conn.execute(sql, (blob, k))]


def stored_vectors(conn: Any, model: str, chunk_ids: Sequence[int]) -> dict[int, bytes]:
    """The int8 blobs of those passages whose vector of `model` is stored (one rowid lookup each: vec0 scans
    the whole table for `rowid in (...)`)."""
    if vector_space(conn) is None or get_meta(conn, META_MODEL) != model:
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


# --- signs: the first stage of the scan ---------------------------------------------------------------------


def sign_bits(blob: bytes) -> bytes:
    """The packed signs of an int8 vector: bit i (little-endian within each byte) set when component i > 0."""
    bits = 0
    for i, value in enumerate(blob_values(blob)):
        if value > 0:
            bits |= 1 << i
    return bits.to_bytes((len(blob) + 7) // 8, "little")


def _create_signs(conn: Any) -> None:
    conn.execute(f"drop table if exists {SIGNS_TABLE}")
    # One row holds `n` passages: their chunk ids (int64, native order) and their signs, in the same order.
    conn.execute(
        f"create table {SIGNS_TABLE} (id integer primary key, n integer not null, ids blob not null, "
        "signs blob not null)"
    )


def fill_signs(conn: Any) -> int:
    """(Re)build the signs of every stored vector (once, after an upgrade from a version without them)."""
    _create_signs(conn)
    rows = conn.execute(f"select rowid, embedding from {VEC_TABLE}")
    count = 0
    while batch := rows.fetchmany(SIGN_ROW):
        _insert_signs(conn, [(r[0], sign_bits(r[1])) for r in batch])
        count += len(batch)
    set_meta(conn, META_SIGNS, "complete")
    return count


def _insert_signs(conn: Any, entries: Sequence[tuple[int, bytes]]) -> None:
    ids = array("q", (chunk_id for chunk_id, _ in entries)).tobytes()
    conn.execute(
        f"insert into {SIGNS_TABLE} (n, ids, signs) values (?, ?, ?)",
        (len(entries), ids, b"".join(signs for _, signs in entries)),
    )


def _add_signs(conn: Any, stored: Sequence[tuple[int, bytes]]) -> None:
    """Record the signs of vectors just stored: a row of their own, merged with the other small rows into
    full ones once there are MAX_SMALL_ROWS of them (so a backfill in batches of 4 rewrites little)."""
    if not stored or get_meta(conn, META_SIGNS) != "complete":
        return  # signs are not kept (being rebuilt): fill_signs will read these vectors too
    _insert_signs(conn, [(chunk_id, sign_bits(blob)) for chunk_id, blob in stored])
    small = conn.execute(f"select count(*) from {SIGNS_TABLE} where n < ?", (SIGN_ROW,)).fetchone()[0]
    if small > MAX_SMALL_ROWS:
        _rewrite_rows(conn, f"where n < {SIGN_ROW}", set())


def _remove_signs(conn: Any, chunk_ids: Sequence[int]) -> None:
    if conn.execute("select 1 from sqlite_master where name = ?", (SIGNS_TABLE,)).fetchone() is None:
        return
    _rewrite_rows(conn, "", set(chunk_ids))


def _rewrite_rows(conn: Any, where: str, dropped: set[int]) -> None:
    """Rewrite the rows `where` selects without the passages in `dropped`, packed into full rows (when
    `dropped` is given, only the rows holding one of them)."""
    chosen: list[int] = []
    for row_id, ids_blob in conn.execute(f"select id, ids from {SIGNS_TABLE} {where}"):
        if not dropped or not dropped.isdisjoint(_ids(ids_blob)):
            chosen.append(row_id)
    kept: list[tuple[int, bytes]] = []
    for row_id in chosen:
        n, ids_blob, signs = conn.execute(
            f"select n, ids, signs from {SIGNS_TABLE} where id = ?", (row_id,)
        ).fetchone()
        width = len(signs) // n
        kept += [
            (i, signs[j * width : (j + 1) * width]) for j, i in enumerate(_ids(ids_blob)) if i not in dropped
        ]
    conn.executemany(f"delete from {SIGNS_TABLE} where id = ?", [(i,) for i in chosen])
    for start in range(0, len(kept), SIGN_ROW):
        _insert_signs(conn, kept[start : start + SIGN_ROW])


def _ids(blob: bytes) -> array[int]:
    ids = array("q")
    ids.frombytes(blob)
    return ids


def _two_stage(conn: Any, blob: bytes, k: int) -> list[tuple[int, float]] | None:
    """The signs of every stored passage against the query, then exact int8 distances for the best
    candidates (see the module's docstring); None when numpy is not installed (the caller scans int8)."""
    try:
        import numpy as np
    except ImportError:
        return None
    width = (len(blob) + 7) // 8
    query_signs = sign_bits(blob)
    id_parts, sign_parts, distance_parts = [], [], []
    # Row by row (32 rows at 130,000 passages): arrays of one row stay in the CPU's caches and in memory
    # already mapped, where one array of every passage costs page faults on each search.
    for ids_blob, signs_blob in conn.execute(f"select ids, signs from {SIGNS_TABLE}"):
        id_parts.append(np.frombuffer(ids_blob, dtype=np.int64))
        sign_parts.append(np.frombuffer(signs_blob, dtype=np.uint8).reshape(len(id_parts[-1]), width))
        distance_parts.append(_hamming(sign_parts[-1], query_signs))
    if not id_parts:
        return []
    distances = np.concatenate(distance_parts)
    pool = _smallest(distances, POOL_FACTOR * k)  # 1. Hamming distance: coarse and cheap
    starts = np.cumsum([0] + [len(part) for part in id_parts])
    if len(pool) > RESCORE_FACTOR * k:  # 2. the query's own values against the signs: finer
        estimate = _signed_dot(_gather(sign_parts, starts, pool), np.frombuffer(blob, dtype=np.int8))
        pool = np.sort(pool[np.argpartition(-estimate, RESCORE_FACTOR * k)[: RESCORE_FACTOR * k]])
    wanted = _gather(id_parts, starts, pool)
    rows = conn.execute(  # 3. exact: vec0 looks each rowid up (one statement: ~6 ms for 1,600)
        f"select v.rowid, v.embedding from json_each(?) j join {VEC_TABLE} v on v.rowid = j.value",
        (json.dumps(sorted(set(wanted.tolist()))),),  # a passage stored twice has one vector
    ).fetchall()
    if not rows:
        return []
    found = np.array([r[0] for r in rows], dtype=np.int64)
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.int8).reshape(len(rows), -1)
    difference = matrix.astype(np.int32) - np.frombuffer(blob, dtype=np.int8).astype(np.int32)
    squared = np.einsum("ij,ij->i", difference, difference)
    order = np.lexsort((found, squared))[:k]  # nearest first; ties by chunk id
    return [(int(found[i]), math.sqrt(int(squared[i]))) for i in order]


def _hamming(signs: Any, query: bytes) -> Any:
    """Bits differing between each row of `signs` (packed, uint8) and `query`, as int32."""
    import numpy as np

    word = np.uint64 if signs.shape[1] % 8 == 0 else np.uint8  # 384 dimensions: six 64-bit words
    differing = _popcount(signs.view(word) ^ np.frombuffer(query, dtype=word))
    distance = differing[:, 0].astype(np.int32)
    for column in range(1, differing.shape[1]):  # faster than sum(axis=1) over a few columns
        distance += differing[:, column]
    return distance


def _smallest(distances: Any, count: int) -> Any:
    """Indexes (sorted) of the `count` smallest `distances` (small integers), and of those tied with the
    last one; all of them when there are no more. The cut-off comes from a histogram: cheaper than a
    partition."""
    import numpy as np

    if len(distances) <= count:
        return np.arange(len(distances))
    cut = int(np.searchsorted(np.cumsum(np.bincount(distances)), count))
    return np.flatnonzero(distances <= cut)


def _gather(parts: list[Any], starts: Any, positions: Any) -> Any:
    """The rows at `positions` (sorted, over the parts laid end to end) of a list of arrays."""
    import numpy as np

    which = np.searchsorted(starts, positions, side="right") - 1
    bounds = np.searchsorted(which, np.arange(len(parts) + 1))
    return np.concatenate(
        [
            parts[p][positions[bounds[p] : bounds[p + 1]] - starts[p]]
            for p in range(len(parts))
            if bounds[p + 1] > bounds[p]
        ]
    )


def _signed_dot(signs: Any, query: Any) -> Any:
    """For each row of packed `signs` (uint8), the sum of the query's components where the sign bit is
    set: the dot product of the query with the row's +-1 vector, up to a constant (asymmetric: the query
    keeps its precision). One 256-entry table per byte of the row, read once per row and byte."""
    import numpy as np

    width = signs.shape[1]
    padded = np.zeros(width * 8, dtype=np.float32)
    padded[: len(query)] = query
    bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(np.float32)  # (256, 8): byte -> its bits
    tables = bits @ padded.reshape(width, 8).T  # (256, width): each byte value's sum, per byte position
    total = tables[signs[:, 0], 0]
    for column in range(1, width):
        total += tables[signs[:, column], column]
    return total


def _popcount(words: Any) -> Any:
    """Set bits of each element: numpy 2's popcount, or a byte table on numpy 1.x."""
    import numpy as np

    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words)
    as_bytes = words.view(np.uint8).reshape(words.shape[0], -1)
    return _byte_counts()[as_bytes]


@cache
def _byte_counts() -> Any:
    import numpy as np

    return np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
