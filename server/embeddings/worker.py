"""The embedding worker: passages get vectors in the background, so a reconcile never waits for a model.

Reconcile stores passages with `embedded_model` null; this worker picks them up in small batches, embeds them
and stores the vectors (server/store/vectors_sql.py). It runs at low priority: before each batch it waits until
no query-time embedding runs (priority.py, ondemand.py), and the local model leaves a core free (local.py). It
keeps the two status facts search and `engrama_status` report: `embedder_status` {configured, provider, model,
dimensions, choice, backlog, embedded, rate_per_second, eta_seconds, paused} and `search_status` {mode,
degraded, reason?}. When the embedder fails (a server down, a wrong size), search degrades to full text and
says why, passages keep waiting, and the worker retries with exponential backoff; the first success restores
hybrid search.

`embed_pending` is the same work done once, to the end, for the benchmark and tests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio

from server.embeddings.base import Embedder, EmbeddingUnavailable
from server.embeddings.factory import configured_embedder
from server.embeddings.priority import priority
from server.runtime import Runtime
from server.store import vectors_sql
from server.store.database import DatabaseProblem

log = logging.getLogger(__name__)

QUERY_EMBEDDER = "query_embedder"  # rt.state key: the embedder search uses for queries
BATCH_SIZE = 64
# The local model's backfill batch: 4 passages, ~0.2 s of one core. A query arriving meanwhile runs beside it
# (runs are thread-safe) but shares the CPU until it ends, so the batch is kept short.
LOCAL_BATCH = 4
PUBLISH_EVERY = 1.0  # seconds between progress counts while the backfill runs (a count reads two indexes)
RATE_WINDOW = 60.0  # seconds of progress the reported rate is measured over
IDLE_POLL = 1.0  # seconds between looks for new passages when there is nothing to do
RETRY_MIN, RETRY_MAX = 1.0, 60.0  # backoff after a failure, doubling up to the maximum
PROBE_TIMEOUT = 10.0


def model_key(embedder: Embedder) -> str:
    """What identifies the vector space: provider and model (e.g. `local:all-MiniLM-L6-v2-int8`)."""
    return f"{embedder.name}:{embedder.model}"


# --- status --------------------------------------------------------------------------------------------


def current_search_status(rt: Runtime) -> dict[str, Any]:
    """`search_status` as search should act on it (computed from settings when the worker has not set it)."""
    status = rt.state.get("search_status")
    if isinstance(status, dict):
        return status
    if rt.settings.embedding_provider == "none":
        return {"mode": "fulltext", "degraded": False}
    if not rt.store.db.vec.ok:
        return {"mode": "fulltext", "degraded": True, "reason": rt.store.db.vec.reason}
    return {"mode": "hybrid", "degraded": False}


def mark_degraded(rt: Runtime, reason: str) -> None:
    if current_search_status(rt).get("reason") != reason:
        log.warning("vector search unavailable, searching full text only: %s", reason)
    rt.state["search_status"] = {"mode": "fulltext", "degraded": True, "reason": reason}


def mark_healthy(rt: Runtime) -> None:
    if current_search_status(rt).get("degraded"):
        log.info("vector search available again")
    rt.state["search_status"] = {"mode": "hybrid", "degraded": False}


def _set_embedder_status(rt: Runtime, embedder: Embedder, backlog: int, **progress: Any) -> None:
    status: dict[str, Any] = {
        "configured": True,
        "provider": embedder.name,
        "model": embedder.model,
        "backlog": backlog,
        **progress,
    }
    if embedder.dimensions is not None:
        status["dimensions"] = embedder.dimensions
    if rt.settings.embedding_choice:
        status["choice"] = rt.settings.embedding_choice
    rt.state["embedder_status"] = status


class Progress:
    """How fast the backfill goes, over the last RATE_WINDOW seconds, and when it will be done."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()

    def report(self, embedded: int, backlog: int, *, paused: bool) -> dict[str, Any]:
        now = time.monotonic()
        self.samples.append((now, embedded))
        while len(self.samples) > 2 and now - self.samples[1][0] > RATE_WINDOW:
            self.samples.popleft()
        report: dict[str, Any] = {"embedded": embedded, "paused": paused}
        (then, before) = self.samples[0]
        if backlog and now - then >= 1.0 and embedded > before:
            rate = (embedded - before) / (now - then)
            report["rate_per_second"] = round(rate, 1)
            report["eta_seconds"] = round(backlog / rate)
        elif not backlog:
            report["eta_seconds"] = 0
        return report


async def attach_embedder(rt: Runtime, embedder: Embedder) -> None:
    """Let search embed queries with `embedder` (the same one that embeds passages)."""
    rt.state[QUERY_EMBEDDER] = embedder
    await rt.store.read(vectors_sql.map_into_memory)


# --- the work ------------------------------------------------------------------------------------------


def _require_vectors(rt: Runtime) -> None:
    if not rt.store.db.vec.ok:
        raise EmbeddingUnavailable(rt.store.db.vec.reason or "sqlite-vec is not loaded")


async def prepare_vector_table(rt: Runtime, embedder: Embedder) -> bool:
    """Make the stored vectors belong to `embedder`; True if they were rebuilt.

    One probe text is embedded first, even when the size is configured: it reveals an unknown size, loads a
    local model, and finds an unreachable or misconfigured service before search relies on it."""
    _require_vectors(rt)
    [probe] = await asyncio.wait_for(embedder.embed(["dimension probe"]), PROBE_TIMEOUT)
    dims = len(probe)
    rebuilt = await rt.store.write(vectors_sql.ensure_vector_table, model_key(embedder), dims)
    if rebuilt:
        log.info(
            "vector index set up for %s (%d dimensions); all passages will be embedded", embedder.model, dims
        )
    return rebuilt


async def embed_batch(rt: Runtime, embedder: Embedder, size: int = BATCH_SIZE) -> int:
    """Embed and store up to `size` waiting passages; returns how many were handled (0 = nothing waits).

    A passage deleted or edited while its vector was computed is handled without being stored."""
    pending = await rt.store.read(vectors_sql.pending_chunks, size)
    if not pending:
        await rt.store.write(vectors_sql.drop_orphans)
        return 0
    texts = [chunk.embedding_text() for chunk in pending]
    started = time.monotonic()
    vectors = await embedder.embed(texts)
    priority(rt).learn(texts, time.monotonic() - started)  # query-time work sizes its batches by this
    return await rt.store.write(store_batch, model_key(embedder), pending, vectors)


def store_batch(
    conn: Any, model: str, pending: Sequence[vectors_sql.PendingChunk], vectors: Sequence[Sequence[float]]
) -> int:
    """Store a batch's vectors (on the DB thread); the passages edited meanwhile are left waiting."""
    # The table is checked again in this transaction: another process may have rebuilt it for its model.
    vectors_sql.ensure_vector_table(conn, model, len(vectors[0]))
    vectors_sql.store_vectors(conn, model, pending, vectors)
    return len(pending)


async def embed_pending(rt: Runtime, embedder: Embedder, *, batch_size: int = BATCH_SIZE) -> int:
    """Embed every waiting passage now; returns how many passages were handled. Raises
    EmbeddingUnavailable when the embedder (or sqlite-vec) cannot do it."""
    await prepare_vector_table(rt, embedder)
    total = 0
    while done := await embed_batch(rt, embedder, batch_size):
        total += done
    _set_embedder_status(rt, embedder, 0)
    return total


class EmbeddingWorker:
    """The background loop; start with `embedding_worker(rt)`."""

    def __init__(self, rt: Runtime, embedder: Embedder, batch_size: int | None = None) -> None:
        self.rt = rt
        self.embedder = embedder
        self.batch_size = batch_size or (LOCAL_BATCH if embedder.name == "local" else BATCH_SIZE)
        self.progress = Progress()
        self._published = 0.0  # when progress was last reported (monotonic)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="engrama-embedding-worker")

    def wake(self) -> None:
        """Look for waiting passages now instead of at the next poll (or retry now after a failure)."""
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        delay = RETRY_MIN
        prepared = False
        while True:
            try:
                if not prepared:
                    await prepare_vector_table(self.rt, self.embedder)
                    prepared = True
                    mark_healthy(self.rt)
                await self._yield_to_queries()
                done = await embed_batch(self.rt, self.embedder, self.batch_size)
                if done == 0 and current_search_status(self.rt).get("degraded"):
                    await asyncio.wait_for(self.embedder.embed(["probe"]), PROBE_TIMEOUT)  # recovered?
                mark_healthy(self.rt)
                delay = RETRY_MIN
            except (EmbeddingUnavailable, TimeoutError) as exc:
                mark_degraded(self.rt, str(exc) or "the embedder did not answer in time")
                await self._publish(paused=True)
                await self._pause(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            except DatabaseProblem as exc:  # the database file went away under the server: nothing to do now
                log.warning("embedding stopped: %s", exc)
                return
            except Exception:  # the outermost handler of a background task: log, back off, keep serving
                log.exception("embedding worker failed; retrying in %.0fs", delay)
                mark_degraded(self.rt, "the embedding worker hit an unexpected error (see the log)")
                await self._publish(paused=True)
                await self._pause(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            await self._publish(paused=False, quick=done > 0)
            if done == 0:
                await self._pause(IDLE_POLL)

    async def _yield_to_queries(self) -> None:
        gate = priority(self.rt)
        if not gate.idle.is_set():
            await self._publish(paused=True)
            await gate.idle.wait()

    async def _publish(self, *, paused: bool, quick: bool = False) -> None:
        """Report progress to status; `quick` skips it when the last report is recent and said the same."""
        last = self.rt.state.get("embedder_status")
        recent = time.monotonic() - self._published < PUBLISH_EVERY
        if quick and recent and isinstance(last, dict) and last.get("paused") is paused:
            return
        embedded, backlog = await self.rt.store.read(vectors_sql.progress)
        report = self.progress.report(embedded, backlog, paused=paused)
        _set_embedder_status(self.rt, self.embedder, backlog, **report)
        self._published = time.monotonic()

    async def _pause(self, seconds: float) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()


@asynccontextmanager
async def embedding_worker(
    rt: Runtime, *, embedder: Embedder | None = None, batch_size: int | None = None
) -> AsyncIterator[EmbeddingWorker | None]:
    """Run the embedding worker for `rt` (the embedder from settings unless one is given) while inside.

    Yields None, with search degraded and the reason reported, when the embedder cannot even be built
    (a configuration error) or sqlite-vec did not load: the server still serves full-text search."""
    s = rt.settings
    try:
        embedder = embedder or configured_embedder(s)
    except ValueError as exc:
        mark_degraded(rt, f"embedder not configured correctly: {exc}")
        yield None
        return
    if embedder is None:
        yield None
        return
    _set_embedder_status(rt, embedder, await rt.store.read(vectors_sql.backlog))
    if not rt.store.db.vec.ok:
        mark_degraded(rt, rt.store.db.vec.reason or "sqlite-vec is not loaded")
        yield None
        await embedder.aclose()
        return
    await attach_embedder(rt, embedder)
    worker = EmbeddingWorker(rt, embedder, batch_size)
    worker.start()
    try:
        yield worker
    finally:
        with anyio.CancelScope(shield=True):  # stopped in order even when the server is cancelled
            await worker.stop()
            rt.state.pop(QUERY_EMBEDDER, None)
            await embedder.aclose()
