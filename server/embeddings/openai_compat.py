"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint: OpenAI, Ollama, LM Studio, llama.cpp, vLLM.

The request is the common subset every one of them accepts: `{"model": ..., "input": [texts]}`. The size is not
sent (the `dimensions` field is OpenAI-only and vLLM rejects it for most models); a configured size is checked
against the answer instead, and an unconfigured one is learned from the first answer. Transient failures
(timeouts, connection errors, 429 and 5xx) are retried with exponential backoff; anything else becomes an
EmbeddingUnavailable whose message says what to fix.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from server.embeddings.base import EmbeddingUnavailable

if TYPE_CHECKING:  # imported where used: ~1.6 MB (with click and pygments) in every server without it
    import httpx

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


class OpenAIEmbedder:
    """Async client for an OpenAI-compatible embeddings endpoint (one httpx client, opened on first use)."""

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
    ):
        if batch_size < 1 or retries < 0 or timeout <= 0:
            raise ValueError("batch_size must be positive, retries not negative and timeout positive")
        self.model = model
        self.dimensions = dimensions
        self.url = base_url.rstrip("/") + "/embeddings"
        self.batch_size = batch_size
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client: httpx.AsyncClient | None = None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for `texts`, `batch_size` per request, in input order."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        # OpenAI rejects an empty string as input; a space embeds as "nothing" everywhere.
        payload = {"model": self.model, "input": [text if text.strip() else " " for text in batch]}
        body = await self._post_with_retries(payload)
        return self._vectors_from(body, len(batch))

    async def _post_with_retries(self, payload: dict[str, Any]) -> Any:
        import httpx

        client = self._client_for_use()
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = await client.post(self.url, json=payload)
            except httpx.TimeoutException:
                problem = f"no answer within {self.timeout:g}s"
                continue
            except httpx.TransportError as exc:
                problem = f"cannot connect ({exc.__class__.__name__}: {exc})"
                continue
            if response.status_code == 429 or response.status_code >= 500:
                problem = f"HTTP {response.status_code}: {_error_text(response)}"
                continue
            if response.status_code >= 400:
                raise EmbeddingUnavailable(self._client_error(response))
            try:
                return response.json()
            except ValueError as exc:
                raise EmbeddingUnavailable(f"embedding endpoint {self.url} did not answer with JSON") from exc
        raise EmbeddingUnavailable(
            f"embedding endpoint {self.url} failed after {self.retries + 1} attempts: {problem}; "
            "check that the server is running, or set EMBEDDING_PROVIDER=none"
        )

    def _client_for_use(self) -> httpx.AsyncClient:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=self._headers)
        return self._client

    def _client_error(self, response: httpx.Response) -> str:
        hint = {
            401: "check OPENAI_API_KEY",
            403: "check OPENAI_API_KEY",
            404: f"check OPENAI_BASE_URL (it should end in /v1) and that model {self.model!r} exists",
        }.get(response.status_code, f"check EMBEDDING_MODEL ({self.model!r})")
        return f"embedding endpoint {self.url} refused: HTTP {response.status_code}: {_error_text(response)}; {hint}"

    def _vectors_from(self, body: Any, expected: int) -> list[list[float]]:
        """Validate an answer: one item per input, indexes 0..n-1, every vector the same known size."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise EmbeddingUnavailable(
                f"embedding endpoint {self.url} returned {got} vectors for {expected} texts"
            )
        try:
            items = sorted(data, key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in items]
            indexes = [item["index"] for item in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingUnavailable(
                f"embedding endpoint {self.url} returned malformed data ({exc.__class__.__name__}: {exc}); "
                "is it OpenAI-compatible?"
            ) from exc
        if indexes != list(range(expected)):
            raise EmbeddingUnavailable(f"embedding endpoint {self.url} returned indexes {indexes[:8]}...")
        for vector in vectors:
            self._check_size(vector)
        return vectors

    def _check_size(self, vector: list[float]) -> None:
        if not vector:
            raise EmbeddingUnavailable(f"embedding model {self.model!r} returned an empty vector")
        if self.dimensions is None:
            self.dimensions = len(vector)
            log.info("embedding model %s gives %d-dimensional vectors", self.model, self.dimensions)
        if len(vector) != self.dimensions:
            raise EmbeddingUnavailable(
                f"embedding model {self.model!r} returned {len(vector)}-dimensional vectors but "
                f"{self.dimensions} are expected; set EMBEDDING_DIMENSIONS={len(vector)} and rebuild the index, "
                "or use the model the index was built with"
            )
        if not all(math.isfinite(x) for x in vector):
            raise EmbeddingUnavailable(
                f"embedding model {self.model!r} returned a vector with NaN or infinity"
            )


def _error_text(response: httpx.Response) -> str:
    """The server's own error message (OpenAI style `{"error": {"message": ...}}`), or the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:200]
    if isinstance(error, str):
        return error[:200]
    return str(body)[:200]
