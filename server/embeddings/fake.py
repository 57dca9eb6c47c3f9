"""A deterministic embedder for tests: no model, no network, same vector for the same words every run.

Each word (lower-cased `\\w+` run) is hashed to one dimension and a sign; a text's vector is the sum over its
words, scaled to unit length. Texts that share words are therefore close, which is enough for tests of
storage, fusion and degradation. `unavailable` makes every call fail, to test the full-text fallback.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from server.embeddings.base import EmbeddingUnavailable, normalized

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """Hashes words into a `dimensions`-sized vector; records every batch it was asked for in `calls`."""

    name = "fake"

    def __init__(self, dimensions: int = 32, *, model: str = "fake-hash", unavailable: str | None = None):
        if dimensions < 2:
            raise ValueError("the fake embedder needs at least 2 dimensions")
        self.model = model
        self.dimensions: int | None = dimensions
        self.unavailable = unavailable  # a reason string makes embed() raise EmbeddingUnavailable(reason)
        self.calls: list[list[str]] = []
        self.closed = False

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text; the same text always gets the same vector."""
        if self.unavailable is not None:
            raise EmbeddingUnavailable(self.unavailable)
        self.calls.append(list(texts))
        return [self.vector(text) for text in texts]

    def vector(self, text: str) -> list[float]:
        """The vector of one text, synchronously (handy for expected values in tests)."""
        size = self.dimensions or 2
        vector = [0.0] * size
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % size
            vector[slot] += 1.0 if digest[4] & 1 else -1.0
        if not any(vector):
            vector[0] = 1.0  # a text without words still needs a unit vector
        return normalized(vector)

    async def aclose(self) -> None:
        self.closed = True
