"""Throwaway exploration: passage-level retrieval on LoCoMo (numbers for a later decision, not product code).

One note per session (title = session date), body = one `Speaker: text` line per turn, chunked with
vault_sync.chunking, indexed in FTS5 through sqlean. Session-level recall@5/@10 (a question counts as found when
any evidence session is in the top k) and MRR (first evidence session), categories 1-4.

Run: .venv/bin/python bench/_explore_locomo.py [--dense]
"""

from __future__ import annotations

import glob
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable

import sqlean

from server.search.fts_query import build_match
from vault_sync.chunking import chunk_body

DATA = "/work/shared/data/locomo/*.json"
LINE_IDS: dict[tuple[str, str], str] = {}  # (note id, line text) -> conversation/dia_id
EVIDENCE: dict[str, set[str]] = {}  # question -> conversation/dia_ids


def load():
    notes, questions = [], []  # notes: (note_id, title, body, [dia_ids per line])
    for path in sorted(glob.glob(DATA)):
        with open(path, encoding="utf-8") as f:
            conv = json.load(f)
        cid = path.rsplit("/", 1)[-1].removesuffix(".json")
        k = 1
        while f"session_{k}" in conv:
            turns = conv[f"session_{k}"]
            title = f"Session {k} — {conv[f'session_{k}_date_time']}"
            body = "\n".join(f"{t['speaker']}: {t['text']}" for t in turns)
            notes.append((f"{cid}/{k}", title, body))
            for t in turns:
                LINE_IDS[f"{cid}/{k}", f"{t['speaker']}: {t['text']}".strip()] = f"{cid}/{t['dia_id']}"
            k += 1
        for qa in conv["qa"]:
            if qa["category"] == 5:
                continue
            sessions = set()
            for ev in qa.get("evidence", []):
                for part in ev.replace(",", ";").split(";"):
                    part = part.strip()
                    if part.startswith("D") and ":" in part:
                        sessions.add(f"{cid}/{part[1:].split(':')[0]}")
            if sessions:
                questions.append((qa["question"], sessions, qa["category"]))
                EVIDENCE[qa["question"]] = {f"{cid}/{e.strip()}" for e in qa.get("evidence", [])}
    return notes, questions


def evaluate(questions, rank: Callable[[str], list[str]]):
    r5 = r10 = mrr = any5 = 0.0
    by_cat = defaultdict(list)
    t0 = time.perf_counter()
    for q, gold, cat in questions:
        ranked = rank(q)
        first = next((i for i, n in enumerate(ranked) if n in gold), None)
        hit5 = len(gold & set(ranked[:5])) / len(gold)
        any5 += first is not None and first < 5
        r5 += hit5
        r10 += len(gold & set(ranked[:10])) / len(gold)
        mrr += 0 if first is None else 1 / (first + 1)
        by_cat[cat].append(hit5)
    n = len(questions)
    ms = (time.perf_counter() - t0) / n * 1000
    cats = " ".join(f"c{c}={sum(v) / len(v):.2f}" for c, v in sorted(by_cat.items()))
    return f"R@5 {r5 / n:.3f}  R@10 {r10 / n:.3f}  MRR {mrr / n:.3f}  any@5 {any5 / n:.3f} ({ms:.1f} ms/q; {cats})"


def whole_note_index(notes, tokenizer="porter unicode61 remove_diacritics 2"):
    db = sqlean.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE n USING fts5(nid UNINDEXED, title, body, tokenize='{tokenizer}')")
    db.executemany("INSERT INTO n VALUES (?,?,?)", notes)
    return db


def rank_whole(db, weights=(1.0, 1.0)):
    def rank(q):
        m = build_match(q)
        if m is None:
            return []
        sql = f"SELECT nid FROM n WHERE n MATCH ? ORDER BY bm25(n, 0, {weights[0]}, {weights[1]}) LIMIT 10"
        return [r[0] for r in db.execute(sql, (m,))]

    return rank


def passages(notes, **chunk_kw):
    out = []  # (nid, title, text)
    for nid, title, body in notes:
        for c in chunk_body(body, **chunk_kw):
            out.append((nid, title, c.text))
    return out


def passage_index(rows, prepend=True, tokenizer="porter unicode61 remove_diacritics 2"):
    db = sqlean.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE p USING fts5(nid UNINDEXED, title, text, tokenize='{tokenizer}')")
    if prepend:
        db.executemany("INSERT INTO p VALUES (?,?,?)", [(n, "", f"{t}\n{x}") for n, t, x in rows])
    else:
        db.executemany("INSERT INTO p VALUES (?,?,?)", rows)
    return db


def aggregate(scored, how):
    """scored: list of (nid, score) best first (higher is better) -> ranked nids."""
    per = defaultdict(list)
    for nid, s in scored:
        per[nid].append(s)
    if how == "max":
        agg = {n: max(v) for n, v in per.items()}
    elif how.startswith("top"):  # topK-sum
        k = int(how[3:])
        agg = {n: sum(sorted(v, reverse=True)[:k]) for n, v in per.items()}
    elif how.startswith("decay"):  # max + w * second + w^2 * third
        w = float(how[5:])
        agg = {n: sum(s * w**i for i, s in enumerate(sorted(v, reverse=True)[:3])) for n, v in per.items()}
    else:
        raise ValueError(how)
    return sorted(agg, key=lambda n: -agg[n])


def bm25_passages(db, q, weights=(1.0, 1.0), prefix=False, limit=200):
    m = build_match(q, prefix=prefix)
    if m is None:
        return []
    sql = f"SELECT nid, -bm25(p, 0, {weights[0]}, {weights[1]}) s FROM p WHERE p MATCH ? ORDER BY s DESC LIMIT {limit}"
    return list(db.execute(sql, (m,)))


def rank_passages(db, how="max", **kw):
    return lambda q: aggregate(bm25_passages(db, q, **kw), how)[:10]


def scores_whole(db, q, weights=(1.0, 1.0)):
    m = build_match(q)
    if m is None:
        return {}
    sql = f"SELECT nid, -bm25(n, 0, {weights[0]}, {weights[1]}) FROM n WHERE n MATCH ?"
    return dict(db.execute(sql, (m,)))


def scores_passages(db, q, how="max", **kw):
    per = {}
    for nid, s in bm25_passages(db, q, limit=100000, **kw):
        per[nid] = max(per.get(nid, s), s) if how == "max" else per.get(nid, 0) + s
    return per


def ranked(scores):
    return sorted(scores, key=lambda n: -scores[n])[:10]


def minmax(d):
    if not d:
        return {}
    lo, hi = min(d.values()), max(d.values())
    return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in d.items()}


def fuse_minmax(a, b, wa):
    a, b = minmax(a), minmax(b)
    return {k: wa * a.get(k, 0) + (1 - wa) * b.get(k, 0) for k in set(a) | set(b)}


def fuse_rrf(a, b, k, wa=0.5):
    ra = {n: i for i, n in enumerate(sorted(a, key=lambda n: -a[n]))}
    rb = {n: i for i, n in enumerate(sorted(b, key=lambda n: -b[n]))}
    return {n: wa / (k + 1 + ra.get(n, 1e9)) + (1 - wa) / (k + 1 + rb.get(n, 1e9)) for n in set(ra) | set(rb)}


def dense_scores_factory(rows, embed):
    import numpy as np

    texts = [f"{t}\n{x}" for _, t, x in rows]
    t0 = time.perf_counter()
    mat = np.asarray(embed(texts), dtype=np.float32)
    print(f"  embedded {len(texts)} passages in {time.perf_counter() - t0:.1f}s")
    mat /= np.linalg.norm(mat, axis=1, keepdims=True) + 1e-9
    nids = [n for n, _, _ in rows]

    def scores(q):
        v = np.asarray(embed([q])[0], dtype=np.float32)
        v /= np.linalg.norm(v) + 1e-9
        sims = mat @ v
        per = {}
        for nid, s in zip(nids, sims.tolist(), strict=True):
            if s > per.get(nid, -2):
                per[nid] = s
        return per

    return scores


def main():
    notes, questions = load()
    print(f"{len(notes)} notes, {len(questions)} questions (cat 1-4)")
    wdb = whole_note_index(notes)
    if "--grid" in sys.argv:
        grid(notes, questions)
        return
    rows = passages(notes)  # the chunker's defaults
    pdb = passage_index(rows)
    sdb = passage_index(rows, prepend=False)
    print(f"passages with chunk_body defaults: n={len(rows)}")
    qs = [q for q, _, _ in questions]
    R = {}  # ranker name -> {question: {note: score}}
    R["whole"] = {q: scores_whole(wdb, q) for q in qs}
    R["whole_t3"] = {q: scores_whole(wdb, q, (3.0, 1.0)) for q in qs}
    R["pass"] = {q: scores_passages(pdb, q) for q in qs}
    R["pass_prefix"] = {q: scores_passages(pdb, q, prefix=True) for q in qs}
    for w in (2.0, 4.0, 8.0):
        R[f"pass_t{w:g}"] = {q: scores_passages(sdb, q, weights=(w, 1.0)) for q in qs}
    for w in (0.1, 0.2, 0.3):
        R[f"pass_decay{w}"] = {q: agg_scores(bm25_passages(pdb, q, limit=100000), w) for q in qs}
    if "--dense" in sys.argv:
        embed = local_embed()
        dscore = dense_scores_factory(rows, embed)
        R["dense_pass"] = {q: dscore(q) for q in qs}
        nscore = dense_scores_factory([(n, t, b) for n, t, b in notes], embed)
        R["dense_note"] = {q: nscore(q) for q in qs}
    for name, table in R.items():
        print(f"{name:<44}", evaluate(questions, lambda q, t=table: ranked(t[q])))

    def show(label, fn):
        print(f"{label:<44}", evaluate(questions, fn))

    for a, b in [("whole", "pass"), ("whole_t3", "pass_t4"), ("whole", "pass_decay0.2")]:
        for wa in (0.3, 0.5):
            show(f"{a}+{b} minmax {wa}", lambda q, a=a, b=b, wa=wa: ranked(fuse_minmax(R[a][q], R[b][q], wa)))
        for k in (2, 5):
            show(f"{a}+{b} rrf k={k}", lambda q, a=a, b=b, k=k: ranked(fuse_rrf(R[a][q], R[b][q], k)))
    if "--dense" in sys.argv:
        for d in ("dense_pass", "dense_note"):
            for base in ("pass", "pass_t4"):
                for wa in (0.5, 0.6, 0.7):
                    show(
                        f"{base}+{d} minmax {wa}",
                        lambda q, b=base, d=d, wa=wa: ranked(fuse_minmax(R[b][q], R[d][q], wa)),
                    )
                for k in (2, 5):
                    show(
                        f"{base}+{d} rrf k={k}",
                        lambda q, b=base, d=d, k=k: ranked(fuse_rrf(R[b][q], R[d][q], k)),
                    )
            for wa in (0.5, 0.6, 0.7):
                show(
                    f"(whole+pass_t4 rrf5)+{d} minmax {wa}",
                    lambda q, d=d, wa=wa: ranked(
                        fuse_minmax(fuse_rrf(R["whole_t3"][q], R["pass_t4"][q], 5), R[d][q], wa)
                    ),
                )
        for k in (2, 5, 10):
            show(
                f"rrf3 whole_t3+pass_t4+dense_pass k={k}",
                lambda q, k=k: ranked(rrf_many([R["whole_t3"][q], R["pass_t4"][q], R["dense_pass"][q]], k)),
            )


def agg_scores(scored, w):
    per = defaultdict(list)
    for nid, s in scored:
        per[nid].append(s)
    return {n: sum(s * w**i for i, s in enumerate(sorted(v, reverse=True)[:3])) for n, v in per.items()}


def rrf_many(tables, k):
    out = defaultdict(float)
    for t in tables:
        for i, n in enumerate(sorted(t, key=lambda n: -t[n])):
            out[n] += 1 / (k + 1 + i)
    return dict(out)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def local_embed():
    """The product's local model (the `local` extra) as a function of a list of texts (unit vectors)."""
    from server.embeddings.local import MiniLM, default_threads

    return MiniLM.load(default_threads()).embed


def dense(notes, questions, rows, pdb, wdb):
    dscore = dense_scores_factory(rows, local_embed())
    cache = {q: dscore(q) for q, _, _ in questions}
    print("dense local-model passages max", evaluate(questions, lambda q: ranked(cache[q])))
    for wa in (0.5, 0.7, 0.8, 0.9):
        print(
            f"bm25 passage + dense minmax {wa}",
            evaluate(questions, lambda q, wa=wa: ranked(fuse_minmax(scores_passages(pdb, q), cache[q], wa))),
        )
    for k in (1, 5, 10, 60):
        print(
            f"bm25 passage + dense rrf k={k}",
            evaluate(questions, lambda q, k=k: ranked(fuse_rrf(scores_passages(pdb, q), cache[q], k))),
        )
    for wa in (0.6, 0.7, 0.8):
        print(
            f"(whole+passage rrf5) + dense minmax {wa}",
            evaluate(
                questions,
                lambda q, wa=wa: ranked(
                    fuse_minmax(fuse_rrf(scores_whole(wdb, q), scores_passages(pdb, q), 5), cache[q], wa)
                ),
            ),
        )


def turn_level(db, questions):
    """Share of questions with an evidence turn inside one of the top-5 passages."""
    hits = 0
    for q, _, _ in questions:
        m = build_match(q)
        if m is None:
            continue
        sql = "SELECT nid, text FROM p WHERE p MATCH ? ORDER BY bm25(p, 0, 1, 1) LIMIT 5"
        found = set()
        for nid, text in db.execute(sql, (m,)):
            found |= {LINE_IDS.get((nid, line.strip()), "") for line in text.splitlines()}
        hits += bool(found & EVIDENCE[q])
    return f"turn@5 {hits / len(questions):.3f}"


def grid(notes, questions):
    configs = [
        dict(max_lines=1, overlap=0, min_chars=0),
        dict(max_lines=3, overlap=0, min_chars=0),
        dict(max_lines=3, overlap=300, min_chars=0),
        dict(max_lines=3, overlap=300, min_chars=200),
        dict(max_lines=4, overlap=300, min_chars=200),
        dict(max_lines=5, overlap=300, min_chars=200),
        dict(max_lines=5, overlap=600, min_chars=200),
        dict(max_lines=6, overlap=400, min_chars=200),
        dict(max_lines=8, overlap=500, min_chars=200),
        dict(max_lines=1000, max_chars=1000, overlap=300, min_chars=0),
    ]
    for kw in configs:
        rows = passages(notes, **kw)
        db = passage_index(rows)
        for how in ("max",):
            label = f"{kw} n={len(rows)} {how}"
            print(f"{label:<80}", evaluate(questions, rank_passages(db, how)), turn_level(db, questions))


if __name__ == "__main__":
    main()
