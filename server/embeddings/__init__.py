"""Embedders: one small async interface, four providers (none, openai, local, fake) and a factory."""

from server.embeddings.base import Embedder, EmbeddingUnavailable, normalized
from server.embeddings.factory import PROVIDERS, configured_embedder, make_embedder
from server.embeddings.fake import FakeEmbedder
from server.embeddings.local import INSTALL_HINT, LocalEmbedder, local_available
from server.embeddings.openai_compat import DEFAULT_BASE_URL, OpenAIEmbedder

__all__ = [
    "DEFAULT_BASE_URL",
    "INSTALL_HINT",
    "PROVIDERS",
    "configured_embedder",
    "Embedder",
    "EmbeddingUnavailable",
    "FakeEmbedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "local_available",
    "make_embedder",
    "normalized",
]
