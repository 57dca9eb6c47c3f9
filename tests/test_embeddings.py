"""Embedders: the factory, the fake, and the OpenAI-compatible client against a real loopback server."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from server.embeddings import (
    PROVIDERS,
    Embedder,
    EmbeddingUnavailable,
    FakeEmbedder,
    LocalEmbedder,
    OpenAIEmbedder,
    make_embedder,
)

# --- a real /v1/embeddings server on 127.0.0.1 -------------------------------------------------------------


@dataclass
class EmbeddingServer:
    """Speaks the OpenAI embeddings protocol; `plan` decides each answer in turn (the last one repeats)."""

    plan: list[str] = field(default_factory=lambda: ["ok"])  # "ok", "500", "401", "hang", "wrong-count"
    dimensions: int = 4
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # wakes "hang" handlers at teardown
    url: str = ""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        step = self.plan[min(len(self.requests) - 1, len(self.plan) - 1)]
        if step == "hang":
            self.release.wait(5)
            return 200, {}
        if step in ("500", "401"):
            return int(step), {"error": {"message": f"simulated {step}", "type": "server_error"}}
        texts = body["input"]
        count = len(texts) - 1 if step == "wrong-count" else len(texts)
        data = [{"object": "embedding", "index": i, "embedding": self.vector(texts[i])} for i in range(count)]
        data.reverse()  # servers may answer out of order; the client must sort by index
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}

    def vector(self, text: str) -> list[float]:
        return [float(len(text))] + [float(i) for i in range(1, self.dimensions)]


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    state = EmbeddingServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            if self.path != "/v1/embeddings":
                status, answer = 404, {"error": {"message": f"no route {self.path}"}}
            else:
                status, answer = state.answer(body)
            payload = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timeout test)

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


def client(server: EmbeddingServer, **kw: Any) -> OpenAIEmbedder:
    kw.setdefault("backoff", 0.0)
    return OpenAIEmbedder("test-embed", base_url=server.url, **kw)


async def test_openai_embedder_batches_and_keeps_input_order(server):
    embedder = client(server, batch_size=64)
    texts = [f"text number {i}" + "x" * i for i in range(150)]
    vectors = await embedder.embed(texts)
    await embedder.aclose()
    assert [len(b["input"]) for b in server.requests] == [64, 64, 22]
    assert all(b["model"] == "test-embed" for b in server.requests)
    assert [v[0] for v in vectors] == [float(len(t)) for t in texts]
    assert embedder.dimensions == 4, "learned from the first answer"


async def test_openai_embedder_sends_the_api_key_only_when_given(server):
    for key in ("sk-test", None):
        embedder = client(server, api_key=key)
        await embedder.embed(["hello"])
        await embedder.aclose()
    assert server.headers[0].get("Authorization") == "Bearer sk-test"
    assert "Authorization" not in server.headers[1]


async def test_openai_embedder_with_no_texts_sends_nothing(server):
    assert await client(server).embed([]) == []
    assert server.requests == []


async def test_a_server_that_does_not_answer_in_time_is_unavailable_with_the_reason(server):
    server.plan = ["hang"]
    embedder = client(server, timeout=0.2, retries=1)
    with pytest.raises(EmbeddingUnavailable, match=r"no answer within 0\.2s") as caught:
        await embedder.embed(["hello"])
    await embedder.aclose()
    assert "2 attempts" in str(caught.value)
    assert len(server.requests) == 2


async def test_vectors_of_the_wrong_size_are_refused_with_the_sizes_named(server):
    embedder = client(server, dimensions=8)
    with pytest.raises(EmbeddingUnavailable, match=r"returned 4-dimensional vectors but 8 are expected"):
        await embedder.embed(["hello"])
    await embedder.aclose()


async def test_a_later_answer_of_another_size_is_refused(server):
    embedder = client(server)
    await embedder.embed(["a"])
    server.dimensions = 6
    with pytest.raises(EmbeddingUnavailable, match="6-dimensional"):
        await embedder.embed(["b"])
    await embedder.aclose()


async def test_a_server_error_is_retried_and_then_succeeds(server):
    server.plan = ["500", "ok"]
    embedder = client(server, retries=2)
    vectors = await embedder.embed(["hello"])
    await embedder.aclose()
    assert len(server.requests) == 2 and len(vectors) == 1


async def test_server_errors_past_the_retries_are_unavailable_with_the_servers_message(server):
    server.plan = ["500"]
    embedder = client(server, retries=2)
    with pytest.raises(EmbeddingUnavailable, match="simulated 500"):
        await embedder.embed(["hello"])
    await embedder.aclose()
    assert len(server.requests) == 3


async def test_a_refused_key_is_not_retried_and_says_what_to_check(server):
    server.plan = ["401"]
    embedder = client(server, retries=2)
    with pytest.raises(EmbeddingUnavailable, match="OPENAI_API_KEY"):
        await embedder.embed(["hello"])
    await embedder.aclose()
    assert len(server.requests) == 1


async def test_a_wrong_base_url_says_to_check_it(server):
    embedder = OpenAIEmbedder("m", base_url=server.url.removesuffix("/v1"), backoff=0)
    with pytest.raises(EmbeddingUnavailable, match="OPENAI_BASE_URL"):
        await embedder.embed(["hello"])
    await embedder.aclose()


async def test_an_answer_missing_vectors_is_refused(server):
    server.plan = ["wrong-count"]
    embedder = client(server)
    with pytest.raises(EmbeddingUnavailable, match="returned 1 vectors for 2 texts"):
        await embedder.embed(["a", "b"])
    await embedder.aclose()


async def test_nothing_listening_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there
    embedder = OpenAIEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff=0)
    with pytest.raises(EmbeddingUnavailable, match="cannot connect"):
        await embedder.embed(["hello"])
    await embedder.aclose()


# --- factory and fake ----------------------------------------------------------------------------------------


def test_factory_builds_each_provider_without_io():
    assert make_embedder("none", None, None, None, None) is None
    assert isinstance(make_embedder("fake", None, 16, None, None), FakeEmbedder)
    assert isinstance(make_embedder("local", None, None, None, None), LocalEmbedder)
    openai = make_embedder("OpenAI", None, None, None, "sk")
    assert isinstance(openai, OpenAIEmbedder) and openai.model == "text-embedding-3-small"
    for embedder in (make_embedder("fake"), make_embedder("local"), openai):
        assert isinstance(embedder, Embedder)


def test_factory_names_the_valid_providers_for_an_unknown_one():
    with pytest.raises(ValueError, match="auto, none, openai, local, fake"):
        make_embedder("sentence-transformers", None, None, None, None)
    assert PROVIDERS == ("auto", "none", "openai", "local", "fake")


def test_factory_needs_a_model_for_a_self_hosted_endpoint():
    with pytest.raises(ValueError, match="EMBEDDING_MODEL"):
        make_embedder("openai", None, None, "http://localhost:11434/v1", None)
    ollama = make_embedder("openai", "nomic-embed-text", None, "http://localhost:11434/v1", None)
    assert isinstance(ollama, OpenAIEmbedder) and ollama.url == "http://localhost:11434/v1/embeddings"


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_fake_embedder_is_deterministic_unit_length_and_word_sensitive():
    embedder = FakeEmbedder(dimensions=64)
    garden, garden_again, tax = await embedder.embed(["the garden bees", "bees in the garden", "tax return"])
    assert await FakeEmbedder(dimensions=64).embed(["the garden bees"]) == [garden]
    assert all(math.isclose(cosine(v, v), 1.0) for v in (garden, tax))
    assert cosine(garden, garden_again) > cosine(garden, tax)
    assert embedder.calls == [["the garden bees", "bees in the garden", "tax return"]]
    assert len(embedder.vector("")) == 64


async def test_fake_embedder_can_play_an_unavailable_one():
    embedder = FakeEmbedder(unavailable="simulated outage")
    with pytest.raises(EmbeddingUnavailable, match="simulated outage"):
        await embedder.embed(["x"])


# The local model's tests are in tests/test_local_model.py.
