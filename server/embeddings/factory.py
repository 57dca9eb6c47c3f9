"""Build the configured embedder from settings values (flags > env > defaults are resolved by the caller)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from server.embeddings.base import Embedder
from server.embeddings.fake import FakeEmbedder
from server.embeddings.local import LocalEmbedder, local_available
from server.embeddings.openai_compat import DEFAULT_BASE_URL, DEFAULT_OPENAI_MODEL, OpenAIEmbedder

if TYPE_CHECKING:
    from server.settings import Settings

PROVIDERS = ("auto", "none", "openai", "local", "fake")


def configured_embedder(settings: Settings) -> Embedder | None:
    """The embedder `settings` choose (flags > environment > defaults, already resolved), or None."""
    return make_embedder(
        settings.embedding_provider,
        settings.embedding_model,
        settings.embedding_dimensions,
        settings.openai_base_url,
        settings.openai_api_key,
    )


def make_embedder(
    provider: str,
    model: str | None = None,
    dimensions: int | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
) -> Embedder | None:
    """The embedder for `provider`, or None for "none" (search then stays full text).

    "openai" talks to `base_url` (default: OpenAI's own API, where `model` defaults to text-embedding-3-small;
    any other endpoint, such as Ollama's http://localhost:11434/v1, needs `model`). "local" runs the offline
    model of the `local` extra (all-MiniLM-L6-v2 int8); "auto" is "local" when that extra is installed, else
    "none"; "fake" is the deterministic test embedder. Building one never does I/O: the first `embed` call
    connects or loads.
    """
    name = (provider or "none").strip().lower()
    if dimensions is not None and dimensions < 1:
        raise ValueError(f"embedding dimensions must be positive, not {dimensions}")
    if name == "auto":
        name = "local" if local_available() else "none"
    if name == "none":
        return None
    if name == "openai":
        url = base_url or DEFAULT_BASE_URL
        if model is None:
            if url.rstrip("/") != DEFAULT_BASE_URL:
                raise ValueError(
                    f"EMBEDDING_MODEL is required for the endpoint {url} (for Ollama, e.g. nomic-embed-text)"
                )
            model = DEFAULT_OPENAI_MODEL
        return OpenAIEmbedder(model, base_url=url, api_key=api_key, dimensions=dimensions)
    if name == "local":
        return LocalEmbedder(dimensions)
    if name == "fake":
        return FakeEmbedder(dimensions or 32, model=model or "fake-hash")
    raise ValueError(f"unknown embedding provider {provider!r}; use one of {', '.join(PROVIDERS)}")
