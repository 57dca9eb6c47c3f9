"""Several server processes on one vault and one database: one writer, one graph, and a takeover on SIGKILL.

Each child is a real process running `open_runtime` + `live_sync`, as the MCP server's lifespan does; it
publishes its `rt.state` to a JSON file, which the test polls with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.store import GraphStore
from vault_sync.lease import lease_path

ROOT = Path(__file__).resolve().parents[1]
ID_LINE = re.compile(r"^engrama_id: (\S+)$", re.MULTILINE)

CHILD = """
import asyncio, contextlib, json, logging, os, signal, sys
from pathlib import Path
from server.live import live_sync
from server.runtime import open_runtime
from server.settings import Settings

async def main(vault, db, state_file):
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    settings = Settings(vault=Path(vault), db_path=Path(db))
    async with open_runtime(settings) as rt, live_sync(rt) as live:
        while not stop.is_set():
            temp = state_file + ".tmp"
            Path(temp).write_text(json.dumps({"pid": os.getpid(), **rt.state}), encoding="utf-8")
            os.replace(temp, state_file)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.05)

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
asyncio.run(main(*sys.argv[1:]))
"""


class Server:
    """One child server process and the state it publishes."""

    def __init__(self, name: str, vault: Path, db: Path, workdir: Path) -> None:
        self.state_file = workdir / f"{name}.json"
        self.log_file = workdir / f"{name}.log"
        with open(self.log_file, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(vault), str(db), str(self.state_file)],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=10)


@pytest.fixture
def servers(vault: Path, db_path: Path, tmp_path: Path) -> Iterator[Callable[[str], Server]]:
    started: list[Server] = []

    def start(name: str) -> Server:
        started.append(Server(name, vault, db_path, tmp_path))
        return started[-1]

    yield start
    for server in started:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        print(f"--- {server.log_file.name}\n{server.log_file.read_text(encoding='utf-8')}")


@pytest.fixture
async def graph(db_path: Path) -> AsyncIterator[Callable[[], Any]]:
    """Opens the shared database lazily (after the children created it), closes it at the end."""
    opened: list[GraphStore] = []

    async def get() -> GraphStore:
        if not opened:
            opened.append(await GraphStore.open(db_path))
        return opened[0]

    yield get
    for store in opened:
        await store.close()


async def eventually(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.05)


def note_ids(vault: Path) -> dict[str, list[str]]:
    return {
        p.relative_to(vault).as_posix(): ID_LINE.findall(p.read_text(encoding="utf-8"))
        for p in sorted(vault.rglob("*.md"))
    }


async def active_nodes(store: GraphStore) -> dict[str, str]:
    sql = "select path, id from nodes where status = 'active' and path is not null"
    return dict(await store.read(lambda c: c.execute(sql).fetchall()))


async def test_two_processes_make_one_id_per_note_and_one_graph(
    vault: Path, db_path: Path, servers: Callable[[str], Server], graph: Callable[[], Any]
) -> None:
    for i in range(30):
        (vault / f"Note {i}.md").write_text(
            f"# Note {i}\nlinks to [[Note {(i + 1) % 30}]]\n", encoding="utf-8"
        )
    first, second = servers("first"), servers("second")
    await eventually(
        lambda: {first.state().get("lease"), second.state().get("lease")} == {"holder", "follower"}
    )
    holder = first if first.state()["lease"] == "holder" else second
    await eventually(lambda: holder.state().get("last_reconcile_at") and holder.state()["pending"] == 0)
    ids = note_ids(vault)
    assert all(len(found) == 1 for found in ids.values()), ids  # never two engrama_id lines in one note
    store = await graph()
    assert await active_nodes(store) == {path: found[0] for path, found in ids.items()}  # one node per note
    assert int(lease_path(db_path).read_text(encoding="utf-8")) == holder.proc.pid
    assert first.stop() == 0 and second.stop() == 0
    assert lease_path(db_path).read_text(encoding="utf-8") == ""  # released cleanly on exit


async def test_a_follower_takes_over_when_the_holder_is_killed(
    vault: Path, db_path: Path, servers: Callable[[str], Server], graph: Callable[[], Any]
) -> None:
    (vault / "Before.md").write_text("# Before\n", encoding="utf-8")
    holder = servers("holder")
    await eventually(lambda: holder.state().get("lease") == "holder")
    follower = servers("follower")
    await eventually(lambda: follower.state().get("lease") == "follower")
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait(timeout=10)
    (vault / "Fresh.md").write_text("# Fresh\nwritten after the holder died\n", encoding="utf-8")
    await eventually(lambda: follower.state().get("lease") == "holder", timeout=5)
    store = await graph()
    await eventually(lambda: _has_path(store, "Fresh.md"), timeout=5)
    await eventually(lambda: len(note_ids(vault)["Fresh.md"]) == 1)
    assert int(lease_path(db_path).read_text(encoding="utf-8")) == follower.proc.pid
    assert follower.stop() == 0


async def _has_path(store: GraphStore, path: str) -> bool:
    return path in await active_nodes(store)
