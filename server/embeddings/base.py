"""The one interface every embedder satisfies, and the error that means "search without vectors"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable


class EmbeddingUnavailable(Exception):
    """The embedder cannot produce vectors right now; search degrades to full text and says why."""


@runtime_checkable
class Embedder(Protocol):
    """Turns passages and queries into vectors of one fixed dimension.

    `dimensions` is None until known: an OpenAI-compatible endpoint without a configured size reveals it in
    its first answer. Vectors are unit length when the model's are (the fake and local ones always are).
    """

    name: str  # the provider: "openai", "local", "fake"
    model: str
    dimensions: int | None

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; raises EmbeddingUnavailable with the reason when it cannot."""
        ...

    async def aclose(self) -> None:
        """Release connections or models; the embedder is not used afterwards."""
        ...


def normalized(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to unit length (a zero vector is returned unchanged)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)
