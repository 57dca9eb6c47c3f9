"""Benchmark the MCP server as a client sees it: spawn-to-initialized time, tool round trips and memory.

    python bench/server_bench.py --notes 10000
    python bench/server_bench.py --notes 10000 --mode small-vocab --session   # RSS through a session

Generates a realistic vault (bench/vaultgen.py) in a temporary folder (or uses --vault), syncs it once with
`engrama-vault sync`, then spawns the installed `engrama-vault serve` with the SDK's stdio client:

- spawn -> initialize answered, median of --spawns runs (the start-up catch-up of the big vault runs in the
  background and must not delay it; the issue's target is under 2 s);
- the round trip of `engrama_search` (median and p90 over --queries queries built from the vault's own
  words) and of `engrama_status` for comparison;
- with --session: the server's RSS (and that of its whole process tree) after start-up (initialized and
  the start-up catch-up done), after its first search, after 50 and after 200 searches, and the first
  search's round trip against the median of later ones (cold start, issue 15).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_bench import rss_kib, tree  # noqa: E402
from vaultgen import MODES, generate_vault  # noqa: E402

COMMAND = str(Path(sys.executable).parent / "engrama-vault")


def sync_once(vault: Path, db: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [COMMAND, "sync", "--vault", str(vault), "--db", str(db)], capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"sync failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def sample_queries(vault: Path, count: int, seed: int = 1) -> list[str]:
    """Queries of 2-5 words drawn from note bodies, so most of them match something."""
    rng = random.Random(seed)
    notes = sorted(vault.rglob("*.md"))
    queries = []
    for path in rng.sample(notes, k=min(count, len(notes))):
        words = [w.strip(".,[]|#!") for w in path.read_text(encoding="utf-8").split("---")[-1].split()]
        words = [w for w in words if w.isalpha()]
        queries.append(" ".join(rng.sample(words, k=min(len(words), rng.randint(2, 5)))))
    return queries


async def spawn_to_initialized(params: StdioServerParameters) -> float:
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return time.perf_counter() - started


async def round_trips(params: StdioServerParameters, queries: list[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"search": [], "status": []}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("engrama_search", {"query": "warm up"})
        for query in queries:
            started = time.perf_counter()
            result = await session.call_tool("engrama_search", {"query": query})
            times["search"].append(time.perf_counter() - started)
            if result.is_error:
                raise SystemExit(f"search failed: {result.content}")
        for _ in range(20):
            started = time.perf_counter()
            await session.call_tool("engrama_status", {})
            times["status"].append(time.perf_counter() - started)
    return times


def _server_pid(command: str = COMMAND) -> int:
    """The spawned server: this process's one `engrama-vault` (or `command`) child."""
    name = Path(command).name
    kids = [pid for pid in tree(os.getpid())[1:] if name in _cmdline(pid) and " serve " in _cmdline(pid)]
    if not kids:
        raise SystemExit("cannot find the server process in /proc (Linux only)")
    return kids[0]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _rss_mib(pid: int) -> dict[str, float]:
    return {
        "server_mib": round(rss_kib(pid) / 1024, 1),
        "tree_mib": round(sum(rss_kib(p) for p in tree(pid)) / 1024, 1),
    }


async def _caught_up(session: ClientSession, timeout: float = 600.0) -> None:
    """Wait until the start-up catch-up is done (status reports a last reconcile and nothing pending)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = (await session.call_tool("engrama_status", {})).structured_content or {}
        vault = status.get("vault", {})
        if vault.get("last_reconcile_at") and not vault.get("pending"):
            return
        await asyncio.sleep(0.2)
    raise SystemExit("the start-up catch-up did not finish in time")


async def session_memory(params: StdioServerParameters, queries: list[str]) -> dict[str, object]:
    """RSS after start-up, after the first search, after 50 and after 200 searches; first vs later search."""
    marks: dict[str, object] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await _caught_up(session)
        pid = _server_pid()
        await asyncio.sleep(1.0)  # let the warm-up after start-up finish before the first sample
        marks["after_start"] = _rss_mib(pid)
        seconds = []
        for count, query in enumerate((queries * (1 + 200 // max(1, len(queries))))[:200], start=1):
            started = time.perf_counter()
            result = await session.call_tool("engrama_search", {"query": query})
            seconds.append(time.perf_counter() - started)
            if result.is_error:
                raise SystemExit(f"search failed: {result.content}")
            if count in (1, 50, 200):
                marks[f"after_{count}_searches"] = _rss_mib(pid)
        marks["first_search_ms"] = round(1000 * seconds[0], 1)
        marks["later_searches"] = _ms(seconds[1:])
    return marks


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(1000 * statistics.median(ordered), 2),
        "p90_ms": round(1000 * ordered[int(0.9 * (len(ordered) - 1))], 2),
    }


async def bench(
    vault: Path, db: Path, spawns: int, queries: int, session: bool, embedder: str
) -> dict[str, object]:
    sync_seconds = sync_once(vault, db)
    params = StdioServerParameters(
        command=COMMAND,
        args=["serve", "--vault", str(vault), "--db", str(db), "--embedding-provider", embedder],
    )
    extra: dict[str, object] = {}
    if session:
        extra["session_memory"] = await session_memory(params, sample_queries(vault, 200, seed=2))
    starts = [await spawn_to_initialized(params) for _ in range(spawns)]
    times = await round_trips(params, sample_queries(vault, queries))
    return {
        "notes": sum(1 for _ in vault.rglob("*.md")),
        "first_sync_s": round(sync_seconds, 2),
        **extra,
        "spawn_to_initialized_s": {
            "median": round(statistics.median(starts), 3),
            "max": round(max(starts), 3),
            "runs": spawns,
        },
        "search_round_trip": {**_ms(times["search"]), "queries": len(times["search"])},
        "status_round_trip": _ms(times["status"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--vault", type=Path, help="use this vault instead of generating one")
    parser.add_argument("--spawns", type=int, default=5)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--mode", choices=MODES, default="realistic", help="the generated vault's corpus")
    parser.add_argument("--db", type=Path, help="use (and keep) this database instead of a temporary one")
    parser.add_argument("--session", action="store_true", help="also report RSS through a session")
    parser.add_argument(
        "--embedder", default="none", help="the server's --embedding-provider (default none: a plain install)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engrama-server-bench-") as tmp:
        vault = args.vault or Path(tmp) / "vault"
        if args.vault is None:
            generate_vault(vault, args.notes, mode=args.mode)
        db = args.db or Path(tmp) / "graph.db"
        result = asyncio.run(bench(vault, db, args.spawns, args.queries, args.session, args.embedder))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
