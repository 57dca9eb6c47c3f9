"""Search latency over a generated vault, through the product's own path (VaultSync, then search()).

    python bench/search_bench.py --notes 10000                     # full text, then hybrid (fake embedder)
    python bench/search_bench.py --notes 10000 --mode small-vocab --embedder none   # the common-word corpus
    python bench/search_bench.py --notes 10000 --embedder local --dimensions 128   # the offline model

Generates a vault with bench/vaultgen.py in a temporary folder, syncs it with the real VaultSync into a real
SQLite file, embeds every passage when an embedder is chosen, then times ~200 queries of 2-5 words drawn from
the notes' own text (so they match), each asked as the MCP tool asks it. Reports median and p95.
Targets (issue #6): median <= 20 ms full text, <= 50 ms hybrid, on 10,000 notes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vaultgen import MODES, generate_vault  # noqa: E402

from server.embeddings import make_embedder  # noqa: E402
from server.embeddings.worker import attach_embedder, embed_pending  # noqa: E402
from server.runtime import open_runtime  # noqa: E402
from server.search.service import DEFAULT_TUNING, run_search, search  # noqa: E402
from server.settings import Settings  # noqa: E402
from server.store.search_sql import NodeFilter  # noqa: E402

WORD = re.compile(r"[a-z]{3,}")


def draw_queries(paths: list[Path], count: int, seed: int) -> list[str]:
    """`count` queries of 2-5 consecutive-ish words taken from random notes' bodies."""
    rng = random.Random(seed)
    queries = []
    for path in rng.sample(paths, count):
        words = WORD.findall(path.read_text(encoding="utf-8").split("---", 2)[-1].lower())
        start = rng.randrange(max(1, len(words) - 10))
        queries.append(" ".join(rng.sample(words[start : start + 10], k=min(len(words), rng.randint(2, 5)))))
    return queries


async def time_queries(rt, queries: list[str]) -> tuple[float, float, str]:
    await search(rt, queries[0])  # warm caches once, as a running server would be
    seconds, modes = [], set()
    for q in queries:
        started = time.perf_counter()
        response = await search(rt, q)
        seconds.append(time.perf_counter() - started)
        modes.add(response.search_mode)
    seconds.sort()
    return statistics.median(seconds) * 1000, seconds[int(0.95 * (len(seconds) - 1))] * 1000, "/".join(modes)


async def compare(rt, queries: list[str]) -> None:
    """Full text with and without the second-passage evidence, interleaved so machine noise hits both."""
    base = replace(DEFAULT_TUNING, fulltext=replace(DEFAULT_TUNING.fulltext, second_passage=0.0))
    times: dict[str, list[float]] = {"default": [], "best passage only": []}
    for _ in range(2):
        for name, tuning in (("default", DEFAULT_TUNING), ("best passage only", base)):
            for q in queries:
                started = time.perf_counter()
                await run_search(rt, q, NodeFilter(), 10, False, tuning)
                times[name].append(time.perf_counter() - started)
    for name, seconds in times.items():
        seconds.sort()
        print(
            f"  {name}: median {statistics.median(seconds) * 1000:.1f} ms, "
            f"p95 {seconds[int(0.95 * (len(seconds) - 1))] * 1000:.1f} ms"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description="search latency benchmark")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--embedder",
        choices=("fake", "local", "none"),
        default="fake",
        help="embedder for the hybrid run (none: full text only)",
    )
    parser.add_argument("--dimensions", type=int, help="vector size (local: 64, 128 or 256; fake: any)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=MODES, default="realistic", help="the generated vault's corpus")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also time full text without the second-passage evidence, interleaved (A B A B)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "vault"
        paths = generate_vault(vault, args.notes, args.seed, args.mode)
        queries = draw_queries(paths, args.queries, args.seed)
        settings = Settings(
            vault=vault, db_path=Path(tmp) / "graph.db", embedding_provider=args.embedder, watch=False
        )
        async with open_runtime(settings) as rt:
            started = time.perf_counter()
            await rt.require_sync().sync_vault()
            print(f"{args.notes} notes synced in {time.perf_counter() - started:.1f}s")
            counts = await rt.store.counts()
            print(f"graph: {counts}")
            median, p95, mode = await time_queries(rt, queries)
            print(f"full text: {len(queries)} queries, median {median:.1f} ms, p95 {p95:.1f} ms [{mode}]")
            if args.compare:
                await compare(rt, queries)
            dims = args.dimensions or (256 if args.embedder == "fake" else None)
            embedder = make_embedder(args.embedder, dimensions=dims)
            if embedder is None:
                return
            started = time.perf_counter()
            count = await embed_pending(rt, embedder, batch_size=512)
            print(
                f"embedded {count} passages with {args.embedder} ({embedder.dimensions} dimensions) "
                f"in {time.perf_counter() - started:.1f}s"
            )
            await attach_embedder(rt, embedder)
            median, p95, mode = await time_queries(rt, queries)
            print(f"hybrid:    {len(queries)} queries, median {median:.1f} ms, p95 {p95:.1f} ms [{mode}]")
            await embedder.aclose()


if __name__ == "__main__":
    asyncio.run(main())
