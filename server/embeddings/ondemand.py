"""Query-time embedding: the vectors a search needs, now, whatever the background backfill has reached.

A note is searchable by full text the moment it is indexed; its passages get vectors later, in the background
(worker.py). A search must not wait for that, nor go without vectors for the very passages it is ranking, so
it asks `passage_vectors` for the passages it holds (say bm25's best): the stored ones come from one read,
the missing ones are embedded at once within a time budget and stored, so the backfill skips them. Query
vectors go through a small LRU cache (`query_vector`): a conversation repeats its searches.

Query-time work goes first: while any runs, the backfill does not start its next batch (priority.py), and the
local model's runs are thread-safe, so a query never queues behind a batch in progress.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from server.embeddings.base import Embedder, EmbeddingUnavailable
from server.embeddings.priority import Priority, priority
from server.embeddings.worker import (
    QUERY_EMBEDDER,
    current_search_status,
    mark_degraded,
    model_key,
    store_batch,
)
from server.runtime import Runtime
from server.store import vectors_sql

if TYPE_CHECKING:
    import numpy as np

QUERY_CACHE = "query_vector_cache"  # rt.state key
QUERY_CACHE_SIZE = 256
MAX_BATCH = 16
# Query-time runs may use every core: the backfill starts no batch meanwhile, and the local model's runs are
# thread-safe, so a batch split in as many parts runs on all of them (the backfill itself keeps to one).
PARALLEL = max(1, os.cpu_count() or 1)


def active_embedder(rt: Runtime) -> Embedder | None:
    """The embedder search may use now: configured, attached by the worker, not degraded, sqlite-vec loaded."""
    embedder = rt.state.get(QUERY_EMBEDDER)
    if not isinstance(embedder, Embedder) or not rt.store.db.vec.ok:
        return None
    return None if current_search_status(rt).get("degraded") else embedder


async def query_vector(rt: Runtime, embedder: Embedder, text: str) -> list[float]:
    """The vector of `text`, from the cache or embedded now (ahead of the backfill); raises
    EmbeddingUnavailable as `embed` does. The caller sets its own time limit."""
    cache = rt.state.get(QUERY_CACHE)
    if not isinstance(cache, OrderedDict):
        cache = rt.state[QUERY_CACHE] = OrderedDict()
    key = (model_key(embedder), text)
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    async with priority(rt).foreground():
        [vector] = await embedder.embed([text])
    cache[key] = vector
    while len(cache) > QUERY_CACHE_SIZE:
        cache.popitem(last=False)
    return vector


async def passage_vectors(
    rt: Runtime, chunk_ids: Sequence[int], *, budget: float | None
) -> dict[int, np.ndarray | list[float]]:
    """Unit vectors of the current model for `chunk_ids`: the stored ones, plus the missing ones embedded now,
    in the given order, until `budget` seconds are spent (None: all of them); each embedded batch is stored at
    once, so the backfill skips it. {} at once when no embedder is up. numpy float32 arrays when numpy is
    installed (always with the `local` extra), else lists of floats. A fresh vector is returned as stored
    (int8, see vectors_sql), so a passage scores the same before and after the backfill reaches it.

    Cost: everything stored is one read (one rowid lookup per id, ~1.5 ms per 100). A missing passage of ~120
    words costs the local MiniLM ~47 ms of one core (~50-100 ms of wall time on a busy 2-core machine); a
    remote endpoint costs a round trip per batch. Each batch takes the passages whose cost, estimated from
    the measured cost per passage and per character, fits in half of the budget left (a single passage: in
    what is left); a passage expected to end past the budget is not started, so the budget is a ceiling, not
    a target. When nothing was measured yet in this process, one passage is embedded first, to measure. The
    batch runs split over every core (PARALLEL). The vectors are stored in one write at the end. Measured with
    search's 0.4 s budget for its 30 best passages (bench/model_latency.py, a shared 2-core machine at load
    ~3): at 10,000 notes with half of the passages waiting and the worker backfilling, search median 435 ms,
    p95 677 ms; LongMemEval's first searches on fresh vaults, median 397 ms, the re-scoring's p95 410 ms for a
    question searched once (an order question searches each event too, each with its own budget).
    """
    embedder = active_embedder(rt)
    ids = list(dict.fromkeys(chunk_ids))
    if embedder is None or not ids:
        return {}
    key = model_key(embedder)
    found: dict[int, Any] = {
        i: _unit(blob) for i, blob in (await rt.store.read(vectors_sql.stored_vectors, key, ids)).items()
    }
    missing = [i for i in ids if i not in found]
    if missing and (budget is None or budget > 0):
        found.update(await _embed_now(rt, embedder, missing, budget))
    return {i: found[i] for i in ids if i in found}


async def _embed_now(
    rt: Runtime, embedder: Embedder, missing: list[int], budget: float | None
) -> dict[int, Any]:
    deadline = None if budget is None else time.monotonic() + budget
    waiting = await rt.store.read(vectors_sql.unembedded_chunks, missing)
    gate = priority(rt)
    embedded: list[tuple[vectors_sql.PendingChunk, Any]] = []
    async with gate.foreground():
        while waiting:
            left = None if deadline is None else deadline - time.monotonic()
            batch = _fitting(waiting, left, gate)
            if not batch:
                break  # the next passage would likely end past the deadline: not started
            waiting = waiting[len(batch) :]
            texts = [chunk.embedding_text() for chunk in batch]
            started = time.monotonic()
            try:
                vectors = await _embed_in_parallel(embedder, texts)
            except EmbeddingUnavailable as exc:
                mark_degraded(rt, str(exc))
                break
            gate.learn(texts, time.monotonic() - started)
            embedded += zip(batch, vectors, strict=True)
    if embedded:  # one write for the whole search, after the model's work: the backfill skips them
        await rt.store.write(
            store_batch, model_key(embedder), [c for c, _ in embedded], [v for _, v in embedded]
        )
    return {chunk.id: _unit(vectors_sql.vector_blob(v)) for chunk, v in embedded}


async def _embed_in_parallel(embedder: Embedder, texts: list[str]) -> list[list[float]]:
    """`embedder.embed(texts)`, in up to PARALLEL runs side by side (vectors in the order of `texts`)."""
    size = -(-len(texts) // PARALLEL)  # ceiling: as few runs as cores allow
    parts = [texts[i : i + size] for i in range(0, len(texts), size)]
    done = await asyncio.gather(*(embedder.embed(part) for part in parts))
    return [vector for part in done for vector in part]


def _fitting(
    waiting: list[vectors_sql.PendingChunk], left: float | None, gate: Priority
) -> list[vectors_sql.PendingChunk]:
    """The next batch: up to MAX_BATCH passages whose estimated cost (`Priority.estimate`) fits in half of
    the time `left` (None: no limit), or the next passage alone when only it fits in the time left. So
    batches shrink as the deadline nears, an estimate off by 2x (a busy machine) costs little, and no passage
    is started that is expected to end past the deadline: the budget is a ceiling."""
    batch: list[vectors_sql.PendingChunk] = []
    cost = 0.0
    for chunk in waiting[: MAX_BATCH if gate.measured else 1]:  # nothing measured yet: one passage first
        cost += gate.estimate(chunk.embedding_text())
        if left is not None and cost > (left if not batch else left / 2):
            break
        batch.append(chunk)
    return batch


def _unit(blob: bytes) -> Any:
    try:
        import numpy as np
    except ImportError:
        return [x / vectors_sql.INT8_SCALE for x in vectors_sql.blob_values(blob)]
    return np.frombuffer(blob, dtype=np.int8).astype(np.float32) / np.float32(vectors_sql.INT8_SCALE)
