"""The scale curve (issue 15): one table of what a person feels at 1,000, 10,000 and 100,000 notes, on both corpora.

    python bench/scale.py                                   # 1,000 and 10,000 notes, both corpora
    python bench/scale.py --sizes 100000 --work /tmp/scale  # the big row (heavy: run it alone, niced)

For each size and corpus (bench/vaultgen.py: `realistic`, `small-vocab`), through the installed
`engrama-vault` as a person runs it, with no embedder (a plain install):

- first sync (`engrama-vault sync`, ids written into every note): notes/s, the peak RSS of its whole
  process tree (main process + reader processes) and of its main process;
- unchanged re-sync: seconds;
- database size: the file (and its WAL) against the vault's Markdown bytes;
- then one `engrama-vault serve` over stdio (the MCP SDK's client), after its start-up catch-up:
  search round trip median/p95 for common-word queries (three of the words most notes use) and rare-word
  queries (two words only a few notes use), edit to searchable (a new word appended to a note, until
  `engrama_search` finds that note), `engrama_reflect`'s round trip, and the server's RSS after start-up and
  its peak through the session.

With `--work DIR` vaults are generated once and kept (`DIR/<corpus>-<notes>/vault`), each run starts from a
fresh copy of the generated vault and a new database. `--out FILE` also writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_bench import COMMAND, _caught_up, _rss_mib, _server_pid  # noqa: E402
from sync_bench import run_sync  # noqa: E402
from vaultgen import MODES, generate_vault  # noqa: E402

WORD = re.compile(r"[a-z]{2,}")
SEARCHES = 60  # per kind of query
EDITS = 8
EDIT_TIMEOUT = 30.0


def vault_words(vault: Path, sample: int, seed: int) -> Counter[str]:
    """Document frequency of each body word over a sample of notes."""
    notes = sorted(vault.rglob("*.md"))
    counts: Counter[str] = Counter()
    for path in random.Random(seed).sample(notes, k=min(sample, len(notes))):
        body = path.read_text(encoding="utf-8").split("---", 2)[-1].lower()
        counts.update(set(WORD.findall(body)))
    return counts


def queries(counts: Counter[str], seed: int) -> tuple[list[str], list[str]]:
    """(common-word queries, rare-word queries), SEARCHES of each."""
    rng = random.Random(seed)
    ranked = [w for w, _ in counts.most_common() if w not in ("see", "details")]
    common = ranked[:30]
    rare = [w for w in ranked if counts[w] <= 2] or ranked[-30:]
    return (
        [" ".join(rng.sample(common, 3)) for _ in range(SEARCHES)],
        [" ".join(rng.sample(rare, 2)) for _ in range(SEARCHES)],
    )


def _ms(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return 1000 * statistics.median(ordered), 1000 * ordered[int(0.95 * (len(ordered) - 1))]


async def session(
    vault: Path, db: Path, common: list[str], rare: list[str], command: str = COMMAND
) -> dict[str, object]:
    """One served session: search, edit to searchable, reflect, RSS."""
    env = {**os.environ, "EMBEDDING_PROVIDER": "none"}
    params = StdioServerParameters(
        command=command, args=["serve", "--vault", str(vault), "--db", str(db)], env=env
    )
    row: dict[str, object] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        await _caught_up(client, timeout=7200)
        pid = _server_pid(command)
        await asyncio.sleep(1.0)  # the warm-up after start-up
        row["server_rss_start_mib"] = _rss_mib(pid)["server_mib"]
        peak = 0.0
        for kind, batch in (("common", common), ("rare", rare)):
            seconds = []
            for query in batch:
                started = time.perf_counter()
                await client.call_tool("engrama_search", {"query": query})
                seconds.append(time.perf_counter() - started)
                peak = max(peak, _rss_mib(pid)["server_mib"])
                if kind == "common" and len(seconds) == 50:
                    row["server_rss_50_searches_mib"] = _rss_mib(pid)["server_mib"]
            row[f"search_{kind}_median_ms"], row[f"search_{kind}_p95_ms"] = _ms(seconds)
        row["edit_to_searchable_median_ms"] = 1000 * statistics.median(
            [await edit_to_searchable(client, vault, i) for i in range(EDITS)]
        )
        row["server_rss_before_reflect_mib"] = _rss_mib(pid)["server_mib"]
        seen: list[float] = []  # the server's RSS every 10 ms in reflect: its peak, not only what it leaves
        sampler = asyncio.create_task(_sample_rss(pid, seen))
        started = time.perf_counter()
        reflected = await client.call_tool("engrama_reflect", {}, read_timeout_seconds=3600.0)
        row["reflect_s"] = time.perf_counter() - started
        sampler.cancel()
        if reflected.is_error or not (reflected.structured_content or {}).get("created"):
            raise SystemExit(f"engrama_reflect found nothing: {reflected.content}")
        after = _rss_mib(pid)["server_mib"]
        row.update(server_rss_after_reflect_mib=after, server_rss_reflect_peak_mib=max([*seen, after]))
        row["server_rss_peak_mib"] = max(peak, *seen, after)
    return row


async def _sample_rss(pid: int, seen: list[float]) -> None:
    while True:
        seen.append(_rss_mib(pid)["server_mib"])
        await asyncio.sleep(0.01)


async def edit_to_searchable(client: ClientSession, vault: Path, i: int) -> float:
    """Append a word no note holds to a note; seconds until engrama_search returns that note for it."""
    notes = sorted(vault.glob("Notes/*.md")) or sorted(vault.rglob("*.md"))
    path = notes[(i * 7919) % len(notes)]
    word = f"qxscale{i}zed"  # vaultgen's syllables never hold q or x
    started = time.perf_counter()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"\nAdded by the scale benchmark: {word}.\n")
    while time.perf_counter() - started < EDIT_TIMEOUT:
        result = await client.call_tool("engrama_search", {"query": word})
        if (result.structured_content or {}).get("results"):
            return time.perf_counter() - started
        await asyncio.sleep(0.01)
    raise SystemExit(f"an edit of {path.name} was not searchable after {EDIT_TIMEOUT} s")


def one_row(work: Path, mode: str, notes: int, seed: int, command: str = COMMAND) -> dict[str, object]:
    source = work / f"{mode}-{notes}" / "vault"
    if not source.exists():
        started = time.perf_counter()
        generate_vault(source, notes, seed, mode)
        print(f"[{mode} {notes}] generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    run = work / f"{mode}-{notes}" / "run"
    shutil.rmtree(run, ignore_errors=True)
    vault, db = run / "vault", run / "graph.db"
    shutil.copytree(source, vault)
    vault_bytes = sum(p.stat().st_size for p in vault.rglob("*.md"))
    row: dict[str, object] = {"corpus": mode, "notes": notes, "vault_mib": vault_bytes / 2**20}
    seconds, _, main_peak, tree = run_sync(vault, db, command)
    row.update(first_sync_notes_s=notes / seconds, first_sync_tree_mib=tree, first_sync_main_mib=main_peak)
    print(f"[{mode} {notes}] first sync {seconds:.0f} s, tree {tree} MiB", file=sys.stderr)
    row["unchanged_resync_s"], _, _, _ = run_sync(vault, db, command)
    db_bytes = sum(p.stat().st_size for p in run.glob("graph.db*") if not p.name.endswith(".lease"))
    row["db_vs_vault"] = db_bytes / vault_bytes
    common, rare = queries(vault_words(vault, 2000, seed), seed)
    row.update(asyncio.run(session(vault, db, common, rare, command)))
    shutil.rmtree(run, ignore_errors=True)
    print(f"[{mode} {notes}] {json.dumps(row)}", file=sys.stderr)
    return row


COLUMNS = (
    ("corpus", "corpus", "{}"),
    ("notes", "notes", "{}"),
    ("first_sync_notes_s", "sync n/s", "{:.0f}"),
    ("first_sync_tree_mib", "sync tree MiB", "{}"),
    ("first_sync_main_mib", "sync main MiB", "{}"),
    ("unchanged_resync_s", "resync s", "{:.2f}"),
    ("db_vs_vault", "db/vault", "{:.2f}x"),
    ("search_common_median_ms", "common med", "{:.1f}"),
    ("search_common_p95_ms", "common p95", "{:.1f}"),
    ("search_rare_median_ms", "rare med", "{:.1f}"),
    ("search_rare_p95_ms", "rare p95", "{:.1f}"),
    ("edit_to_searchable_median_ms", "edit ms", "{:.0f}"),
    ("server_rss_start_mib", "RSS start", "{:.0f}"),
    ("server_rss_50_searches_mib", "RSS 50 searches", "{:.0f}"),
    ("server_rss_reflect_peak_mib", "RSS in reflect", "{:.0f}"),
    ("server_rss_after_reflect_mib", "RSS after reflect", "{:.0f}"),
    ("server_rss_peak_mib", "RSS peak", "{:.0f}"),
    ("reflect_s", "reflect s", "{:.2f}"),
)


def table(rows: list[dict[str, object]]) -> str:
    cells = [[head for _, head, _ in COLUMNS]]
    cells += [[fmt.format(row[key]) if key in row else "-" for key, _, fmt in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return "\n".join([lines[0], "-+-".join("-" * w for w in widths), *lines[1:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--modes", choices=MODES, nargs="+", default=list(MODES))
    parser.add_argument("--work", type=Path, help="keep generated vaults here (reused next time)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the rows as JSON")
    parser.add_argument(
        "--command",
        default=COMMAND,
        help="the engrama-vault to measure (default: this venv's; e.g. another tree's)",
    )
    args = parser.parse_args()
    os.environ["EMBEDDING_PROVIDER"] = "none"  # the one-shot syncs too: a plain install
    rows = []
    with tempfile.TemporaryDirectory(prefix="engrama-scale-") as tmp:
        work = args.work or Path(tmp)
        for notes in args.sizes:
            for mode in args.modes:
                rows.append(one_row(work, mode, notes, args.seed, args.command))
                if args.out:
                    args.out.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(table(rows))


if __name__ == "__main__":
    main()
