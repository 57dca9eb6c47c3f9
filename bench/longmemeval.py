"""Retrieval benchmark on LongMemEval_S (development split), through the product's own search path.

    python bench/longmemeval.py                         # full text, and the local model when installed
    python bench/longmemeval.py --embedder none         # full text only (~2 min for the 100 questions)
    python bench/longmemeval.py --embedder local --limit 20 --types multi-session
    python bench/longmemeval.py --out a.json            # per-question results, for --compare
    python bench/longmemeval.py --compare a.json b.json # paired better/worse of b against a, and what changed
    python bench/longmemeval.py --embedder none --pad 476   # a "pseudo-M" haystack per question (see below)

Each question gets its own vault: its ~48 haystack sessions, one note per session as a person might keep a chat
log (frontmatter with the session's date, the title "Chat — <date as given>", a `User: ...` or
`Assistant: ...` paragraph per turn). Session ids and `has_answer` marks appear nowhere a retriever sees: a
note is named after its date and time. The vault is synced with the real VaultSync into a real SQLite file
(settle 0) and the question is asked through `server.search.service.search`, top 10. The question's
`question_date` is passed as search's `reference_time` (when the question is asked: "last Saturday" counts
back from it).

Rows: `none` is the product with EMBEDDING_PROVIDER=none (full text); `local` the product with
EMBEDDING_PROVIDER=local (skipped with a message when the [local] extra is not installed; the model re-scores
bm25's best passages, embedding those not stored yet within the product's time budget; `--no-budget` lifts the
budget, to see the model's effect apart from this machine's speed; `--backfill` embeds each whole vault first,
which is slow); `bm25` the plain baseline of shared/FACTS.md on the same notes in the same run
(bench/_bench_common.py).

`--pad N` fills each question's haystack up to N sessions with sessions drawn from the other questions'
haystacks (the same draw every run, by question id), as the issue's held-out "pseudo-M" pads LongMemEval_S to
~476 sessions: a vault ten times larger, where the evidence competes with many more notes sharing its words.
It is the development set's check that ranking holds as a vault grows (and that the bounds search puts on
its cost past ROW_BUDGET rows, which small haystacks never reach, do not lose the evidence).

Metrics, per question type and overall, from the ranks of the evidence sessions (`answer_session_ids`) among
the top 10 notes:
- recall_any@5: 1 when at least one evidence session is in the top 5;
- recall_all@5 / recall_all@10: 1 when every evidence session is in the top 5 / 10;
- ndcg_any@10: normalised discounted cumulative gain with binary relevance (a note is relevant when it is one
  of the evidence sessions): DCG = sum over relevant notes at rank r <= 10 of 1 / log2(r + 1), divided by the
  DCG of the ideal order (every evidence session first, at most 10 of them);
- search latency median / p95 (one search per question; the baseline's too).
Paired counts: per metric, how many questions a row does better / worse / the same as bm25.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._bench_common import (  # noqa: E402
    BASELINE,
    Outcome,
    PlainBM25,
    Product,
    ask,
    bench_parser,
    found_within,
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
from server.search.service import Tuning  # noqa: E402

DATA = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "data"
    / "longmemeval"
    / "longmemeval_s_dev.json.gz"
)
TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
METRICS = (
    ("recall_any@5", "any@5"),
    ("recall_all@5", "all@5"),
    ("recall_all@10", "all@10"),
    ("ndcg_any@10", "ndcg@10"),
)
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # LongMemEval's "2023/05/30 (Tue) 23:42"


@dataclass(frozen=True)
class Note:
    path: str  # vault-relative
    title: str
    body: str
    session: str  # the session id: kept by the bench, never written into the vault


def load(path: Path, limit: int | None = None, types: Sequence[str] | None = None) -> list[dict]:
    """The questions of `path` (a gzip'ed JSON list), of `types` when given, the first `limit` of them."""
    if not path.is_file():
        raise SystemExit(f"{path} not found; pass --data with the path of longmemeval_s_dev.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        questions = json.load(f)
    if types:
        unknown = set(types) - {q["question_type"] for q in questions}
        if unknown:
            raise SystemExit(f"unknown question type(s) {sorted(unknown)}; the types are {', '.join(TYPES)}")
        questions = [q for q in questions if q["question_type"] in types]
    return questions[:limit] if limit else questions


def session_notes(question: dict) -> list[Note]:
    """One note per haystack session, named after its date and time (a second one at the same minute: "(2)")."""
    notes: list[Note] = []
    taken: set[str] = set()
    for sid, when, turns in zip(
        question["haystack_session_ids"],
        question["haystack_dates"],
        question["haystack_sessions"],
        strict=True,
    ):
        moment = datetime.strptime(when, DATE_FORMAT)
        stem, n = f"chats/{moment:%Y-%m-%d %H-%M}", 1
        while (path := stem + (f" ({n})" if n > 1 else "") + ".md") in taken:
            n += 1
        taken.add(path)
        body = "\n\n".join(f"{t['role'].capitalize()}: {t['content'].strip()}" for t in turns) + "\n"
        notes.append(Note(path, f"Chat — {when}", body, sid))
    return notes


def padded(question: dict, pool: Sequence[dict], size: int) -> dict:
    """`question` with its haystack filled up to `size` sessions from the other questions' haystacks (never a
    session it already has), drawn the same way every run."""
    have = set(question["haystack_session_ids"])
    others = [
        (sid, when, turns)
        for other in pool
        if other["question_id"] != question["question_id"]
        for sid, when, turns in zip(
            other["haystack_session_ids"], other["haystack_dates"], other["haystack_sessions"], strict=True
        )
    ]
    candidates = list({sid: (sid, when, turns) for sid, when, turns in others if sid not in have}.values())
    wanted = max(0, size - len(have))
    extra = random.Random(question["question_id"]).sample(candidates, k=min(wanted, len(candidates)))
    return question | {
        "haystack_session_ids": [*question["haystack_session_ids"], *(e[0] for e in extra)],
        "haystack_dates": [*question["haystack_dates"], *(e[1] for e in extra)],
        "haystack_sessions": [*question["haystack_sessions"], *(e[2] for e in extra)],
    }


def write_vault(root: Path, notes: list[Note]) -> None:
    for note in notes:
        moment = note.path.removeprefix("chats/")[:10]
        front = f'---\ntitle: "{note.title}"\ndate: {moment}\n---\n'
        file = root / note.path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(front + note.body, encoding="utf-8")


def reference_time(question: dict) -> str:
    """The question's `question_date` as an ISO date-time."""
    return datetime.strptime(question["question_date"], DATE_FORMAT).isoformat()


def ndcg(ranks: dict[str, int | None], k: int = 10) -> float:
    gain = sum(1 / math.log2(r + 1) for r in ranks.values() if r is not None and r <= k)
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(len(ranks), k) + 1))
    return gain / ideal


def outcome(question: dict, sessions: list[str], seconds: float) -> Outcome:
    """Score one ranked list of session ids (the top 10) against the question's evidence."""
    ranks = ranks_of(question["answer_session_ids"], sessions)
    n = len(ranks)
    metrics = {
        "recall_any@5": float(found_within(ranks, 5) > 0),
        "recall_all@5": float(found_within(ranks, 5) == n),
        "recall_all@10": float(found_within(ranks, 10) == n),
        "ndcg_any@10": ndcg(ranks),
    }
    return Outcome(question["question_id"], question["question_type"], metrics, ranks, sessions[:10], seconds)


class Runner:
    """Runs the rows over one question at a time; a row whose embedder fails is dropped with its reason."""

    def __init__(
        self,
        providers: list[str],
        dimensions: int | None,
        backfill: bool,
        tuning: Tuning | None,
        edits: int = 0,
    ) -> None:
        self.providers = providers
        self.dimensions = dimensions
        self.backfill = backfill
        self.edits = edits
        self.tuning = tuning
        self.rows: dict[str, list[Outcome]] = {p: [] for p in providers} | {BASELINE: []}
        self.modes: dict[str, set[str]] = {p: set() for p in providers}
        self.prepared: dict[str, list[Product]] = {p: [] for p in providers}

    async def question(self, question: dict, workdir: Path) -> None:
        notes = session_notes(question)
        write_vault(workdir / "vault", notes)
        session_of = {note.path: note.session for note in notes}
        for provider in list(self.providers):
            try:
                async with open_product(
                    workdir / "vault",
                    workdir / "graph.db",
                    provider,
                    dimensions=self.dimensions,
                    backfill=self.backfill,
                    edits=self.edits,
                ) as product:
                    answer = await ask(
                        product,
                        question["question"],
                        reference_time=reference_time(question),
                        tuning=self.tuning,
                    )
            except EmbeddingUnavailable as exc:
                print(f"embedder={provider} dropped: {exc}", file=sys.stderr)
                self.providers.remove(provider)
                del self.rows[provider]
                continue
            self.prepared[provider].append(product)
            self.modes[provider].add(answer.mode)
            ranked = [session_of.get(p, "?") for p in answer.paths]
            self.rows[provider].append(outcome(question, ranked, answer.seconds))
        index = PlainBM25()
        for note in notes:
            index.add(note.path, note.title, note.body)
        keys, seconds = timed_bm25(index, question["question"])
        index.close()
        self.rows[BASELINE].append(outcome(question, [session_of[k] for k in keys], seconds))


def providers_for(choice: str) -> list[str]:
    wanted = ["none", "local"] if choice == "both" else [choice]
    chosen = []
    for provider in wanted:
        if (reason := skip_reason(provider)) is not None:
            print(reason)
        else:
            chosen.append(provider)
    return chosen


def git_commit() -> str:
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    return run.stdout.strip() or "unknown"


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    questions = load(args.data, args.limit, types)
    if args.pad:
        pool = load(args.data)
        questions = [padded(q, pool, args.pad) for q in questions]
    runner = Runner(
        providers_for(args.embedder),
        args.dimensions,
        args.backfill,
        unbudgeted() if args.no_budget else None,
        args.edits,
    )
    with tempfile.TemporaryDirectory(prefix="engrama-lme-") as tmp:
        for i, question in enumerate(questions, 1):
            workdir = Path(tmp) / f"q{i:03d}"
            await runner.question(question, workdir)
            shutil.rmtree(workdir, ignore_errors=True)
            if i % 10 == 0 or i == len(questions):
                print(
                    f"  {i}/{len(questions)} questions, {time.perf_counter() - started:.0f}s", file=sys.stderr
                )
    elapsed = time.perf_counter() - started
    sessions = sum(len(q["haystack_sessions"]) for q in questions)
    print(
        f"LongMemEval_S dev{f' padded to {args.pad} sessions' if args.pad else ''}: {len(questions)} questions, {sessions} session notes in {len(questions)} vaults, "
        f"top 10; {elapsed:.0f}s in all (commit {git_commit()})"
    )
    for provider in runner.providers:
        print(
            f"  {provider}: {', '.join(sorted(runner.modes[provider]))}; {_prepared(runner.prepared[provider])}"
        )
    print_rows(runner.rows, [t for t in TYPES if any(q["question_type"] == t for q in questions)], METRICS)
    if args.out:
        meta = {"argv": sys.argv[1:], "commit": git_commit(), "seconds": round(elapsed, 1)}
        save_run(args.out, "longmemeval", meta, runner.rows)
        print(f"per-question results written to {args.out}")


def _prepared(products: list[Product]) -> str:
    """How long a vault took to get ready (median): sync, and the up-front embedding with --backfill."""
    if not products:
        return "no vault"
    text = f"sync median {statistics.median(p.sync_seconds for p in products):.2f}s per vault"
    if any(p.embedded for p in products):
        text += (
            f", backfill median {statistics.median(p.embed_seconds for p in products):.1f}s "
            f"({statistics.median(p.embedded for p in products):.0f} passages)"
        )
    return text


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        "LongMemEval_S retrieval through engrama-vault's search",
        DATA,
        "embed every passage of a vault first (slow)",
    )
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--types", help="only these question types, comma-separated")
    parser.add_argument(
        "--pad", type=int, default=0, help="fill each haystack up to N sessions from the other questions'"
    )
    run_or_compare(parser.parse_args(argv), run)


if __name__ == "__main__":
    main()
