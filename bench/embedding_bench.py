"""The local model's costs, and how passage vectors are best stored in sqlite-vec.

    .venv/bin/python bench/embedding_bench.py model --passages 64
    .venv/bin/python bench/embedding_bench.py storage --vectors 50000 --queries 50

`model`: load time, RSS the model adds, passages/s for 120-word passages (one text per run and length-sorted
batches), and the median query embedding time. Passages are sliding 120-word windows over a LoCoMo
conversation (../shared/data/locomo), the shape the product embeds.

`storage`: the same vectors in vec0 as float32, int8 (scaled so that [-1, 1] fills [-128, 127]) and bit (sign
only, then the top candidates rescored with their int8 vectors): milliseconds for a k=100 scan, recall of the
exact float top 100, and bytes per vector in the file. The corpus is the model's vectors of LoCoMo turns, padded
to `--vectors` with noisy copies of them (a denser neighbourhood than real notes give, so recall here is a
lower bound); queries are LoCoMo questions. Figures go to stdout; logs to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from server.embeddings.local import MiniLM, default_threads  # noqa: E402
from server.store.database import connect_sync  # noqa: E402

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo"


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="utf-8") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def locomo_turns() -> tuple[list[str], list[str]]:
    turns: list[str] = []
    questions: list[str] = []
    for path in sorted(LOCOMO.glob("conv-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, value in data.items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [t["text"] for t in value if isinstance(t, dict) and t.get("text")]
        questions += [qa["question"] for qa in data.get("qa", []) if qa.get("question")]
    return turns, questions


def passages(words: list[str], count: int, size: int = 120) -> list[str]:
    step = size // 2
    return [" ".join(words[i : i + size]) for i in range(0, step * count, step)]


def bench_model(args: argparse.Namespace) -> None:
    turns, questions = locomo_turns()
    texts = passages(" ".join(turns).split(), args.passages)
    before = rss_mb()
    start = time.perf_counter()
    model = MiniLM.load(args.threads)
    load = time.perf_counter() - start
    model.embed(["warm up"])
    print(f"threads {args.threads}; load {load:.2f} s; RSS added by the session {rss_mb() - before:.0f} MB")
    for label, run in (
        ("one per run", lambda: [model.embed([t]) for t in texts]),
        ("batched", lambda: model.embed(texts)),
    ):
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
        print(f"{label}: {len(texts) / seconds:.1f} passages/s ({1000 * seconds / len(texts):.0f} ms each)")
    times = []
    for question in questions[: args.queries]:
        start = time.perf_counter()
        model.embed([question])
        times.append(time.perf_counter() - start)
    print(f"query: median {1000 * statistics.median(times):.1f} ms, max {1000 * max(times):.1f} ms")
    print(f"RSS added after the runs {rss_mb() - before:.0f} MB")


def corpus_vectors(model: MiniLM, count: int, rng: np.random.Generator) -> np.ndarray:
    turns, _ = locomo_turns()
    real = model.embed(turns)
    copies = [real]
    while sum(len(c) for c in copies) < count:
        noisy = real + rng.normal(0, 0.03, real.shape).astype(np.float32)  # cosine to the original ~0.85
        copies.append(noisy / np.linalg.norm(noisy, axis=1, keepdims=True))
    return np.concatenate(copies)[:count]


def int8_blob(matrix: np.ndarray) -> list[bytes]:
    return [row.tobytes() for row in np.clip(np.round(matrix * 127), -127, 127).astype(np.int8)]


def bench_storage(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    model = MiniLM.load(default_threads())
    vectors = corpus_vectors(model, args.vectors, rng)
    _, questions = locomo_turns()
    queries = model.embed(questions[: args.queries])
    exact = [set(np.argsort(-(vectors @ q))[: args.k].tolist()) for q in queries]
    with tempfile.TemporaryDirectory() as tmp:
        conns = {kind: build_table(Path(tmp), kind, vectors) for kind in KINDS}
        wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
        cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
        recall: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for q, truth in zip(queries, exact, strict=True):
            for kind in KINDS:  # interleaved, so a busy moment on a shared machine hits every kind alike
                start, start_cpu = time.perf_counter(), time.thread_time()
                found = search(conns[kind][0], kind, q, args.k)
                cpu[kind].append(time.thread_time() - start_cpu)
                wall[kind].append(time.perf_counter() - start)
                recall[kind].append(len(truth & {i - 1 for i in found}) / args.k)
        for kind in KINDS:
            conn, size = conns[kind]
            print(
                f"{kind:5}: k={args.k} over {len(vectors)} vectors: median {ms(wall[kind])} ms "
                f"(CPU {ms(cpu[kind])} ms), p95 {ms(wall[kind], 0.95)} ms; recall of the exact top {args.k} "
                f"{statistics.mean(recall[kind]):.3f}; {size / len(vectors):.0f} bytes per vector"
            )
            conn.close()


KINDS = ("float", "int8", "bit")


def ms(times: list[float], quantile: float = 0.5) -> str:
    return f"{1000 * sorted(times)[int(quantile * (len(times) - 1))]:.1f}"


def build_table(folder: Path, kind: str, vectors: np.ndarray) -> tuple[Any, int]:
    """A database holding `vectors` as `kind`, and its size in bytes."""
    db = folder / f"{kind}.db"
    conn, vec = connect_sync(db)
    assert vec.ok, vec.reason
    column = {"float": "float[384]", "int8": "int8[384]", "bit": "bit[384]"}[kind]
    conn.execute("begin")
    conn.execute(f"create virtual table v using vec0(embedding {column})")
    if kind == "bit":
        conn.execute("create table r (id integer primary key, q blob)")  # int8 copies for rescoring
    blobs = int8_blob(vectors) if kind != "float" else [r.tobytes() for r in vectors]
    value = {"float": "?", "int8": "vec_int8(?)", "bit": "vec_quantize_binary(vec_int8(?))"}[kind]
    conn.executemany(f"insert into v (rowid, embedding) values (?, {value})", enumerate(blobs, 1))
    if kind == "bit":
        conn.executemany("insert into r values (?, ?)", enumerate(blobs, 1))
    conn.execute("commit")
    conn.execute("vacuum")
    conn.execute("pragma mmap_size = 1073741824")
    return conn, db.stat().st_size


def search(conn: object, kind: str, q: np.ndarray, k: int) -> list[int]:
    execute = conn.execute  # type: ignore[attr-defined]
    if kind == "float":
        sql = "select rowid from v where embedding match ? and k = ?"
        return [r[0] for r in execute(sql, (q.tobytes(), k))]
    if kind == "int8":
        sql = "select rowid from v where embedding match vec_int8(?) and k = ?"
        return [r[0] for r in execute(sql, (int8_blob(q[None])[0], k))]
    sql = "select rowid from v where embedding match vec_quantize_binary(vec_int8(?)) and k = ?"
    ids = [r[0] for r in execute(sql, (int8_blob(q[None])[0], 4 * k))]
    marks = ",".join("?" * len(ids))
    rows = execute(f"select id, q from r where id in ({marks})", ids).fetchall()
    scores = {i: float(np.frombuffer(b, dtype=np.int8).astype(np.float32) @ q) for i, b in rows}
    return sorted(scores, key=scores.__getitem__, reverse=True)[:k]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    model = sub.add_parser("model")
    model.add_argument("--passages", type=int, default=64)
    model.add_argument("--queries", type=int, default=50)
    model.add_argument("--threads", type=int, default=default_threads())
    storage = sub.add_parser("storage")
    storage.add_argument("--vectors", type=int, default=50_000)
    storage.add_argument("--queries", type=int, default=50)
    storage.add_argument("-k", type=int, default=100)
    args = parser.parse_args()
    bench_model(args) if args.what == "model" else bench_storage(args)


if __name__ == "__main__":
    main()
