"""Shared fixtures: real temporary vaults and real SQLite files, never mocks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.store import GraphStore


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
