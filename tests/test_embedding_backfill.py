"""A search never waits for a background backfill batch in progress (issue 13: p95 while backfilling)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from server.embeddings import FakeEmbedder, LocalEmbedder, local_available
from server.embeddings.base import Embedder
from server.embeddings.local import MiniLM
from server.embeddings.worker import embedding_worker
from server.runtime import open_runtime
from server.search.service import search
from server.settings import Settings

SEARCH_DEADLINE = 30.0  # seconds: generous for a loaded machine; a search waiting for the batch never ends


class Hold:
    """Keeps the first batch of several passages (the backfill's: a probe or a query is one text) waiting
    on the thread it runs on until `release` is set."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.held = False

    def enter(self, texts: Sequence[str]) -> None:
        if not self.held and len(texts) > 1:
            self.held = True
            self.inside.set()
            self.release.wait(60)


class HeldFake(FakeEmbedder):
    """The fake, whose backfill batch waits on a worker thread, as a long model run would."""

    def __init__(self, hold: Hold) -> None:
        super().__init__(32)
        self.hold = hold

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.to_thread(self.hold.enter, texts)
        return await super().embed(texts)


class HeldModel:
    """The local model's runner, whose backfill batch waits inside the model's own thread: whatever the
    embedder holds around a model run (a lock, the session) stays held meanwhile."""

    def __init__(self, model: MiniLM, hold: Hold) -> None:
        self.model = model
        self.hold = hold

    def embed(self, texts: list[str]) -> Any:
        self.hold.enter(texts)
        return self.model.embed(texts)


async def held_embedder(provider: str, hold: Hold) -> Embedder:
    if provider == "fake":
        return HeldFake(hold)
    embedder = LocalEmbedder()
    embedder._model = HeldModel(await embedder.loaded(), hold)  # type: ignore[assignment]
    return embedder


def embedders() -> list[object]:
    local = pytest.mark.skipif(not local_available(), reason="the local extra is not installed")
    return [pytest.param("fake"), pytest.param("local", marks=local)]


@pytest.mark.parametrize("provider", embedders())
async def test_a_search_while_a_backfill_batch_runs_does_not_wait_for_it(
    provider: str, vault: Path, db_path: Path
) -> None:
    for i in range(12):
        (vault / f"Note {i}.md").write_text(
            f"Note {i} is about topic {i % 4}.\nThe greenhouse needs water on day {i}.\n", encoding="utf-8"
        )
    hold = Hold()
    embedder = await held_embedder(provider, hold)
    settings = Settings(vault=vault, db_path=db_path, watch=False, embedding_provider=provider)
    async with open_runtime(settings) as rt:
        await rt.require_sync().sync_vault()
        try:
            async with embedding_worker(rt, embedder=embedder, batch_size=4) as worker:
                assert worker is not None
                await until(hold.inside.is_set)  # a backfill batch is in progress
                response = await asyncio.wait_for(
                    search(rt, "when does the greenhouse need water", explain=True), SEARCH_DEADLINE
                )
                assert not hold.release.is_set()  # answered while the batch was still held
                assert response.search_mode == "hybrid" and response.degraded_reason is None
                assert response.results and (response.results[0].signals or {}).get("vector", 0) > 0
        finally:
            hold.release.set()


async def until(check: Any, timeout: float = SEARCH_DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)
