"""The background embedding worker: it never blocks a reconcile, and search degrades (and says so) when the
embedding service fails, then recovers. The service is a real OpenAI-style server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from server.embeddings import FakeEmbedder, OpenAIEmbedder
from server.embeddings.worker import QUERY_EMBEDDER, embedding_worker
from server.runtime import Runtime, open_runtime
from server.search import service
from server.search.service import search
from server.settings import Settings
from server.status import build_status


class Service:
    """An embeddings endpoint whose behaviour a test switches: "ok", "hang" (no answer) or "small" vectors."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.release = threading.Event()
        self.fake = FakeEmbedder(8)
        self.url = ""

    def answer(self, texts: list[str]) -> dict[str, Any]:
        if self.mode == "hang":
            self.release.wait(3)
        size = 4 if self.mode == "small" else 8
        data = [{"index": i, "embedding": self.fake.vector(t)[:size]} for i, t in enumerate(texts)]
        return {"data": data}


@pytest.fixture
def endpoint() -> Iterator[Service]:
    state = Service()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            payload = json.dumps(state.answer(body["input"])).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def openai(url: str, dimensions: int | None = None) -> OpenAIEmbedder:
    return OpenAIEmbedder("test-embed", base_url=url, dimensions=dimensions, timeout=0.5, retries=0)


@pytest.fixture
async def rt(vault: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    monkeypatch.setattr(service, "QUERY_EMBED_TIMEOUT", 0.3)
    (vault / "Tomatoes.md").write_text("Tomatoes want full sun.\nStake them by June.\n", encoding="utf-8")
    (vault / "Bread.md").write_text("Sourdough starter needs daily feeding.\n", encoding="utf-8")
    settings = Settings(vault=vault, db_path=db_path, watch=False, embedding_provider="openai")
    async with open_runtime(settings) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


async def until(check: Callable[[], Any], timeout: float = 10.0) -> None:
    """Wait for `check()` to be true (polling with a deadline, no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


def backlog(rt: Runtime) -> int | None:
    status = rt.state.get("embedder_status")
    return status.get("backlog") if isinstance(status, dict) else None


def degraded(rt: Runtime) -> bool:
    status = rt.state.get("search_status")
    return isinstance(status, dict) and bool(status.get("degraded"))


async def test_the_worker_embeds_in_the_background_and_search_turns_hybrid(rt: Runtime, vault: Path) -> None:
    async with embedding_worker(rt, embedder=FakeEmbedder(16)) as worker:
        assert worker is not None
        await until(lambda: backlog(rt) == 0)
        assert (await search(rt, "stake tomatoes")).search_mode == "hybrid"
        (vault / "Basil.md").write_text("Basil likes the tomatoes' company.\n", encoding="utf-8")
        await rt.require_sync().sync_vault()
        worker.wake()
        chunks = await rt.store.read(lambda c: c.execute("select count(*) from chunks").fetchone()[0])
        await until(lambda: backlog(rt) == 0 and rt.state["embedder_status"]["embedded"] == chunks)  # type: ignore[index]
        status = await build_status(rt)
        assert status["embedder"] == {
            "configured": True,
            "provider": "fake",
            "model": "fake-hash",
            "dimensions": 16,
            "backlog": 0,
            "embedded": chunks,
            "eta_seconds": 0,
            "paused": False,
        }
        assert status["search"] == {"mode": "hybrid", "degraded": False}
    assert QUERY_EMBEDDER not in rt.state  # the embedder is closed with the worker


async def test_a_service_that_stops_answering_degrades_search_and_recovers(
    rt: Runtime, endpoint: Service
) -> None:
    async with embedding_worker(rt, embedder=openai(endpoint.url)) as worker:
        assert worker is not None
        await until(lambda: backlog(rt) == 0)
        assert (await search(rt, "stake tomatoes")).search_mode == "hybrid"
        endpoint.mode = "hang"
        response = await search(rt, "when to stake tomatoes")  # a new query: the first one's vector is cached
        assert response.search_mode == "fulltext"
        assert "did not answer within 0.3s" in (response.degraded_reason or "")
        assert response.results[0].name == "Tomatoes"  # full text still answers
        assert (await build_status(rt))["search"]["degraded"] is True
        endpoint.mode = "ok"
        endpoint.release.set()
        worker.wake()
        await until(lambda: not degraded(rt))
        assert (await search(rt, "stake tomatoes")).search_mode == "hybrid"


async def test_vectors_of_the_wrong_size_degrade_search_with_the_reason(
    rt: Runtime, endpoint: Service
) -> None:
    endpoint.mode = "small"
    async with embedding_worker(rt, embedder=openai(endpoint.url, dimensions=8)):
        await until(lambda: degraded(rt))
        response = await search(rt, "stake tomatoes")
        assert response.search_mode == "fulltext"
        assert "returned 4-dimensional vectors but 8 are expected" in (response.degraded_reason or "")
        assert response.results[0].name == "Tomatoes"
        assert backlog(rt) == 2  # the passages wait for a working embedder


async def test_an_unreachable_service_never_blocks_a_reconcile(rt: Runtime, vault: Path) -> None:
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    async with embedding_worker(rt, embedder=openai(url, dimensions=8)):
        await until(lambda: degraded(rt))
        (vault / "Basil.md").write_text("Basil likes company.\n", encoding="utf-8")
        report = await asyncio.wait_for(rt.require_sync().sync_vault(), 5)
        assert report.created == 1
        response = await search(rt, "basil company")
        assert response.search_mode == "fulltext" and "cannot connect" in (response.degraded_reason or "")
        assert [h.name for h in response.results] == ["Basil"]


async def test_no_embedder_configured_means_no_worker(vault: Path, db_path: Path) -> None:
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt:
        async with embedding_worker(rt) as worker:
            assert worker is None
        assert "embedder_status" not in rt.state


async def test_a_misconfigured_embedder_degrades_instead_of_failing(vault: Path, db_path: Path) -> None:
    settings = Settings(
        vault=vault, db_path=db_path, embedding_provider="openai", openai_base_url="http://127.0.0.1:9/v1"
    )
    async with open_runtime(settings) as rt, embedding_worker(rt) as worker:
        assert worker is None
        response = await search(rt, "anything at all")
        assert response.search_mode == "fulltext"
        assert "EMBEDDING_MODEL is required" in (response.degraded_reason or "")
