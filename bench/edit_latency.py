"""Edit-to-searchable latency of live sync, and the idle CPU of the watching process.

    .venv/bin/python bench/edit_latency.py --notes 2000 --edits 50 --idle 10
    .venv/bin/python bench/edit_latency.py --notes 2000 --edits 50 --idle 0 --embedder local   # while backfilling

Generates a vault (bench/vaultgen.py), runs `live_sync` on it as the server's lifespan does, waits for the
start-up catch-up, then edits real note files the way an editor saves in place (append a unique nonsense
word) and polls full-text search until the word is findable. The FTS table is queried directly (the same
`chunks_fts` the search service ranks), so the figure is watcher + debounce + reconcile + indexing.

Targets: median <= 300 ms, p95 <= 1 s, idle CPU < 1% of one core. Figures go to stdout; logs to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import resource
import statistics
import string
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from bench.vaultgen import generate_vault  # noqa: E402
from server.embeddings.worker import embedding_worker  # noqa: E402
from server.live import LiveSync, live_sync  # noqa: E402
from server.runtime import Runtime, open_runtime  # noqa: E402
from server.settings import Settings  # noqa: E402

POLL = 0.005  # seconds between search polls
TIMEOUT = 10.0  # give up on one edit after this long


def nonsense_word(rng: random.Random) -> str:
    """A word no generated note contains (vaultgen's syllables never contain 'q' or 'x')."""
    return "qx" + "".join(rng.choice(string.ascii_lowercase) for _ in range(10))


async def findable(rt: Runtime, word: str) -> bool:
    sql = "select rowid from chunks_fts where chunks_fts match ? limit 1"
    return bool(await rt.store.read(lambda c: c.execute(sql, (f'"{word}"',)).fetchall()))


async def one_edit(rt: Runtime, path: Path, word: str) -> float:
    """Append `word` to the note in place and return the seconds until search finds it."""
    start = time.perf_counter()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"\nAdded while benchmarking: {word}.\n")
    while not await findable(rt, word):
        if time.perf_counter() - start > TIMEOUT:
            raise TimeoutError(f"{word} not searchable after {TIMEOUT} s")
        await asyncio.sleep(POLL)
    return time.perf_counter() - start


async def idle_cpu(seconds: float) -> float:
    """Percent of one core this process used (all threads) while idle for `seconds`."""
    before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    await asyncio.sleep(seconds)
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - wall
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return 100.0 * used / wall


async def run(root: Path, notes: int, edits: int, idle: float, seed: int, embedder: str) -> None:
    vault = root / "vault"
    started = time.perf_counter()
    paths = generate_vault(vault, notes, seed)
    print(f"vault: {len(paths)} notes generated in {time.perf_counter() - started:.1f} s")
    settings = Settings(vault=vault, db_path=root / "graph.db", embedding_provider=embedder)
    async with open_runtime(settings) as rt, live_sync(rt) as live:
        await catch_up(live)
        async with AsyncExitStack() as stack:
            if embedder != "none":  # the edits are measured while the background backfill runs
                await stack.enter_async_context(embedding_worker(rt))
                await wait_for_backfill_start(rt)
            rng = random.Random(seed)
            latencies = []
            for _ in range(edits):
                latencies.append(await one_edit(rt, rng.choice(paths), nonsense_word(rng)))
                await live.wait_idle(TIMEOUT)  # one edit at a time, as a person types
            report_latency(latencies)
            if embedder != "none":
                print(f"backfill during the edits: {rt.state.get('embedder_status')}")
        cpu = await idle_cpu(idle)
        print(f"idle CPU over {idle:.0f} s while watching: {cpu:.2f}% of one core (target < 1%)")


async def wait_for_backfill_start(rt: Runtime) -> None:
    """Until the model is loaded and the first passages are stored (the backfill is under way)."""
    while not (rt.state.get("embedder_status") or {}).get("embedded"):  # type: ignore[union-attr]
        await asyncio.sleep(POLL)
    print(f"backfill under way: {rt.state.get('embedder_status')}")


async def catch_up(live: LiveSync) -> None:
    started = time.perf_counter()
    await live.wait_idle(timeout=3600)
    print(f"start-up catch-up (ids injected into every note): {time.perf_counter() - started:.1f} s")


def report_latency(latencies: list[float]) -> None:
    ms = sorted(1000 * s for s in latencies)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(
        f"edit -> searchable over {len(ms)} edits: median {statistics.median(ms):.0f} ms, "
        f"p95 {p95:.0f} ms, min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms (targets: median <= 300, p95 <= 1000)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Edit-to-searchable latency of live sync.")
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measurement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="none", help="run the embedding backfill during the edits")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="engrama-bench-") as tmp:
        asyncio.run(run(Path(tmp), args.notes, args.edits, args.idle, args.seed, args.embedder))


if __name__ == "__main__":
    main()
