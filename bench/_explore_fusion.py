"""Throwaway: weight grid for min-max fusion of whole-note bm25, passage bm25 and local-model passages."""

import sys

sys.argv = [sys.argv[0]]

import bench._explore_locomo as ex  # noqa: E402

notes, questions = ex.load()
qs = [q for q, _, _ in questions]
wdb = ex.whole_note_index(notes)
rows = ex.passages(notes)
sdb = ex.passage_index(rows, prepend=False)
dscore = ex.dense_scores_factory(rows, ex.local_embed())
W = {q: ex.minmax(ex.scores_whole(wdb, q, (3.0, 1.0))) for q in qs}
P = {q: ex.minmax(ex.scores_passages(sdb, q, weights=(4.0, 1.0))) for q in qs}
D = {q: ex.minmax(dscore(q)) for q in qs}
results = []
for ww in (0.0, 0.2, 0.3, 0.4, 0.5):
    for wd in (0.0, 0.1, 0.2, 0.3, 0.4):
        wp = 1 - ww - wd
        if wp < 0.2:
            continue

        def rank(q, ww=ww, wd=wd, wp=wp):
            keys = set(W[q]) | set(P[q]) | set(D[q])
            s = {k: ww * W[q].get(k, 0) + wp * P[q].get(k, 0) + wd * D[q].get(k, 0) for k in keys}
            return ex.ranked(s)

        line = ex.evaluate(questions, rank)
        results.append((line, f"whole {ww:.1f} passage {wp:.1f} dense {wd:.1f}"))
for line, label in results:
    print(f"{label:<36}", line[:90])
