"""Retrieval benchmark on LoCoMo, through the product's own path: vault -> VaultSync -> search().

    python bench/locomo.py                          # full text, and the local model when installed
    python bench/locomo.py --embedder none          # one setting (~1 min)
    python bench/locomo.py --ablation               # also the full-text variants behind the defaults
    python bench/locomo.py --out a.json             # per-question results, for --compare
    python bench/locomo.py --compare a.json b.json  # paired better/worse of b against a, and what changed

Each session of each conversation becomes one note in one temporary vault (all conversations together, as
one person's notes), as a person might keep a chat log: frontmatter with the date and participants, the title
"Session K — <date>", one `Speaker: text` line per turn (no answers, summaries or image captions). The vault is
synced with the real VaultSync into a real SQLite file (settle 0) and every question of categories 1-4 is asked
through `server.search.service.search` as the MCP tool asks it, top 10.

Rows: `none` is the product with EMBEDDING_PROVIDER=none (full text); `local` the product with
EMBEDDING_PROVIDER=local (skipped with a message when the [local] extra is not installed; the model re-scores
bm25's best passages, embedding those not stored yet within the product's time budget, and they stay embedded
for later questions as in a running server; `--no-budget` lifts the budget, `--backfill` embeds the whole
vault first); `bm25` the plain baseline of shared/FACTS.md over the same notes in the same run
(bench/_bench_common.py).

Metrics: session recall@5 and @10 (share of a question's evidence sessions in the top k), MRR of the first
evidence session, turn@5 (an evidence turn's line inside one of the top-5 snippets; the baseline returns whole
notes, so it has none), per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop), paired
better/worse/same counts against bm25, and search latency median / p95.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._bench_common import (  # noqa: E402
    BASELINE,
    Outcome,
    PlainBM25,
    ask,
    bench_parser,
    open_product,
    print_rows,
    ranks_of,
    run_or_compare,
    save_run,
    skip_reason,
    timed_bm25,
    unbudgeted,
)
from server.embeddings import EmbeddingUnavailable  # noqa: E402
from server.search.service import DEFAULT_TUNING, Tuning  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METRICS = (("r@5", "R@5"), ("r@10", "R@10"), ("mrr", "MRR"), ("turn@5", "turn@5"))


@dataclass(frozen=True)
class Question:
    qid: str  # conversation:index of the question in it
    text: str
    category: int
    sessions: frozenset[str]  # note paths of the evidence sessions
    turns: frozenset[str]  # the evidence turns' lines, as written in the notes

    @property
    def group(self) -> str:
        return f"{self.category} {CATEGORIES[self.category]}"


def outcome(q: Question, paths: list[str], snippets: list[str] | None, seconds: float) -> Outcome:
    """Score one top-10 list of note paths (and their snippets, when the row gives any)."""
    ranks = ranks_of(q.sessions, paths)
    first = min((r for r in ranks.values() if r is not None), default=None)
    metrics = {
        "r@5": sum(1 for r in ranks.values() if r is not None and r <= 5) / len(ranks),
        "r@10": sum(1 for r in ranks.values() if r is not None and r <= 10) / len(ranks),
        "mrr": 0.0 if first is None else 1.0 / first,
    }
    if snippets is not None:
        metrics["turn@5"] = float(any(turn in s for s in snippets[:5] for turn in q.turns))
    return Outcome(q.qid, q.group, metrics, ranks, paths[:10], seconds)


def _date(text: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" as 2023-05-08."""
    return datetime.strptime(text.split(" on ", 1)[1].strip(), "%d %B, %Y").date().isoformat()


def _sessions(conv: dict) -> Iterator[int]:
    k = 1
    while f"session_{k}" in conv:
        yield k
        k += 1


def write_vault(root: Path, data: Path = DATA, index: PlainBM25 | None = None) -> list[Question]:
    """One note per session under `root` (and in `index`); returns the questions (categories 1-4 with
    evidence)."""
    questions: list[Question] = []
    files = sorted(data.glob("conv-*.json"))
    if not files:
        raise SystemExit(f"no LoCoMo conversations (conv-*.json) in {data}; pass --data with their folder")
    for file in files:
        conv = json.loads(file.read_text(encoding="utf-8"))
        cid = file.stem
        lines: dict[str, str] = {}  # dia_id -> the turn's line
        for k in _sessions(conv):
            when = conv[f"session_{k}_date_time"]
            turns = conv[f"session_{k}"]
            for t in turns:
                lines[t["dia_id"]] = f"{t['speaker']}: {t['text']}".strip()
            people = ", ".join(dict.fromkeys(t["speaker"] for t in turns))
            title = f"Session {k} — {when}"
            front = f'---\ntitle: "{title}"\ndate: {_date(when)}\nparticipants: [{people}]\n---\n'
            body = "\n".join(lines[t["dia_id"]] for t in turns) + "\n"
            rel = f"{cid}/session-{k:02d}.md"
            note = root / rel
            note.parent.mkdir(parents=True, exist_ok=True)
            note.write_text(front + body, encoding="utf-8")
            if index is not None:
                index.add(rel, title, body)
        for n, qa in enumerate(conv["qa"]):
            if qa["category"] not in CATEGORIES:
                continue
            ids = [p.strip() for e in qa.get("evidence", []) for p in e.replace(",", ";").split(";")]
            ids = [i for i in ids if i in lines]
            if ids:
                sessions = frozenset(f"{cid}/session-{int(i[1:].split(':')[0]):02d}.md" for i in ids)
                turns = frozenset(lines[i] for i in ids)
                questions.append(Question(f"{cid}:{n}", qa["question"], qa["category"], sessions, turns))
    return questions


def ablations() -> dict[str, Tuning]:
    full = DEFAULT_TUNING.fulltext
    return {
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
        "no anchors": replace(DEFAULT_TUNING, fulltext=replace(full, anchor=0.0)),
        "no graph walk": replace(DEFAULT_TUNING, fulltext=replace(full, graph=0.0, graph_anchored=0.0)),
        "no distill": replace(DEFAULT_TUNING, distill=False),
    }


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    wanted = ["none", "local"] if args.embedder == "both" else [args.embedder]
    rows: dict[str, list[Outcome]] = {}
    prepared: list[str] = []  # how each product row was set up, for the report
    with tempfile.TemporaryDirectory(prefix="engrama-locomo-") as tmp:
        root = Path(tmp) / "vault"
        index = PlainBM25()
        questions = write_vault(root, args.data, index)
        notes = len(list(root.rglob("*.md")))
        for provider in wanted:
            if (reason := skip_reason(provider)) is not None:
                print(reason)
                continue
            try:
                async with open_product(
                    root,
                    Path(tmp) / "graph.db",
                    provider,
                    dimensions=args.dimensions,
                    backfill=args.backfill,
                    edits=args.edits,
                ) as product:
                    tunings: dict[str, Tuning | None] = {provider: unbudgeted() if args.no_budget else None}
                    if args.ablation and provider == "none":
                        tunings |= {f"{provider}: {name}": t for name, t in ablations().items()}
                    modes: set[str] = set()
                    for label, tuning in tunings.items():
                        rows[label] = []
                        for q in questions:
                            answer = await ask(product, q.text, tuning=tuning)
                            modes.add(answer.mode)
                            rows[label].append(outcome(q, answer.paths, answer.snippets, answer.seconds))
                    prepared.append(f"  {provider}: {', '.join(sorted(modes))}; {product.describe()}")
            except EmbeddingUnavailable as exc:
                print(f"embedder={provider} skipped: {exc}")
        rows[BASELINE] = []
        for q in questions:
            keys, seconds = timed_bm25(index, q.text)
            rows[BASELINE].append(outcome(q, keys, None, seconds))
        index.close()
    elapsed = time.perf_counter() - started
    print(
        f"LoCoMo dev: {len(questions)} questions (categories 1-4), {notes} session notes in one vault, "
        f"top 10; {elapsed:.0f}s in all"
    )
    print("\n".join(prepared))
    groups = [f"{c} {name}" for c, name in CATEGORIES.items()]
    print_rows(rows, groups, METRICS)
    if args.out:
        save_run(args.out, "locomo", {"argv": sys.argv[1:], "seconds": round(elapsed, 1)}, rows)
        print(f"per-question results written to {args.out}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        "LoCoMo retrieval through engrama-vault's search",
        DATA,
        "embed every passage first (slow with a model)",
    )
    parser.add_argument("--ablation", action="store_true", help="also run the full-text variants")
    run_or_compare(parser.parse_args(argv), run)


if __name__ == "__main__":
    main()
