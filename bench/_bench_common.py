"""What the retrieval benchmarks share: the product's search path, a plain-bm25 baseline, reporting, saved runs.

- `open_product` opens a temporary vault as the product would (real VaultSync into a real SQLite file, settle 0,
  the embedder chosen through `Settings`), `ask` asks one question through `server.search.service.search`.
  With an embedder, nothing is embedded up front unless `backfill` is asked for: the product embeds what a
  query needs when it needs it, and a whole vault would take minutes with a transformer model on two cores.
- `PlainBM25` is the baseline of shared/FACTS.md, written here so that it never moves with the product: FTS5
  with the `porter unicode61` tokenizer over whole notes (title and body), the question's words quoted and
  OR-ed with stopwords dropped, ranked by bm25. It runs in the same process on the same notes.
- `Outcome` is one question answered by one row; `print_rows` prints the per-group table, the paired
  better/worse/same counts against the baseline and the latency; `save_run` / `compare_runs` keep runs so
  two of them can be compared question by question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import sqlean

from server.embeddings import INSTALL_HINT, configured_embedder, local_available
from server.embeddings.worker import attach_embedder, embed_pending, prepare_vector_table
from server.runtime import Runtime, open_runtime
from server.search.service import DEFAULT_TUNING, Tuning, parse_reference_time, run_search, search
from server.settings import Settings
from server.store.search_sql import NodeFilter

BASELINE = "bm25"
K = 10  # results asked for: every metric here looks at the top 10 at most
W = 12  # width of a table column (paired counts such as 114/48/598 must fit)

# --- the plain-bm25 baseline ---------------------------------------------------------------------------

# Function words, auxiliaries and question words: what a question carries that says nothing about its answer.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can cannot could couldn did didn do does doesn doing don down during each few for from
    further had hadn has hasn have haven having he her here hers herself him himself his how i if in into is
    isn it its itself just ll me might more most must mustn my myself no nor not now of off on once only or
    other ought our ours ourselves out over own re s same shall shan she should shouldn so some such t than
    that the their theirs them themselves then there these they this those through to too under until up us
    ve very was wasn we were weren what when where which while who whom whose why will with won would wouldn
    you your yours yourself yourselves d m o y
    """.split()
)
_WORD = re.compile(r"[^\W_]+")


def plain_match(question: str) -> str | None:
    """The question as an FTS5 expression: its words, lower-cased, stopwords dropped, quoted and OR-ed."""
    words = dict.fromkeys(w for w in _WORD.findall(question.lower()) if w not in STOPWORDS)
    return " OR ".join(f'"{w}"' for w in words) or None


class PlainBM25:
    """An in-memory FTS5 table of whole notes: `add` them, then `search`."""

    def __init__(self) -> None:
        # sqlean, as the product: its SQLite always has FTS5 (no type stubs, hence the ignore).
        self._db = sqlean.connect(":memory:")  # pyright: ignore[reportAttributeAccessIssue]
        self._db.execute(
            "CREATE VIRTUAL TABLE notes USING fts5(key UNINDEXED, title, body, tokenize='porter unicode61')"
        )

    def add(self, key: str, title: str, body: str) -> None:
        self._db.execute("INSERT INTO notes VALUES (?, ?, ?)", (key, title, body))

    def search(self, question: str, k: int = K) -> list[str]:
        match = plain_match(question)
        if match is None:
            return []
        sql = "SELECT key FROM notes WHERE notes MATCH ? ORDER BY bm25(notes) LIMIT ?"
        return [row[0] for row in self._db.execute(sql, (match, k))]

    def close(self) -> None:
        self._db.close()


def timed_bm25(index: PlainBM25, question: str) -> tuple[list[str], float]:
    started = time.perf_counter()
    keys = index.search(question)
    return keys, time.perf_counter() - started


# --- the product ---------------------------------------------------------------------------------------


def skip_reason(provider: str) -> str | None:
    """Why a row cannot run here (None: it can)."""
    if provider == "local" and not local_available():
        return f"embedder=local skipped: {INSTALL_HINT}"
    return None


@dataclass(frozen=True)
class Product:
    rt: Runtime
    sync_seconds: float
    embedded: int = 0  # passages embedded up front (only with backfill)
    embed_seconds: float = 0.0

    def describe(self) -> str:
        text = f"sync {self.sync_seconds:.1f}s"
        if self.embedded:
            text += f", {self.embedded} passages embedded in {self.embed_seconds:.1f}s"
        return text


@asynccontextmanager
async def open_product(
    vault: Path,
    db: Path,
    provider: str,
    *,
    dimensions: int | None = None,
    backfill: bool = False,
    edits: int = 0,
) -> AsyncIterator[Product]:
    """The product over `vault`: synced into `db` (settle 0: ids are written at once), with the embedder
    `provider` selects through Settings attached for queries, and every passage embedded first only when
    `backfill` is asked. With `edits`, every note is then edited and put back that many times, each step
    synced (`edit_and_restore`). Raises EmbeddingUnavailable when the embedder cannot run."""
    settings = Settings(
        vault=vault,
        db_path=db,
        embedding_provider=provider,
        embedding_dimensions=dimensions,
        watch=False,
        settle=0,
    )
    async with open_runtime(settings) as rt:
        started = time.perf_counter()
        await rt.require_sync().sync_vault()
        sync_seconds = time.perf_counter() - started
        await edit_and_restore(rt, vault, edits)
        embedded, embed_seconds = 0, 0.0
        embedder = configured_embedder(settings)
        try:
            if embedder is not None:
                await prepare_vector_table(rt, embedder)  # loads the model outside any timed search
                if backfill:
                    started = time.perf_counter()
                    embedded = await embed_pending(rt, embedder)
                    embed_seconds = time.perf_counter() - started
                await attach_embedder(rt, embedder)
            yield Product(rt, sync_seconds, embedded, embed_seconds)
        finally:
            if embedder is not None:
                await embedder.aclose()


async def edit_and_restore(rt: Runtime, vault: Path, rounds: int) -> None:
    """A vault in use: `rounds` times, a line is added to every note and taken away again, each step synced as
    the watcher would. The notes end as they began, so any change in the answers comes from the index's
    history, which should leave none (the indexes' statistics must not drift as notes are edited)."""
    notes = sorted(vault.rglob("*.md"))
    texts = {path: path.read_text(encoding="utf-8") for path in notes}  # with the ids the first sync wrote
    for n in range(rounds):
        for path, text in texts.items():
            path.write_text(f"{text.rstrip()}\nEdited, round {n}.\n", encoding="utf-8")
        await rt.require_sync().sync_vault()
        for path, text in texts.items():
            path.write_text(text, encoding="utf-8")
        await rt.require_sync().sync_vault()


@dataclass(frozen=True)
class Answer:
    paths: list[str]
    snippets: list[str]
    seconds: float
    mode: str


async def ask(
    product: Product, question: str, *, reference_time: str | None = None, tuning: Tuning | None = None
) -> Answer:
    """One question through the product's search, top K. `reference_time` (an ISO date or date-time; None:
    now) is when the question is asked, as the tool's `reference_time` takes it. `tuning` (ablations) goes
    through `run_search` with the same reference."""
    started = time.perf_counter()
    if tuning is None or tuning == DEFAULT_TUNING:
        response = await search(product.rt, question, limit=K, reference_time=reference_time)
    else:
        reference = parse_reference_time(reference_time)
        response = await run_search(product.rt, question, NodeFilter(), K, False, tuning, reference=reference)
    seconds = time.perf_counter() - started
    mode = response.search_mode + (f" ({response.degraded_reason})" if response.degraded_reason else "")
    hits = response.results
    return Answer([h.path or "" for h in hits], [h.snippet for h in hits], seconds, mode)


def unbudgeted() -> Tuning:
    """The default ranking with no time limit on the passages the model re-scores at query time: what the
    model would give on a machine fast enough (or a vault already embedded), whatever this machine's load."""
    return replace(DEFAULT_TUNING, rescore_budget=None)


# --- outcomes and metrics ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One question answered by one row: its metric values, the rank (1-based, within the top K) of each
    evidence item or None, the top K result ids, and the search's time."""

    qid: str
    group: str
    metrics: dict[str, float]
    ranks: dict[str, int | None]
    top: list[str]
    seconds: float


def ranks_of(evidence: Iterable[str], ranked: Sequence[str]) -> dict[str, int | None]:
    """Each evidence id's first position (1-based) in `ranked`, or None when it is not there."""
    first: dict[str, int] = {}
    for i, key in enumerate(ranked, 1):
        first.setdefault(key, i)
    return {e: first.get(e) for e in sorted(set(evidence))}


def found_within(ranks: dict[str, int | None], k: int) -> int:
    return sum(1 for r in ranks.values() if r is not None and r <= k)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- reporting -----------------------------------------------------------------------------------------


def paired(a: list[Outcome], b: list[Outcome], metric: str) -> tuple[int, int, int]:
    """Questions where `a` scores better, worse, the same as `b` on `metric` (matched by question id;
    questions without the metric in either are left out)."""
    theirs = {o.qid: o.metrics[metric] for o in b if metric in o.metrics}
    better = worse = same = 0
    for o in a:
        if o.qid not in theirs or metric not in o.metrics:
            continue
        diff = o.metrics[metric] - theirs[o.qid]
        if abs(diff) < 1e-9:
            same += 1
        elif diff > 0:
            better += 1
        else:
            worse += 1
    return better, worse, same


def _mean(outcomes: list[Outcome], metric: str) -> str:
    values = [o.metrics[metric] for o in outcomes if metric in o.metrics]
    return f"{statistics.fmean(values):>{W}.3f}" if values else f"{'-':>{W}}"


def _counts(a: list[Outcome], b: list[Outcome], metric: str) -> str:
    counts = paired(a, b, metric)
    return f"{'/'.join(map(str, counts)) if any(counts) else '-':>{W}}"


def print_rows(
    rows: dict[str, list[Outcome]], groups: Sequence[str], metrics: Sequence[tuple[str, str]]
) -> None:
    """One compact table: per group (then all) a line per row with the mean of each metric ("-": the row
    has no such metric); the paired better/worse/same counts of each row against the baseline; each row's
    search latency (median, p95)."""
    width = max(8, *(len(label) + 1 for label in rows))
    lead = 33
    print(f"  {'group':<{lead - 4}}{'n':>4}  {'row':<{width}}" + "".join(f"{t:>{W}}" for _, t in metrics))
    for group in ("all", *groups):
        first = True
        for label, outcomes in rows.items():
            chosen = [o for o in outcomes if group == "all" or o.group == group]
            if not chosen:
                continue
            name = f"{group:<{lead - 4}}{len(chosen):>4}" if first else " " * lead
            print(f"  {name}  {label:<{width}}" + "".join(_mean(chosen, m) for m, _ in metrics))
            first = False
    base = rows.get(BASELINE)
    others = [label for label in rows if label != BASELINE]
    if base is not None and others:
        print(f"  {'paired against ' + BASELINE + ' (better/worse/same)':<{lead}}")
        for label in others:
            counts = "".join(_counts(rows[label], base, m) for m, _ in metrics)
            print(f"  {'':<{lead}}  {label:<{width}}{counts}")
    for label, outcomes in rows.items():
        if outcomes:
            seconds = [o.seconds for o in outcomes]
            print(
                f"  latency {label:<{width}} median {statistics.median(seconds) * 1000:6.1f} ms, "
                f"p95 {percentile(seconds, 0.95) * 1000:6.1f} ms"
            )


def save_run(path: Path, bench: str, meta: dict[str, Any], rows: dict[str, list[Outcome]]) -> None:
    data = {"bench": bench, "meta": meta, "rows": {k: [asdict(o) for o in v] for k, v in rows.items()}}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def load_run(path: Path) -> tuple[dict[str, Any], dict[str, list[Outcome]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = {k: [Outcome(**o) for o in v] for k, v in data["rows"].items()}
    return data, rows


def _pick_row(rows: dict[str, list[Outcome]], name: str | None, path: Path) -> str:
    if name is None:
        name = next((k for k in rows if k != BASELINE), BASELINE)
    if name not in rows:
        raise SystemExit(f"{path} has no row {name!r}; its rows are {', '.join(rows)}")
    return name


def compare_runs(a_path: Path, b_path: Path, row: str | None = None) -> None:
    """Print the paired better/worse/same counts of run B against run A per metric over the questions both
    answered, and every question that changed. `row` names the row compared ("none"), or one row of each
    run ("none,local"); by default the first product row of each run."""
    _, a_rows = load_run(a_path)
    b_data, b_rows = load_run(b_path)
    a_name, _, b_name = (row or "").partition(",")
    a_row = _pick_row(a_rows, a_name or None, a_path)
    b_row = _pick_row(b_rows, b_name or a_name or None, b_path)
    before = {o.qid: o for o in a_rows[a_row]}
    b = [o for o in b_rows[b_row] if o.qid in before]
    a = [before[o.qid] for o in b]
    print(
        f"{b_path} ({b_row}) against {a_path} ({a_row}), {b_data['bench']}, {len(b)} questions in both: "
        "better/worse/same"
    )
    for m in dict.fromkeys(k for o in a + b for k in o.metrics):
        better, worse, same = paired(b, a, m)
        print(
            f"  {m:<14}{better:>5} better{worse:>5} worse{same:>6} same   mean {_mean(a, m).strip()} -> {_mean(b, m).strip()}"
        )
    changed = [(old, new) for old, new in zip(a, b, strict=True) if old.metrics != new.metrics]
    print(f"  {len(changed)} question(s) changed (evidence ranks A -> B):")
    for old, new in changed:
        ranks = ", ".join(f"{e}: {old.ranks.get(e)} -> {new.ranks.get(e)}" for e in sorted(new.ranks))
        print(f"    {new.qid:<16}{new.group:<27}{ranks}")


def bench_parser(description: str, data: Path, backfill_help: str) -> argparse.ArgumentParser:
    """The options both retrieval benches take; each adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--embedder", choices=("none", "local", "both"), default="both")
    parser.add_argument("--backfill", action="store_true", help=backfill_help)
    parser.add_argument(
        "--no-budget",
        action="store_true",
        help="let the model re-score all its passages whatever the time (quality apart from this machine's load)",
    )
    parser.add_argument("--dimensions", type=int, help="vector size, when the local model offers several")
    parser.add_argument(
        "--edits",
        type=int,
        default=0,
        metavar="K",
        help="a vault in use: every note edited and put back K times (each step synced) before the questions",
    )
    parser.add_argument("--data", type=Path, default=data)
    parser.add_argument("--out", type=Path, help="write per-question results to this JSON file")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two saved runs")
    parser.add_argument("--row", help='with --compare: the row ("none"), or one per run ("none,local")')
    return parser


def run_or_compare(
    args: argparse.Namespace, run: Callable[[argparse.Namespace], Coroutine[Any, Any, None]]
) -> None:
    """`--compare A B` prints the paired comparison of two saved runs; otherwise the bench runs."""
    if args.compare:
        compare_runs(*args.compare, row=args.row)
        return
    asyncio.run(run(args))
