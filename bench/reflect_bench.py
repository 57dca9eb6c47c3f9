"""How long reflect takes on a big vault (target: under 5 s for 10,000 notes).

    .venv/bin/python bench/reflect_bench.py --notes 10000 [--work DIR]

Generates a typed vault with `bench/vaultgen.py` (relations in frontmatter, ~5 wikilinks per note), syncs it
into a real SQLite file with the real reconcile, then times reflect: the first run (every finding is new) and
a second run (every finding is already pending, the steady state). Syncing is not part of the figure. With
`--work DIR` the vault and database are kept there and reused, so a second bench run skips the sync.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.vaultgen import generate_vault  # noqa: E402
from server.reflect.service import reflect  # noqa: E402
from server.runtime import Runtime, open_runtime  # noqa: E402
from server.settings import build_settings  # noqa: E402


async def _prepare(rt: Runtime, vault: Path, notes: int) -> None:
    if not any(vault.glob("*/*.md")):
        started = time.perf_counter()
        generate_vault(vault, notes, seed=0)
        print(f"generated {notes} notes in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    started = time.perf_counter()
    report = await rt.require_sync().sync_vault()
    print(
        f"synced {report.scanned} notes ({report.created} new, {len(report.errors)} failed) "
        f"in {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )


async def _bench(work: Path, notes: int) -> list[float]:
    vault = work / "vault"
    vault.mkdir(parents=True, exist_ok=True)
    settings = build_settings({"vault": str(vault), "db": str(work / "graph.db"), "watch": False}, env={})
    timings = []
    async with open_runtime(settings) as rt:
        await _prepare(rt, vault, notes)
        counts = await rt.store.counts()
        print(
            f"graph: {counts.get('nodes_active', 0)} active nodes, {counts['edges']} open edges",
            file=sys.stderr,
        )
        for run in ("first", "second"):
            started = time.perf_counter()
            result = await reflect(rt)
            timings.append(time.perf_counter() - started)
            print(
                f"reflect ({run} run): {timings[-1]:.2f}s, {result.created} created, "
                f"{len(result.insights)} pending from this run, skipped: {result.skipped_patterns or 'none'}"
            )
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--work", type=Path, help="keep the vault and database here (reused next time)")
    args = parser.parse_args()
    if args.work:
        timings = asyncio.run(_bench(args.work, args.notes))
    else:
        with tempfile.TemporaryDirectory(prefix="reflect-bench-") as tmp:
            timings = asyncio.run(_bench(Path(tmp), args.notes))
    verdict = "OK" if max(timings) < 5.0 else "TOO SLOW"
    print(f"{verdict}: slowest reflect {max(timings):.2f}s on {args.notes} notes (target < 5 s)")


if __name__ == "__main__":
    main()
