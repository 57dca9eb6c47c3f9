"""Throwaway: does a longer list of question-filler words help LoCoMo retrieval? (numbers only)"""

import sys

sys.argv = [sys.argv[0]]
import bench._explore_locomo as ex  # noqa: E402
import server.search.fts_query as fq  # noqa: E402

EXTRA = {
    "base": set(),
    "fillers": set(
        [
            "likely",
            "would",
            "think",
            "many",
            "much",
            "kind",
            "type",
            "types",
            "often",
            "usually",
            "ever",
            "might",
        ]
    ),
    "fillers+verbs": set(
        [
            "likely",
            "would",
            "think",
            "many",
            "much",
            "kind",
            "type",
            "types",
            "often",
            "usually",
            "ever",
            "might",
            "go",
            "went",
            "get",
            "got",
            "make",
            "made",
            "take",
            "took",
        ]
    ),
}
notes, questions = ex.load()
wdb = ex.whole_note_index(notes)
rows = ex.passages(notes)
sdb = ex.passage_index(rows, prepend=False)
base = fq.STOPWORDS
for name, extra in EXTRA.items():
    fq.STOPWORDS = base | extra
    ex.build_match.__globals__["STOPWORDS"] = fq.STOPWORDS
    print(
        f"{name:<14} whole  ",
        ex.evaluate(questions, lambda q: ex.ranked(ex.scores_whole(wdb, q, (3.0, 1.0)))),
    )
    print(
        f"{name:<14} fused  ",
        ex.evaluate(
            questions,
            lambda q: ex.ranked(
                ex.fuse_minmax(
                    ex.scores_whole(wdb, q, (3.0, 1.0)), ex.scores_passages(sdb, q, weights=(4.0, 1.0)), 0.5
                )
            ),
        ),
    )
