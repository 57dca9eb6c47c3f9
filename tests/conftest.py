"""Shared fixtures: real temporary vaults and real SQLite files, never mocks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import vault_sync.reconcile
from server.live import LiveSync, live_sync
from server.runtime import Runtime, open_runtime
from server.settings import Settings
from server.store import GraphStore

# Most tests write a note and reconcile it at once, then look for its engrama_id line. In production a note
# changed in the last few seconds is indexed but not written to until it has been quiet (DEFAULT_SETTLE), so
# an editor saving it is never raced. Tests of that rule set the window themselves (tests/test_settle.py);
# everything else runs without it in-process and in `engrama-vault` commands run with the test's environment.
# Servers spawned through the MCP SDK's stdio_client get only HOME, PATH and a few more unless the test passes
# `env=`: those run with the production window, as a person's client would start them.
SETTLE_FOR_TESTS = "0"


@pytest.fixture(autouse=True)
def _no_settle_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vault_sync.reconcile, "DEFAULT_SETTLE", float(SETTLE_FOR_TESTS))
    monkeypatch.setenv("ENGRAMA_SETTLE_SECONDS", SETTLE_FOR_TESTS)


# With the `local` extra installed (CI installs `.[test,local]`), the default provider "auto" would load the
# MiniLM model in every test and every server a test spawns. Tests run without an embedder unless they choose
# one: this covers in-process settings and commands run with the test's environment; servers spawned through
# stdio_client without `env=` get `--embedding-provider none` from tests/test_e2e_stdio.serve_args.


@pytest.fixture(autouse=True)
def _no_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "none")


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "graph.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[GraphStore]:
    graph = await GraphStore.open(db_path)
    try:
        yield graph
    finally:
        await graph.close()


@pytest.fixture
async def watched(vault: Path, db_path: Path) -> AsyncIterator[tuple[Runtime, LiveSync]]:
    """A runtime over `vault` with its live sync running (the real watcher, a 50 ms window), caught up."""
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt, live_sync(rt, quiet=0.05) as live:
        await live.wait_idle()
        yield rt, live
