"""Reflect reads and matches the graph in a child process (issue 15): the same insights as in-process, the
server never loading the graph, and a clear error (nothing written) when the child dies. Real vaults
(bench/vaultgen.py), real SQLite files, real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_reflect_support import synced

from bench.vaultgen import generate_vault
from server.reflect import worker
from server.reflect.patterns import PATTERN_NAMES
from server.reflect.service import ReflectError, note_remembered, reflect
from server.runtime import Runtime
from server.store import insights_sql

NOTES = 400  # typed notes with relations: every pattern but the rare ones finds something


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    generate_vault(vault, NOTES, seed=4)
    async with synced(vault, db_path) as runtime:
        yield runtime


async def in_process(rt: Runtime, now: float) -> worker.Found:
    """What the server computed in its own heap before the child: the snapshot, the graph, the patterns."""
    known = await rt.store.read(insights_sql.statuses)
    nodes, edges = await rt.store.read(insights_sql.snapshot)
    return worker.find(nodes, edges, PATTERN_NAMES, now, known)


async def pending(rt: Runtime) -> set[tuple[Any, ...]]:
    rows = await rt.store.read(insights_sql.pending_insights)
    return {(r.key, r.id, r.pattern, r.title, r.body, r.confidence, r.entities) for r in rows}


async def test_the_child_finds_what_the_server_found_in_process(rt: Runtime) -> None:
    now = time.time()
    expected = await in_process(rt, now)
    got = await worker.find_insights(rt.store, PATTERN_NAMES, now, await rt.store.read(insights_sql.statuses))
    assert len(expected.ran) >= 3 and len(expected.proposals) >= 20  # a graph that gives reflect work
    assert got == expected


async def test_reflect_keeps_the_insights_the_in_process_computation_proposes(rt: Runtime) -> None:
    expected = await in_process(rt, time.time())
    result = await reflect(rt)
    assert result.created == len(expected.proposals) and result.skipped_patterns == expected.skipped
    assert await pending(rt) == {
        (p.key, p.id, p.pattern, p.title, p.body, p.confidence, p.entities) for p in expected.proposals
    }


async def test_the_server_never_reads_or_builds_the_graph_itself(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_snapshot, real_find = insights_sql.snapshot, worker.find

    def snapshot(conn: Any) -> Any:
        calls.append("snapshot")
        return real_snapshot(conn)

    def find(*args: Any) -> worker.Found:
        calls.append("find")
        return real_find(*args)

    monkeypatch.setattr(insights_sql, "snapshot", snapshot)
    monkeypatch.setattr(worker, "find", find)
    tracemalloc.start()
    try:
        result = await reflect(rt)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await in_process(rt, time.time())  # what holding the graph costs this process
        _, graph_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.created > 0
    assert calls == ["snapshot", "find"]  # only the in-process computation above, none by reflect
    assert peak < graph_peak / 3


def _die(*args: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does


async def test_a_child_that_dies_fails_reflect_clearly_and_writes_nothing(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        await note_remembered(rt)
    monkeypatch.setattr(worker, "_called_in_child", _die)
    with pytest.raises(ReflectError, match=r"killed by SIGKILL \(out of memory\?\).*nothing was written"):
        await asyncio.wait_for(reflect(rt), timeout=60)
    assert await pending(rt) == set()
    assert await rt.store.read(insights_sql.read_counter, "reflect.remembers_since_last") == 3
    monkeypatch.undo()
    assert (await reflect(rt)).created > 0  # the next run works


async def test_a_child_that_cannot_start_fails_reflect_clearly(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "BOOT", "import sys; sys.exit(3)")  # e.g. a broken install
    with pytest.raises(ReflectError, match="exit code 3.*nothing was written; run engrama_reflect again"):
        await asyncio.wait_for(reflect(rt), timeout=60)
    assert await pending(rt) == set()


def _hang(*args: Any) -> None:
    time.sleep(600)


def _children() -> list[str]:
    """The command lines of this process's child processes (Linux)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if f"PPid:\t{os.getpid()}\n" in status.read_text():
                found.append((status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # gone meanwhile
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
async def test_a_cancelled_reflect_ends_its_child_at_once(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker, "_called_in_child", _hang)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reflect(rt), timeout=2)  # e.g. the client cancelled the tool call
    assert time.monotonic() - started < 30
    assert not [c for c in _children() if "server.reflect.worker" in c]
    assert await pending(rt) == set()
