"""Benchmark the vault sync: first full sync and re-sync of an unchanged vault, through `engrama-vault sync`.

    python bench/sync_bench.py --notes 10000

Generates a realistic vault (bench/vaultgen.py) in a temporary folder, then runs the real command in a
child process three times: first sync (ids inserted into every note), unchanged re-sync, and re-sync after
the database is deleted (rebuild from the vault). Reports wall time, notes/s and the child's peak memory.
Targets (issue #3): first sync >= 500 notes/s without embeddings; unchanged re-sync <= 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vaultgen import generate_vault  # noqa: E402

COMMAND = [str(Path(sys.executable).parent / "engrama-vault"), "sync", "--json"]


def run_sync(vault: Path, db: Path) -> tuple[float, dict, int]:
    """One `engrama-vault sync` in a child: (seconds, report, peak RSS in MiB of that child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [*COMMAND, "--vault", str(vault), "--db", str(db)], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"sync failed: {done.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, json.loads(done.stdout), max(peak, before) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description="vault sync benchmark")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, db = Path(tmp) / "vault", Path(tmp) / "graph.db"
        generate_vault(vault, args.notes, args.seed)
        size = sum(p.stat().st_size for p in vault.rglob("*.md")) / 2**20
        print(f"vault: {args.notes} notes, {size:.0f} MiB")
        first, report, peak = run_sync(vault, db)
        print(
            f"first sync:     {first:6.2f} s  {args.notes / first:7.0f} notes/s  created={report['created']} "
            f"ids={len(report['ids_injected'])} errors={len(report['errors'])}  peak RSS {peak} MiB"
        )
        again, report, _ = run_sync(vault, db)
        print(f"unchanged sync: {again:6.2f} s  unchanged={report['unchanged']}")
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        rebuild, report, _ = run_sync(vault, db)
        print(
            f"rebuild (no db):{rebuild:6.2f} s  {args.notes / rebuild:7.0f} notes/s  created={report['created']}"
        )
        print(f"db size: {os.path.getsize(db) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
