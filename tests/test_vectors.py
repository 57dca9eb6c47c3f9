"""Passage vectors in sqlite-vec: one per passage, gone with the passage, rebuilt when the model changes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.embeddings import FakeEmbedder
from server.embeddings.worker import attach_embedder, embed_pending
from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.settings import Settings
from server.store import vectors_sql

NOTES = {
    "Tomatoes.md": "Tomatoes want full sun.\nWater them deeply twice a week.\nStake them by June.\n",
    "Basil.md": "Basil grows next to the tomatoes.\nPinch the flowers.\n",
    "Bread.md": "Sourdough starter needs daily feeding.\n",
}


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    for name, text in NOTES.items():
        (vault / name).write_text(text, encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False, embedding_provider="fake")
    async with open_runtime(settings) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


def small_chunks(text: str) -> str:
    """Many short lines, so the chunker makes several passages (it packs up to 5 lines or 200 chars)."""
    return "\n".join(f"{text} line {i} " + "word " * 40 for i in range(12)) + "\n"


def replace_body(path: Path, body: str) -> None:
    """New body, same frontmatter (so the note keeps the engrama_id the first sync gave it)."""
    text = path.read_text(encoding="utf-8")
    front = text[: text.index("\n---\n", 4) + 5] if text.startswith("---\n") else ""
    path.write_text(front + body, encoding="utf-8")


async def ids(rt: Runtime) -> tuple[set[int], set[int]]:
    """(chunk ids, ids of stored vectors)."""

    def read(conn):
        chunks = {r[0] for r in conn.execute("select id from chunks")}
        vectors = {r[0] for r in conn.execute(f"select rowid from {vectors_sql.VEC_TABLE}")}
        return chunks, vectors

    return await rt.store.read(read)


async def embedded_models(rt: Runtime) -> set[str | None]:
    return await rt.store.read(lambda c: {r[0] for r in c.execute("select embedded_model from chunks")})


async def test_every_passage_gets_one_vector(rt: Runtime) -> None:
    count = await embed_pending(rt, FakeEmbedder(16))
    chunks, vectors = await ids(rt)
    assert count == len(chunks) > 0 and vectors == chunks
    assert await embedded_models(rt) == {"fake:fake-hash"}
    assert await rt.store.read(vectors_sql.vector_space) == ("fake:fake-hash", 16)
    assert await embed_pending(rt, FakeEmbedder(16)) == 0  # nothing left to do


async def test_vectors_follow_deleted_and_edited_passages(rt: Runtime, vault: Path) -> None:
    (vault / "Long.md").write_text(small_chunks("first"), encoding="utf-8")
    await rt.require_sync().sync_vault()
    await embed_pending(rt, FakeEmbedder(16))
    before, _ = await ids(rt)
    replace_body(vault / "Long.md", "Now one short line.\n")
    await rt.require_sync().sync_vault()
    await embed_pending(rt, FakeEmbedder(16))
    chunks, vectors = await ids(rt)
    assert len(chunks) < len(before)
    assert vectors == chunks  # the vectors of the deleted passages went with them


async def test_an_unchanged_passage_keeps_its_vector(rt: Runtime, vault: Path) -> None:
    await embed_pending(rt, FakeEmbedder(16))
    embedder = FakeEmbedder(16)
    replace_body(vault / "Bread.md", NOTES["Bread.md"] + "\n# Baking\nBake at 250 degrees.\n")
    await rt.require_sync().sync_vault()
    await embed_pending(rt, embedder)
    probe, *batches = embedder.calls  # the first call checks the embedder answers (and its size)
    assert probe == ["dimension probe"]
    embedded = [text for batch in batches for text in batch]
    assert len(embedded) == 1 and "Bake at 250 degrees." in embedded[0]
    assert embedded[0].startswith("Bread > Baking\n")  # the title and heading travel with the passage


async def test_a_new_model_re_embeds_every_passage(rt: Runtime) -> None:
    await embed_pending(rt, FakeEmbedder(16, model="one"))
    second = FakeEmbedder(16, model="two")
    count = await embed_pending(rt, second)
    chunks, vectors = await ids(rt)
    assert count == len(chunks) and vectors == chunks
    assert await embedded_models(rt) == {"fake:two"}


async def test_a_new_size_rebuilds_the_vector_table(rt: Runtime) -> None:
    await embed_pending(rt, FakeEmbedder(16))
    await embed_pending(rt, FakeEmbedder(32))
    assert await rt.store.read(vectors_sql.vector_space) == ("fake:fake-hash", 32)
    chunks, vectors = await ids(rt)
    assert vectors == chunks


async def test_a_passage_edited_while_it_was_embedded_gets_no_stale_vector(rt: Runtime) -> None:
    await rt.store.write(vectors_sql.ensure_vector_table, "fake:fake-hash", 4)
    [first, *_] = await rt.store.read(vectors_sql.pending_chunks, 10)
    stale = vectors_sql.PendingChunk(first.id, first.title, first.heading, "text that was replaced")
    stored = await rt.store.write(vectors_sql.store_vectors, "fake:fake-hash", [stale], [[1.0, 0, 0, 0]])
    assert stored == 0
    assert first.id in {c.id for c in await rt.store.read(vectors_sql.pending_chunks, 10)}


async def test_hybrid_search_adds_the_vector_signal(rt: Runtime) -> None:
    embedder = FakeEmbedder(64)
    await embed_pending(rt, embedder)
    await attach_embedder(rt, embedder)
    response = await search(rt, "when to stake tomatoes", explain=True)
    assert response.search_mode == "hybrid" and response.degraded_reason is None
    top = response.results[0]
    assert top.name == "Tomatoes" and top.signals and top.signals["vector"] > 0


async def test_vectors_of_another_model_are_not_mixed_with_the_query(rt: Runtime) -> None:
    await embed_pending(rt, FakeEmbedder(64, model="old"))
    await attach_embedder(rt, FakeEmbedder(64, model="new"))
    response = await search(rt, "when to stake tomatoes", explain=True)
    # The old vectors are not scanned; the query's own model re-scores the best passages (search._rescore).
    assert response.search_mode == "hybrid" and response.degraded_reason is None
    assert response.results[0].name == "Tomatoes"


def test_vectors_are_stored_unit_length_as_int8() -> None:
    stored = vectors_sql.blob_values(vectors_sql.vector_blob([3.0, 4.0]))
    assert [x / vectors_sql.INT8_SCALE for x in stored] == pytest.approx([0.6, 0.8], abs=0.5 / 127)
    assert list(vectors_sql.blob_values(vectors_sql.vector_blob([0.0, 0.0]))) == [0, 0]
    assert list(vectors_sql.blob_values(vectors_sql.vector_blob([-1.0, 0.0]))) == [-127, 0]  # never clipped


async def test_a_float_table_from_an_older_version_is_rebuilt_as_int8(rt: Runtime) -> None:
    def older_version(conn) -> None:  # what this project wrote before int8 storage: float32, no storage key
        conn.execute(f"create virtual table {vectors_sql.VEC_TABLE} using vec0(embedding float[16])")
        conn.execute("insert into meta (key, value) values ('vectors_model', 'fake:fake-hash')")
        conn.execute("insert into meta (key, value) values ('vectors_dimensions', '16')")

    await rt.store.write(older_version)
    assert await rt.store.read(vectors_sql.vector_space) is None  # search does not scan it
    assert await rt.store.write(vectors_sql.ensure_vector_table, "fake:fake-hash", 16) is True
    assert await rt.store.read(vectors_sql.vector_space) == ("fake:fake-hash", 16)
    assert await embed_pending(rt, FakeEmbedder(16)) == len((await ids(rt))[0])
