"""Query-time embedding: the passages a search needs get vectors now (within a budget), stored at once so the
backfill skips them; query vectors are cached; the backfill waits while query-time embedding runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from server.embeddings import FakeEmbedder, ondemand
from server.embeddings.ondemand import MAX_BATCH, passage_vectors, query_vector
from server.embeddings.priority import priority
from server.embeddings.worker import attach_embedder, embed_batch, embedding_worker, prepare_vector_table
from server.runtime import Runtime, open_runtime
from server.settings import Settings
from server.store import vectors_sql


class SlowEmbedder(FakeEmbedder):
    """The fake, taking `per_text` seconds per text, as a real model does."""

    def __init__(self, per_text: float) -> None:
        super().__init__(16)
        self.per_text = per_text

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.per_text * len(texts))
        return await super().embed(texts)


class ConcurrencyEmbedder(SlowEmbedder):
    """The slow fake, counting how many of its runs overlap."""

    def __init__(self, per_text: float) -> None:
        super().__init__(per_text)
        self.running = self.most_at_once = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            return await super().embed(texts)
        finally:
            self.running -= 1


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    for i in range(24):
        (vault / f"Note {i}.md").write_text(f"Note {i} is about topic {i % 5}.\n", encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False, embedding_provider="fake")
    async with open_runtime(settings) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


async def chunk_ids(rt: Runtime) -> list[int]:
    return await rt.store.read(lambda c: [r[0] for r in c.execute("select id from chunks order by id")])


async def up(rt: Runtime, embedder: FakeEmbedder) -> None:
    await prepare_vector_table(rt, embedder)
    await attach_embedder(rt, embedder)
    embedder.calls.clear()  # the probe


async def test_missing_vectors_are_embedded_stored_and_not_embedded_again(rt: Runtime) -> None:
    embedder = FakeEmbedder(16)
    await up(rt, embedder)
    ids = await chunk_ids(rt)
    wanted = [ids[5], ids[2], ids[9]]
    first = await passage_vectors(rt, wanted, budget=None)
    assert list(first) == wanted  # in the order asked
    assert sum(len(batch) for batch in embedder.calls) == 3
    assert await rt.store.read(vectors_sql.backlog) == len(ids) - 3  # stored: the backfill skips them
    texts = await rt.store.read(vectors_sql.unembedded_chunks, ids)
    assert not {c.id for c in texts} & set(wanted)
    again = await passage_vectors(rt, [*wanted, ids[0]], budget=None)
    assert sum(len(batch) for batch in embedder.calls) == 4  # only ids[0] was new
    for chunk_id in wanted:
        assert list(again[chunk_id]) == pytest.approx(list(first[chunk_id]))  # as stored, both times
        assert float(sum(x * x for x in again[chunk_id])) == pytest.approx(1.0, abs=0.02)


async def test_a_vector_returned_is_the_stored_one(rt: Runtime) -> None:
    embedder = FakeEmbedder(16)
    await up(rt, embedder)
    [chunk_id] = (await chunk_ids(rt))[:1]
    [pending] = await rt.store.read(vectors_sql.unembedded_chunks, [chunk_id])
    exact = embedder.vector(pending.embedding_text())
    [vector] = (await passage_vectors(rt, [chunk_id], budget=None)).values()
    assert sum(a * b for a, b in zip(exact, vector, strict=True)) > 0.999  # int8 keeps the direction


async def test_the_budget_bounds_the_time_spent_embedding(rt: Runtime) -> None:
    per_text = 0.03
    embedder = SlowEmbedder(per_text)
    await up(rt, embedder)
    ids = await chunk_ids(rt)
    assert await passage_vectors(rt, ids, budget=0) == {}  # nothing stored yet, no time to embed
    assert embedder.calls == []
    started = time.monotonic()
    found = await passage_vectors(rt, ids, budget=0.2)
    spent = time.monotonic() - started
    assert 0 < len(found) < len(ids)
    assert spent < 0.2 + 2 * per_text + 0.1  # at most about one passage over, plus the store
    assert await rt.store.read(vectors_sql.backlog) == len(ids) - len(found)  # what was embedded was kept
    assert list(found) == ids[: len(found)]  # in the order given: the caller's best passages first


async def test_the_budget_is_a_ceiling_no_passage_is_started_that_would_end_past_it(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ondemand, "PARALLEL", 1)  # one run at a time: the count below is exact
    per_text = 0.1
    embedder = SlowEmbedder(per_text)
    await up(rt, embedder)
    gate = priority(rt)
    gate.seconds_per_passage, gate.seconds_per_char = per_text, 0.0  # the cost measured before: exact
    gate.measured = True
    ids = await chunk_ids(rt)
    budget = 6.5 * per_text
    started = time.monotonic()
    found = await passage_vectors(rt, ids, budget=budget)
    spent = time.monotonic() - started
    # 3 passages (half of the budget), then one at a time while one fits in what is left: 6 in 0.6 s ...
    assert len(found) == 6
    assert spent < budget  # ... and not a 7th, which would end past the budget (the store is in the margin)
    assert await rt.store.read(vectors_sql.backlog) == len(ids) - len(found)


async def test_with_nothing_measured_one_passage_is_embedded_first(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ondemand, "PARALLEL", 1)
    embedder = SlowEmbedder(0.01)
    await up(rt, embedder)
    await passage_vectors(rt, await chunk_ids(rt), budget=1.0)
    assert [len(batch) for batch in embedder.calls][:2] == [1, MAX_BATCH]  # measured, then sized by it


async def test_a_query_time_batch_runs_on_every_core_at_once(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ondemand, "PARALLEL", 2)
    embedder = ConcurrencyEmbedder(0.05)
    await up(rt, embedder)
    ids = await chunk_ids(rt)
    found = await passage_vectors(rt, ids[:9], budget=None)
    assert list(found) == ids[:9]  # every vector, in the order asked, whatever run computed it
    assert [len(batch) for batch in embedder.calls] == [1, 4, 4]  # one measured, then 8 split in two
    assert embedder.most_at_once == 2


async def test_the_backfill_measures_the_models_cost_for_query_time_work(rt: Runtime) -> None:
    per_text = 0.02
    embedder = SlowEmbedder(per_text)
    await prepare_vector_table(rt, embedder)
    assert not priority(rt).measured
    await embed_batch(rt, embedder, 4)
    assert priority(rt).measured
    assert priority(rt).seconds_per_passage == pytest.approx(per_text, rel=0.5)


async def test_nothing_is_embedded_without_an_embedder_up(rt: Runtime) -> None:
    assert await passage_vectors(rt, await chunk_ids(rt), budget=None) == {}


async def test_query_vectors_are_cached(rt: Runtime) -> None:
    embedder = FakeEmbedder(16)
    await up(rt, embedder)
    first = await query_vector(rt, embedder, "where are the tomatoes")
    assert await query_vector(rt, embedder, "where are the tomatoes") == first
    assert embedder.calls == [["where are the tomatoes"]]


async def test_the_backfill_waits_while_query_time_embedding_runs(rt: Runtime) -> None:
    embedder = FakeEmbedder(16)
    waiting = await rt.store.read(vectors_sql.backlog)
    query = AsyncExitStack()
    await query.enter_async_context(priority(rt).foreground())  # a query is embedding
    async with embedding_worker(rt, embedder=embedder) as worker:
        assert worker is not None
        await until(lambda: status(rt).get("paused") is True)
        assert await rt.store.read(vectors_sql.backlog) == waiting  # not a passage embedded meanwhile
        assert status(rt)["backlog"] == waiting and embedder.calls == [["dimension probe"]]
        await query.aclose()  # the query is done: the backfill goes on
        await until(lambda: status(rt).get("backlog") == 0)
        assert status(rt)["embedded"] == waiting and status(rt)["paused"] is False


def status(rt: Runtime) -> dict:
    found = rt.state.get("embedder_status")
    return found if isinstance(found, dict) else {}


async def until(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_an_order_questions_event_searches_share_its_budget(rt: Runtime) -> None:
    """ "Which came first, X or Y?" runs a search for the question and one per event; together they keep to
    the question's time budget for the model, not one budget each (which made such questions the slowest)."""
    from dataclasses import replace
    from datetime import datetime

    from server.search import when
    from server.search.service import DEFAULT_TUNING, run_search
    from server.store.search_sql import NodeFilter

    per_text = 0.05
    embedder = SlowEmbedder(per_text)
    await up(rt, embedder)
    question = "Which came first, topic 1 or topic 2?"
    intent = when.resolve(question, datetime.now().astimezone())
    assert intent is not None and intent.kind == "order" and len(intent.events) == 2
    tuning = replace(DEFAULT_TUNING, rescore_budget=6 * per_text)
    await run_search(rt, question, NodeFilter(), 10, False, tuning)
    passages = [t for call in embedder.calls for t in call if t.startswith("Note ")]
    # One budget holds about 6 passages (7 or 8 here: the first is embedded to measure the model, and the
    # ceiling is an estimate); with a budget each, the three searches embedded 23.
    assert 0 < len(passages) <= 12
