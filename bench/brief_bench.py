"""How long `engrama_brief` takes on a large vault, and how big it is.

    python bench/brief_bench.py                      # 10,000 realistic notes (bench/vaultgen.py), 30 briefs
    python bench/brief_bench.py --notes 2000 --runs 10 --corpus short

Generates a vault (its notes carrying their ids, so the sync writes no note), syncs it, then edits the `status:` of some notes (so briefs carry fact changes, old -> new)
and times briefs in-process (the tool's own service call: `deliver_brief`, which renders and moves the
client's mark), alternating a brief without cues, one with cues (which runs a search) and one focused on a
project. Reports median and p95 latency, the first brief of a client (every note is new to it), and each
brief's size: characters, the estimate the budget is held to, and MiniLM's token count when the [local] extra
is installed (the estimate must never be below it).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench import vaultgen
from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.services.brief import deliver_brief
from server.services.brief_render import estimate_tokens
from server.settings import Settings

SHORT = vaultgen.Corpus(vocabulary=3000, name_words=(1, 3), body_words=(30, 80))
STATUS_EDITS = 300


def write_vault(root: Path, notes: int, corpus: str, seed: int = 0) -> list[Path]:
    """vaultgen's vault; `short` keeps its folders, labels, statuses and links but bodies of 30-80 words, so
    a 10,000-note vault is written and synced in seconds (tests use it)."""
    if corpus == "realistic":
        return vaultgen.generate_vault(root, notes, seed)
    vaultgen.CORPORA["brief-short"] = SHORT
    try:
        return vaultgen.generate_vault(root, notes, seed, "brief-short")
    finally:
        del vaultgen.CORPORA["brief-short"]


def give_ids(paths: list[Path]) -> None:
    """Put an `engrama_id:` line into each generated note, so a sync that writes no notes (a follower, as
    the tests use: ten thousand fsynced id writes would be most of their set-up time) indexes them all."""
    for path in paths:
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("---\n", f"---\nengrama_id: {uuid.uuid4()}\n", 1), encoding="utf-8")


def edit_statuses(paths: list[Path], count: int, seed: int = 0) -> list[str]:
    """Flip the `status:` of up to `count` notes in place (as Obsidian would); returns their vault paths."""
    rng, edited = random.Random(seed), []
    for path in rng.sample(paths, len(paths)):
        text = path.read_text(encoding="utf-8")
        if "\nstatus: open\n" in text:
            path.write_text(text.replace("\nstatus: open\n", "\nstatus: resolved\n", 1), encoding="utf-8")
            edited.append(path)
        elif "\nstatus: active\n" in text:
            path.write_text(text.replace("\nstatus: active\n", "\nstatus: paused\n", 1), encoding="utf-8")
            edited.append(path)
        if len(edited) >= count:
            break
    return [p.as_posix() for p in edited]


def minilm_counter():
    """MiniLM's token count, or None when the [local] extra (tokenizers) or its tokenizer.json is missing."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    path = Path(__file__).resolve().parents[1] / "server/embeddings/minilm/tokenizer.json"
    if not path.exists():
        return None
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


async def timed_briefs(rt: Runtime, runs: int, budget: int, cues: list[str], project: str) -> list[tuple]:
    rows = []
    for i in range(runs):
        kind = ("plain", "cues", "project")[i % 3]
        started = time.perf_counter()
        brief = await deliver_brief(
            rt,
            client="bench",
            cues=cues[i % len(cues)] if kind == "cues" else None,
            project=project if kind == "project" else None,
            budget_tokens=budget,
        )
        rows.append((kind, time.perf_counter() - started, brief.markdown))
    return rows


async def run(args: argparse.Namespace, root: Path) -> None:
    vault, db = root / "vault", root / "graph.db"
    if not vault.exists():
        started = time.perf_counter()
        paths = write_vault(vault, args.notes, args.corpus)
        give_ids(paths)
        print(f"generated {len(paths):,} notes ({args.corpus}) in {time.perf_counter() - started:.1f} s")
    async with open_runtime(Settings(vault=vault, db_path=db), writable=False) as rt:
        started = time.perf_counter()
        await rt.require_sync().sync_vault()
        print(f"synced in {time.perf_counter() - started:.1f} s")
        first = time.perf_counter()
        fresh = await deliver_brief(rt, client=f"first-{time.time_ns()}", budget_tokens=args.budget)
        first = time.perf_counter() - first
        await deliver_brief(rt, client="bench", budget_tokens=args.budget)
        notes = sorted(vault.rglob("*.md"))
        edited = edit_statuses(notes, STATUS_EDITS)
        await rt.require_sync().sync_paths([str(Path(p).relative_to(vault)) for p in edited])
        words = [p.stem for p in notes[:: max(1, len(notes) // 20)]]
        project = next(p.stem for p in notes if "/Projects/" in p.as_posix())
        rows = await timed_briefs(rt, args.runs, args.budget, words, project)
        searches = []  # the baseline, same run: one engrama_search of the same cues
        for i in range(args.runs):
            started = time.perf_counter()
            await search(rt, words[i % len(words)], limit=6)
            searches.append(time.perf_counter() - started)
    count = minilm_counter()
    print(f"baseline: engrama_search of the same cues, median {statistics.median(searches) * 1000:.0f} ms")
    print(
        f"first brief of a new client (every note new to it): {first * 1000:.0f} ms, {_size(fresh.markdown, count)}"
    )
    for kind in ("plain", "cues", "project", "all"):
        times = sorted(t for k, t, _ in rows if kind in (k, "all"))
        if not times:
            continue
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        texts = [m for k, _, m in rows if kind in (k, "all")]
        print(
            f"{kind:8} n={len(times):3}  median {statistics.median(times) * 1000:6.0f} ms  p95 {p95 * 1000:6.0f} ms  "
            f"largest {_size(max(texts, key=estimate_tokens), count)}"
        )


def _size(text: str, count) -> str:
    minilm = f", MiniLM {count(text)} tokens" if count else ""
    return f"{len(text):,} chars, estimate {estimate_tokens(text)} tokens{minilm}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--corpus", choices=("realistic", "short"), default="realistic")
    parser.add_argument("--dir", type=Path, help="keep the vault and database here (reused when present)")
    args = parser.parse_args()
    if args.dir:
        args.dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(run(args, args.dir))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
