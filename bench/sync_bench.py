# pyright: reportAttributeAccessIssue=false
# (sqlean re-exports its names from a compiled module without type stubs, so pyright cannot see them.)
"""Benchmark the vault sync: first full sync and re-sync of an unchanged vault, through `engrama-vault sync`.

    python bench/sync_bench.py --notes 10000

Generates a realistic vault (bench/vaultgen.py) in a temporary folder, then runs the real command in a
child process three times: first sync (ids inserted into every note), unchanged re-sync, and re-sync after
the database is deleted (rebuild from the vault). Reports wall time, notes/s, the peak memory of the biggest
process, and (Linux) the peak of the whole process tree: a big sync reads notes in worker processes.
Targets (issue #3): first sync >= 500 notes/s without embeddings; unchanged re-sync <= 2 s.
Also prints the load average before each run: on a shared machine, compare runs made back to back, and at the
end where the database's bytes go (the largest tables and indexes, from SQLite's dbstat).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import sqlean

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vaultgen import MODES, generate_vault  # noqa: E402

COMMAND = [str(Path(sys.executable).parent / "engrama-vault"), "sync", "--json"]


def run_sync(vault: Path, db: Path, command: str | None = None) -> tuple[float, dict, int, int]:
    """One `engrama-vault sync` (or `command sync`) in a child: (seconds, report, peak RSS in MiB of the
    main process, peak RSS in MiB of the child and its workers together). Where /proc cannot tell, the
    biggest process's peak (getrusage: over every child this process has waited for) and 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    child = subprocess.Popen(
        [*([command] if command else COMMAND[:1]), *COMMAND[1:], "--vault", str(vault), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tree_peak = [0, 0]  # the tree's, the main process's
    watcher = threading.Thread(target=_watch_tree, args=(child, tree_peak), daemon=True)
    watcher.start()
    out, err = child.communicate()
    seconds = time.perf_counter() - started
    watcher.join()
    if child.returncode not in (0, 1):
        raise SystemExit(f"sync failed: {err[-2000:]}")
    peak = tree_peak[1] or max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
    return seconds, json.loads(out), peak // 1024, tree_peak[0] // 1024


def _watch_tree(child: subprocess.Popen, peak: list[int]) -> None:
    """Sample the summed RSS (KiB) of `child` and its descendants, and that of `child` alone, every 20 ms
    until it exits."""
    while child.poll() is None:
        peak[0] = max(peak[0], sum(rss_kib(pid) for pid in tree(child.pid)))
        peak[1] = max(peak[1], rss_kib(child.pid))
        time.sleep(0.02)


def tree(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for kid in kids for p in tree(int(kid)))]


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description="vault sync benchmark")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", choices=MODES, default="realistic", help="the generated vault's corpus")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, db = Path(tmp) / "vault", Path(tmp) / "graph.db"
        generate_vault(vault, args.notes, args.seed, args.mode)
        size = sum(p.stat().st_size for p in vault.rglob("*.md")) / 2**20
        print(f"vault: {args.notes} notes ({args.mode}), {size:.0f} MiB")
        print(f"load average before: {_load()}")
        first, report, peak, tree = run_sync(vault, db)
        print(
            f"first sync:     {first:6.2f} s  {args.notes / first:7.0f} notes/s  created={report['created']} "
            f"ids={len(report['ids_injected'])} errors={len(report['errors'])}  main process {peak} MiB "
            f"(all processes {tree} MiB)"
        )
        again, report, _, _ = run_sync(vault, db)
        print(f"unchanged sync: {again:6.2f} s  unchanged={report['unchanged']}")
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        rebuild, report, _, tree = run_sync(vault, db)
        print(
            f"rebuild (no db):{rebuild:6.2f} s  {args.notes / rebuild:7.0f} notes/s  created={report['created']}"
            f"  (all processes {tree} MiB)"
        )
        print(f"load average after: {_load()}")
        print(
            f"db size: {os.path.getsize(db) / 2**20:.0f} MiB ({os.path.getsize(db) / 2**20 / size:.2f}x the vault)"
        )
        print_breakdown(db, size * 2**20)


def print_breakdown(db: Path, vault_bytes: float, top: int = 12) -> None:
    """Where the database's bytes go: the largest tables and indexes (SQLite's dbstat), against the vault."""
    conn = sqlean.connect(str(db))
    try:
        rows = conn.execute(
            "select name, sum(pgsize) as bytes from dbstat group by name order by bytes desc limit ?", (top,)
        ).fetchall()
    finally:
        conn.close()
    for name, size in rows:
        print(f"  {name:32} {size / 2**20:8.1f} MiB  {size / vault_bytes:5.2f}x the vault")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
