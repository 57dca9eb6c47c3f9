"""Retrieval benchmark on LoCoMo, through the product's own path: vault -> VaultSync -> search().

    python bench/locomo.py                          # every embedder setting available (none, local, fake)
    python bench/locomo.py --embedder none          # one setting
    python bench/locomo.py --ablation               # also the full-text variants behind the defaults

Each session of each conversation becomes one note in a temporary vault, as a person might keep a chat log:
frontmatter with the date and participants, the title "Session K — <date>", one `Speaker: text` line per turn
(no answers, summaries or image captions). The vault is synced with the real VaultSync into a real SQLite
file, the passages are embedded when an embedder is chosen, and every question of categories 1-4 is asked
through `search()` as the MCP tool asks it.

Metrics: session recall@5 and @10 (share of a question's evidence sessions in the top k), MRR of the first
evidence session, turn@5 (an evidence turn's line inside one of the top-5 snippets), per category
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop), and search latency median / p95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server.embeddings import local_available, make_embedder  # noqa: E402
from server.embeddings.worker import attach_embedder, embed_pending  # noqa: E402
from server.runtime import open_runtime  # noqa: E402
from server.search.service import DEFAULT_TUNING, Tuning, run_search  # noqa: E402
from server.settings import Settings  # noqa: E402
from server.store.search_sql import NodeFilter  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    sessions: frozenset[str]  # note paths of the evidence sessions
    turns: frozenset[str]  # the evidence turns' lines, as written in the notes


@dataclass
class Score:
    """Sums per category (0 = all) of the four metrics, and every search's latency."""

    sums: dict[int, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0] * 5))
    latencies: list[float] = field(default_factory=list)

    def add(self, q: Question, paths: list[str], snippets: list[str], seconds: float) -> None:
        first = next((i for i, p in enumerate(paths) if p in q.sessions), None)
        values = (
            len(q.sessions & set(paths[:5])) / len(q.sessions),
            len(q.sessions & set(paths[:10])) / len(q.sessions),
            0.0 if first is None else 1.0 / (first + 1),
            float(any(turn in s for s in snippets[:5] for turn in q.turns)),
            1.0,
        )
        for cat in (0, q.category):
            self.sums[cat] = [a + b for a, b in zip(self.sums[cat], values, strict=True)]
        self.latencies.append(seconds)

    def row(self, cat: int) -> tuple[float, float, float, float]:
        r5, r10, mrr, turn, n = self.sums[cat]
        return r5 / n, r10 / n, mrr / n, turn / n


def _date(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as 2023-05-08."""
    return datetime.strptime(text.split(" on ", 1)[1].strip(), "%d %B, %Y").date().isoformat()


def _sessions(conv: dict) -> Iterator[int]:
    k = 1
    while f"session_{k}" in conv:
        yield k
        k += 1


def write_vault(root: Path, data: Path = DATA) -> list[Question]:
    """One note per session under `root`; returns the questions (categories 1-4 with evidence)."""
    questions: list[Question] = []
    for file in sorted(data.glob("conv-*.json")):
        conv = json.loads(file.read_text(encoding="utf-8"))
        cid = file.stem
        lines: dict[str, str] = {}  # dia_id -> the turn's line
        for k in _sessions(conv):
            when = conv[f"session_{k}_date_time"]
            turns = conv[f"session_{k}"]
            for t in turns:
                lines[t["dia_id"]] = f"{t['speaker']}: {t['text']}".strip()
            people = ", ".join(dict.fromkeys(t["speaker"] for t in turns))
            front = (
                f'---\ntitle: "Session {k} — {when}"\ndate: {_date(when)}\nparticipants: [{people}]\n---\n'
            )
            body = "\n".join(lines[t["dia_id"]] for t in turns) + "\n"
            note = root / cid / f"session-{k:02d}.md"
            note.parent.mkdir(parents=True, exist_ok=True)
            note.write_text(front + body, encoding="utf-8")
        for qa in conv["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            ids = [p.strip() for e in qa.get("evidence", []) for p in e.replace(",", ";").split(";")]
            ids = [i for i in ids if i in lines]
            if ids:
                sessions = frozenset(f"{cid}/session-{int(i[1:].split(':')[0]):02d}.md" for i in ids)
                turns = frozenset(lines[i] for i in ids)
                questions.append(Question(qa["question"], qa["category"], sessions, turns))
    return questions


async def evaluate(rt, questions: list[Question], tuning: Tuning) -> tuple[Score, str]:
    score = Score()
    modes: set[str] = set()
    for q in questions:
        started = time.perf_counter()
        response = await run_search(rt, q.text, NodeFilter(), 10, False, tuning)
        seconds = time.perf_counter() - started
        modes.add(
            response.search_mode + (f" ({response.degraded_reason})" if response.degraded_reason else "")
        )
        hits = response.results
        score.add(q, [h.path or "" for h in hits], [h.snippet for h in hits], seconds)
    return score, ", ".join(sorted(modes))


def ablations() -> dict[str, Tuning]:
    full = DEFAULT_TUNING.fulltext
    return {
        "default": DEFAULT_TUNING,
        "passages only (no note row)": replace(DEFAULT_TUNING, use_notes=False),
        "best passage only (no second passage)": replace(
            DEFAULT_TUNING, fulltext=replace(full, second_passage=0.0)
        ),
        "no name weighting": replace(DEFAULT_TUNING, name_weight=1, fulltext=replace(full, names=0.0)),
        "names x2, no all-names bonus": replace(DEFAULT_TUNING, fulltext=replace(full, names=0.0)),
        "exact words (no prefix)": replace(DEFAULT_TUNING, prefix_min=None),
        "prefix from 4 letters": replace(DEFAULT_TUNING, prefix_min=4),
        "prefix from 6 letters": replace(DEFAULT_TUNING, prefix_min=6),
        "note 0.3 / passage 0.7": replace(DEFAULT_TUNING, fulltext=replace(full, note=0.3, passage=0.7)),
        "note 0.7 / passage 0.3": replace(DEFAULT_TUNING, fulltext=replace(full, note=0.7, passage=0.3)),
    }


def print_table(label: str, score: Score, mode: str) -> None:
    lat = sorted(score.latencies)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] * 1000
    print(
        f"\n{label}  [{mode}]  {len(lat)} questions, search median {statistics.median(lat) * 1000:.1f} ms, "
        f"p95 {p95:.1f} ms"
    )
    print(f"  {'category':<14}{'n':>5}{'R@5':>8}{'R@10':>8}{'MRR':>8}{'turn@5':>8}")
    for cat in (0, *CATEGORIES):
        if cat not in score.sums:
            continue
        r5, r10, mrr, turn = score.row(cat)
        name = "all" if cat == 0 else f"{cat} {CATEGORIES[cat]}"
        print(f"  {name:<14}{int(score.sums[cat][4]):>5}{r5:>8.3f}{r10:>8.3f}{mrr:>8.3f}{turn:>8.3f}")


async def run_setting(
    provider: str, root: Path, questions: list[Question], ablation: bool, dimensions: int | None
) -> None:
    db = root.parent / f"graph-{provider}.db"
    dims = dimensions or (256 if provider == "fake" else None)
    settings = Settings(
        vault=root, db_path=db, embedding_provider=provider, embedding_dimensions=dims, watch=False
    )
    async with open_runtime(settings) as rt:
        started = time.perf_counter()
        await rt.require_sync().sync_vault()
        synced = time.perf_counter() - started
        embedder = make_embedder(provider, dimensions=dims)
        note = f"sync {synced:.1f}s"
        if embedder is not None:
            started = time.perf_counter()
            count = await embed_pending(rt, embedder, batch_size=256)
            note += f", embedded {count} passages in {time.perf_counter() - started:.1f}s"
            await attach_embedder(rt, embedder)
        tunings = ablations() if ablation and embedder is None else {"default": DEFAULT_TUNING}
        for name, tuning in tunings.items():
            score, mode = await evaluate(rt, questions, tuning)
            print_table(f"embedder={provider} {name} ({note})", score, mode)
        if embedder is not None:
            await embedder.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description="LoCoMo retrieval through engrama-vault's search")
    parser.add_argument(
        "--embedder",
        action="append",
        choices=("none", "local", "fake"),
        help="embedder setting(s) to run (default: none, local if installed, fake)",
    )
    parser.add_argument("--ablation", action="store_true", help="also run the full-text variants")
    parser.add_argument("--dimensions", type=int, help="vector size (local: 64, 128 or 256)")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    settings = args.embedder or ["none", *(["local"] if local_available() else []), "fake"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        questions = write_vault(root, args.data)
        print(f"{len(list(root.rglob('*.md')))} session notes, {len(questions)} questions (categories 1-4)")
        for provider in settings:
            await run_setting(provider, root, questions, args.ablation, args.dimensions)


if __name__ == "__main__":
    asyncio.run(main())
