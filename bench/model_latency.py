"""Where a search's time goes with the local model (issue 13), at scale and while the backfill runs.

    .venv/bin/python bench/model_latency.py scale --work /tmp/ml                 # 10,000 notes, backfilled
    .venv/bin/python bench/model_latency.py first --limit 40                    # LongMemEval first searches
    .venv/bin/python bench/model_latency.py backfill --work /tmp/ml             # 10,000 notes, worker running
    .venv/bin/python bench/model_latency.py recall --work /tmp/ml               # the scan's recall, real vectors

`scale`: a 10,000-note vault (bench/vaultgen.py, or `--vault` to copy a ready one) is synced into a real
database once (kept in `--work`), and every passage (~130,000) gets a vector. Embedding them for real takes
hours on 2 cores, so **these vectors are not the model's**: they are random unit vectors of the model's shape
(384 int8 components), stored through the product's own `store_vectors` under the local model's key. That is
fair for what this phase measures, the *cost* of the scan (brute force: it reads every vector whatever they
hold), not the quality of what it finds. Queries are embedded by the real model. Each query runs through
`search()` as the tool asks it, with the time of each step: the query's vector, the vector scan (on the aside
connection, beside bm25), the text part of step 1, the model's re-scoring, and fusion to the end.

`first`: LongMemEval questions (../shared/data/longmemeval), each a first search on a fresh vault with the
model loaded and nothing embedded, as bench/longmemeval.py runs them: the case of a vault whose backfill has
not started. Same breakdown, plus how many searches one question made (order questions search each event).

`backfill`: the `scale` database with the vectors of a share of the notes removed, and the real embedding
worker (`embedding_worker`) backfilling them while the queries run.

`recall`: **real vectors**: the LoCoMo conversations (../shared/data/locomo) as notes (or, with `--store lme`,
the haystack sessions of the first `--lme-questions` LongMemEval questions), every passage embedded by the model
(kept in `--work`), and the benchmark's questions as queries. For each: the exact top 100 by float cosine (the
model's own float vectors), against what the product's scan keeps (`vectors_sql.nearest_chunks`), and the int8
single-stage scan beside it. Then the same queries over those vectors padded with noisy copies of them to
`--crowded` (0: skip): a deliberately crowded store of the size of a 10,000-note vault.

Timing figures are medians and p95 of wall time on a shared machine: compare rows measured in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_bench import draw_queries  # noqa: E402
from vaultgen import generate_vault  # noqa: E402

from server.embeddings.local import LocalEmbedder  # noqa: E402
from server.embeddings.worker import (  # noqa: E402
    attach_embedder,
    current_search_status,
    embedding_worker,
    model_key,
    prepare_vector_table,
    store_batch,
)
from server.runtime import Runtime, open_runtime  # noqa: E402
from server.search import service  # noqa: E402
from server.settings import Settings  # noqa: E402
from server.store import vectors_sql  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DIMS = 384
FILL_BATCH = 2_000


# --- timing each step -------------------------------------------------------------------------------------


class Steps:
    """Seconds spent in each timed step of the searches run while `timing()` is on."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = defaultdict(list)
        self.current: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def begin(self) -> None:
        self.current = defaultdict(float)
        self.calls = defaultdict(int)

    def end(self) -> dict[str, float]:
        for name, value in self.current.items():
            self.seconds[name].append(value)
        return dict(self.current)


STEPS = Steps()


def _timed_async(name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            STEPS.current[name] += time.perf_counter() - started
            STEPS.calls[name] += 1

    return wrapper


def _timed_sync(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            STEPS.current[name] += time.perf_counter() - started

    return wrapper


@contextmanager
def timing() -> Iterator[None]:
    """Wrap the search's steps (module globals of server.search.service) with timers, for this bench only."""
    names = {
        "_query_vector": ("query vector", _timed_async),
        "_aside_hits": ("vector scan (aside)", _timed_sync),
        "_gather": ("text step 1 + wait for scan", _timed_sync),
        "_rescore": ("model re-scoring", _timed_async),
        "_finish": ("fusion to the end", _timed_sync),
        "run_search": ("searches", _timed_async),
    }
    saved = {attr: getattr(service, attr) for attr in names}
    for attr, (label, wrap) in names.items():
        setattr(service, attr, wrap(label, saved[attr]))
    try:
        yield
    finally:
        for attr, fn in saved.items():
            setattr(service, attr, fn)


def ms(values: list[float], q: float = 0.5) -> str:
    ordered = sorted(values)
    return f"{1000 * ordered[round(q * (len(ordered) - 1))]:7.1f}"


def report(title: str, totals: list[float], steps: Steps | None = None) -> None:
    print(f"{title}: {len(totals)} searches, median {ms(totals)} ms, p95 {ms(totals, 0.95)} ms")
    for name, values in (steps or STEPS).seconds.items():
        if name != "searches":
            print(f"  {name:<30} median {ms(values)} ms, p95 {ms(values, 0.95)} ms")


async def timed_searches(rt: Runtime, queries: list[str], **kwargs: Any) -> list[float]:
    totals = []
    with timing():
        for query in queries:
            STEPS.begin()
            started = time.perf_counter()
            await service.search(rt, query, **kwargs)
            totals.append(time.perf_counter() - started)
            STEPS.end()
    return totals


# --- scale: 10,000 notes with vectors of the right shape ---------------------------------------------------


def settings_for(vault: Path, db: Path) -> Settings:
    return Settings(vault=vault, db_path=db, embedding_provider="local", watch=False, settle=0)


async def prepared_scale(work: Path, source: Path | None, notes: int) -> tuple[Path, Path]:
    """The vault and database of the `scale` phase, made once and kept in `work`."""
    vault, db = work / "vault", work / "graph.db"
    if db.exists() and (work / "ready").exists():
        return vault, db
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if source is not None:
        shutil.copytree(source, vault)
    else:
        generate_vault(vault, notes, 0, "realistic")
    async with open_runtime(settings_for(vault, db)) as rt:
        started = time.perf_counter()
        await rt.require_sync().sync_vault()
        print(f"synced in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        started = time.perf_counter()
        stored = await fill_random_vectors(rt)
        print(f"{stored} random vectors stored in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    (work / "ready").write_text("ok", encoding="utf-8")
    return vault, db


async def fill_random_vectors(rt: Runtime) -> int:
    """Every waiting passage gets a random unit vector of the local model's shape and key (not its meaning)."""
    key = model_key(LocalEmbedder())
    await rt.store.write(vectors_sql.ensure_vector_table, key, DIMS)
    rng = np.random.default_rng(0)
    stored = 0
    while pending := await rt.store.read(vectors_sql.pending_chunks, FILL_BATCH):
        matrix = rng.normal(size=(len(pending), DIMS)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        stored += await rt.store.write(store_batch, key, pending, matrix.tolist())
    return stored


async def run_scale(args: argparse.Namespace) -> None:
    vault, db = await prepared_scale(Path(args.work), args.vault, args.notes)
    paths = sorted(vault.rglob("*.md"))
    queries = draw_queries(paths, args.queries, args.seed)
    async with open_runtime(settings_for(vault, db)) as rt:
        embedder = LocalEmbedder()
        started = time.perf_counter()
        await prepare_vector_table(rt, embedder)  # fills the signs once on a database without them
        print(f"vector table ready in {time.perf_counter() - started:.1f} s (model load included)")
        await attach_embedder(rt, embedder)
        total, waiting = await rt.store.read(vectors_sql.progress)
        print(f"{total} passages with a vector, {waiting} waiting (random vectors: see the docstring)")
        await service.search(rt, "warm up the caches")
        before = Steps()
        totals, baseline = [], []
        for query in queries:  # interleaved, so the machine's load hits both alike
            totals += await timed_searches(rt, [query])
            with single_stage(), swapped(before):
                baseline += await timed_searches(rt, [query])
        report("hybrid, backfilled (the product)", totals, STEPS)
        report("hybrid, backfilled, int8 scan only (as before the two-stage scan)", baseline, before)
        print(f"  ratio of medians: {statistics.median(totals) / statistics.median(baseline):.2f}")
        await scan_alone(rt, queries[: args.scans], embedder)
        await embedder.aclose()


@contextmanager
def single_stage() -> Iterator[None]:
    """The scan as it was before the two-stage one: vec0's int8 scan of every vector (bench only)."""
    saved = vectors_sql._two_stage
    vectors_sql._two_stage = lambda *args: None  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    finally:
        vectors_sql._two_stage = saved


@contextmanager
def swapped(steps: Steps) -> Iterator[None]:
    """Record into `steps` instead of the global STEPS while inside."""
    global STEPS
    saved, STEPS = STEPS, steps
    try:
        yield
    finally:
        STEPS = saved


async def scan_alone(rt: Runtime, queries: list[str], embedder: LocalEmbedder) -> None:
    """The product's scan (`nearest_chunks`) against the single-stage int8 vec0 scan, interleaved."""
    vectors = await embedder.embed(queries)
    times: dict[str, list[float]] = {"product scan": [], "int8 vec0 scan": []}
    for vector in vectors:
        for name, fn in (("product scan", _product_scan), ("int8 vec0 scan", _int8_scan)):
            started = time.perf_counter()
            await rt.store.read(fn, vector)
            times[name].append(time.perf_counter() - started)
    for name, values in times.items():
        print(f"  {name:<30} median {ms(values)} ms, p95 {ms(values, 0.95)} ms (k=100, main connection)")


def _product_scan(conn: Any, vector: list[float]) -> list[tuple[int, str, float]]:
    return vectors_sql.nearest_chunks(conn, vector, 100, "1", [])


def _int8_scan(conn: Any, vector: list[float]) -> list[int]:
    return [chunk_id for chunk_id, _ in vectors_sql.int8_scan(conn, vectors_sql.vector_blob(vector), 100)]


# --- backfill: the worker runs while searching ------------------------------------------------------------


async def run_backfill(args: argparse.Namespace) -> None:
    vault, db = await prepared_scale(Path(args.work), args.vault, args.notes)
    paths = sorted(vault.rglob("*.md"))
    queries = draw_queries(paths, args.queries, args.seed + 1)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "graph.db"
        shutil.copy(db, copy)
        async with open_runtime(settings_for(vault, copy)) as rt:
            removed = await rt.store.write(_forget_vectors, args.share)
            print(f"vectors of {removed} passages removed: the worker embeds them while the queries run")
            async with embedding_worker(rt, embedder=LocalEmbedder()) as worker:
                assert worker is not None
                while current_search_status(rt).get("mode") != "hybrid":
                    await asyncio.sleep(0.05)
                await service.search(rt, "warm up the caches")
                totals = await timed_searches(rt, queries)
                report("hybrid, while the worker backfills", totals)
                print(f"  worker status: {rt.state.get('embedder_status')}")


def _forget_vectors(conn: Any, share: float) -> int:
    """Mark the passages of a share of the notes as waiting again, and drop their vectors."""
    rows = conn.execute(
        "select id from chunks where node_id in (select id from nodes where abs(random()) % 1000 < ?)",
        (int(share * 1000),),
    ).fetchall()
    ids = [r[0] for r in rows]
    conn.executemany(f"delete from {vectors_sql.VEC_TABLE} where rowid = ?", [(i,) for i in ids])
    conn.executemany("update chunks set embedded_model = null where id = ?", [(i,) for i in ids])
    return len(ids)


# --- first: LongMemEval, every question a first search on a fresh vault ------------------------------------


async def run_first(args: argparse.Namespace) -> None:
    from longmemeval import DATA, load, reference_time, session_notes, write_vault

    questions = load(DATA, args.limit)
    totals: list[float] = []
    searches: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        embedder = LocalEmbedder()
        for i, question in enumerate(questions):
            work = Path(tmp) / f"q{i}"
            write_vault(work / "vault", session_notes(question))
            async with open_runtime(settings_for(work / "vault", work / "graph.db")) as rt:
                await rt.require_sync().sync_vault()
                await prepare_vector_table(rt, embedder)
                await attach_embedder(rt, embedder)
                with timing(), one_budget() if args.one_budget else nullcontext():
                    STEPS.begin()
                    started = time.perf_counter()
                    await service.search(rt, question["question"], reference_time=reference_time(question))
                    totals.append(time.perf_counter() - started)
                    searches.append(STEPS.calls["searches"])
                    STEPS.end()
            shutil.rmtree(work, ignore_errors=True)
        await embedder.aclose()
    title = "one re-scoring budget per question" if args.one_budget else "each search its own budget"
    report(f"LongMemEval, first search on a fresh vault ({title})", totals)
    slow = sorted(range(len(totals)), key=lambda i: -totals[i])[:5]
    for i in slow:
        print(f"  slow: {1000 * totals[i]:.0f} ms, {searches[i]} searches: {questions[i]['question'][:70]!r}")


@contextmanager
def one_budget() -> Iterator[None]:
    """Bench only, to measure a change proposed to search: the searches one question makes (an order
    question searches each event too) share the model's re-scoring budget instead of each having its own."""
    inner = service.run_search
    started: list[float] = []

    async def run_search(rt: Runtime, query: str, *args: Any, **kwargs: Any) -> Any:
        if not started:
            started.append(time.monotonic())
            try:
                return await inner(rt, query, *args, **kwargs)
            finally:
                started.clear()
        tuning = args[3]  # run_search(rt, query, where, limit, explain, tuning, ...)
        left = max(0.0, (tuning.rescore_budget or 0.0) - (time.monotonic() - started[0]))
        args = (*args[:3], replace(tuning, rescore_budget=left), *args[4:])
        return await inner(rt, query, *args, **kwargs)

    service.run_search = run_search
    try:
        yield
    finally:
        service.run_search = inner


# --- recall: real vectors ---------------------------------------------------------------------------------


def write_store_vault(vault: Path, store: str, lme_questions: int) -> list[str]:
    """The notes of the real store (LoCoMo's sessions, or the haystack sessions of the first
    `lme_questions` LongMemEval questions, each once) under `vault`; returns the questions to ask."""
    if store == "locomo":
        from locomo import write_vault  # the LoCoMo bench's own notes

        return [q.text for q in write_vault(vault)]
    from longmemeval import DATA, load, session_notes, write_vault

    questions = load(DATA)
    seen: set[str] = set()
    for i, question in enumerate(questions[:lme_questions]):
        notes = [n for n in session_notes(question) if n.session not in seen]
        seen.update(n.session for n in notes)
        write_vault(vault / f"q{i:03d}", notes)
    return [q["question"] for q in questions]  # every question: a query need not have its answer stored


async def prepared_store(work: Path, store: str, lme_questions: int) -> tuple[Path, Path, Path]:
    """A vault of real text, its database with every passage embedded by the model, the float vectors."""
    vault, db, floats = work / "vault", work / "graph.db", work / "floats.npz"
    if floats.exists():
        return vault, db, floats
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_store_vault(vault, store, lme_questions)
    embedder = LocalEmbedder()
    ids: list[int] = []
    rows: list[np.ndarray] = []
    async with open_runtime(settings_for(vault, db)) as rt:
        await rt.require_sync().sync_vault()
        await prepare_vector_table(rt, embedder)
        model = await embedder.loaded()
        key = model_key(embedder)
        while pending := await rt.store.read(vectors_sql.pending_chunks, 64):
            texts = [c.embedding_text() for c in pending]
            halves = await asyncio.gather(  # both cores: the session's runs are thread-safe
                asyncio.to_thread(model.embed, texts[:32]), asyncio.to_thread(model.embed, texts[32:])
            )
            matrix = np.concatenate([h for h in halves if len(h)])
            await rt.store.write(store_batch, key, pending, matrix.tolist())
            ids += [c.id for c in pending]
            rows.append(matrix)
            print(f"  {len(ids)} passages embedded", file=sys.stderr)
    np.savez(floats, ids=np.array(ids), vectors=np.concatenate(rows))
    await embedder.aclose()
    return vault, db, floats


async def run_recall(args: argparse.Namespace) -> None:
    name = args.store if args.store == "locomo" else f"lme{args.lme_questions}"
    vault, db, floats = await prepared_store(Path(args.work) / name, args.store, args.lme_questions)
    saved = np.load(floats)
    ids, matrix = saved["ids"], saved["vectors"]
    with tempfile.TemporaryDirectory() as tmp:
        questions = write_store_vault(Path(tmp), args.store, 0)[: args.queries]
    embedder = LocalEmbedder()
    queries = (await embedder.loaded()).embed(questions)
    found: dict[str, list[float]] = defaultdict(list)
    async with open_runtime(settings_for(vault, db)) as rt:
        await prepare_vector_table(rt, embedder)
        for q in queries:
            exact = set(ids[np.argsort(-(matrix @ q))[:100]].tolist())
            product = await rt.store.read(_product_scan, q.tolist())
            single = await rt.store.read(_int8_scan, q.tolist())
            found["product scan"].append(len(exact & {r[0] for r in product}) / 100)
            found["int8 vec0 scan"].append(len(exact & set(single)) / 100)
            found["product = int8 scan"].append(len(set(single) & {r[0] for r in product}) / 100)
    print(f"{len(ids)} passages ({name}, the model's vectors), {len(queries)} questions:")
    for name, values in found.items():
        print(f"  recall of the exact float top 100, {name:<22} mean {statistics.mean(values):.3f}")
    await embedder.aclose()
    if args.crowded:
        crowded_recall(matrix, queries, args.crowded)


def _two_stage_scan(conn: Any, blob: bytes, k: int) -> list[tuple[int, float]]:
    return vectors_sql._two_stage(conn, blob, k) or []


def crowded_recall(real: np.ndarray, queries: np.ndarray, count: int) -> None:
    """The same queries over the real vectors padded with noisy copies of them to `count` (as in
    bench/embedding_bench.py storage: a neighbourhood denser than real notes give, so a lower bound)."""
    from server.store.database import connect_sync

    rng = np.random.default_rng(7)
    parts, total = [real], len(real)
    while total < count:
        noisy = real + rng.normal(0, 0.03, real.shape).astype(np.float32)
        parts.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
        total += len(real)
    vectors = np.concatenate(parts)[:count]
    found: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        conn, _ = connect_sync(Path(tmp) / "crowded.db")
        conn.execute("begin")
        vectors_sql.ensure_vector_table(conn, "bench:crowded", DIMS)
        blobs = [(i + 1, vectors_sql.vector_blob(v.tolist())) for i, v in enumerate(vectors)]
        for start in range(0, len(blobs), vectors_sql.SIGN_ROW):
            vectors_sql.add_vectors(conn, blobs[start : start + vectors_sql.SIGN_ROW])
        conn.execute("commit")
        conn.execute(f"pragma mmap_size = {vectors_sql.MMAP_BYTES}")
        times: dict[str, list[float]] = defaultdict(list)
        for q in queries:
            exact = set((np.argsort(-(vectors @ q))[:100] + 1).tolist())
            blob = vectors_sql.vector_blob(q.tolist())
            for name, scan in (
                ("two-stage scan", _two_stage_scan),
                ("int8 vec0 scan", vectors_sql.int8_scan),
            ):
                started = time.perf_counter()
                kept = {i for i, _ in scan(conn, blob, 100)}
                times[name].append(time.perf_counter() - started)
                found[name].append(len(exact & kept) / 100)
        conn.close()
    print(f"{count} vectors (the real ones and noisy copies of them), {len(queries)} questions:")
    for name, values in found.items():
        print(
            f"  recall of the exact float top 100, {name:<22} mean {statistics.mean(values):.3f}; "
            f"scan median {ms(times[name])} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phase", choices=("scale", "first", "backfill", "recall"))
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "engrama-model-latency"))
    parser.add_argument("--vault", type=Path, help="copy this vault instead of generating one")
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--scans", type=int, default=30, help="queries for the scan-alone comparison")
    parser.add_argument("--limit", type=int, default=40, help="first: LongMemEval questions")
    parser.add_argument("--share", type=float, default=0.5, help="backfill: share of notes to re-embed")
    parser.add_argument(
        "--one-budget", action="store_true", help="first: the searches of one question share one budget"
    )
    parser.add_argument("--crowded", type=int, default=130_000, help="recall: vectors of the padded store")
    parser.add_argument("--store", choices=("locomo", "lme"), default="locomo", help="recall: the real text")
    parser.add_argument("--lme-questions", type=int, default=6, help="recall: haystacks in the lme store")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run = {"scale": run_scale, "first": run_first, "backfill": run_backfill, "recall": run_recall}
    asyncio.run(run[args.phase](args))


if __name__ == "__main__":
    main()
