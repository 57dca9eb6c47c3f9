"""The retrieval benchmarks run end to end (full text): bench/longmemeval.py on two questions of the development
data and on a small made-up haystack, bench/locomo.py on a made-up conversation; the metric definitions; and
the rule that no session id or answer mark reaches the vault."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest

from bench import locomo, longmemeval
from bench._bench_common import PlainBM25, plain_match

METRIC_NAMES = ("recall_any@5", "recall_all@5", "recall_all@10", "ndcg_any@10")


def _turn(role: str, content: str, answer: bool = False) -> dict:
    return {"role": role, "content": content, **({"has_answer": True} if answer else {})}


def _made_up_questions() -> list[dict]:
    """Two questions over four sessions; evidence and filler share no words except where meant to."""
    sessions = [
        [_turn("user", "My sister Ottilie adopted a greyhound named Biscuit last week.", True)],
        [
            _turn("user", "Any tips for repotting a fiddle leaf fig?"),
            _turn("assistant", "Use a pot 2 inches wider."),
        ],
        [_turn("user", "I finally booked the ferry to Stromness for my kayak trip.", True)],
        [
            _turn("user", "Explain how sourdough starters ferment."),
            _turn("assistant", "Wild yeast and bacteria."),
        ],
    ]
    ids = ["answer_aa_1", "sharegpt_bb", "answer_aa_2", "ultrachat_cc"]
    dates = [
        "2023/05/01 (Mon) 09:00",
        "2023/05/01 (Mon) 09:00",
        "2023/05/03 (Wed) 18:30",
        "2023/05/04 (Thu) 07:15",
    ]
    common = {"haystack_session_ids": ids, "haystack_dates": dates, "haystack_sessions": sessions}
    return [
        {
            "question_id": "q_single",
            "question_type": "single-session-user",
            "question": "What is the name of the greyhound my sister Ottilie adopted?",
            "question_date": "2023/05/10 (Wed) 10:00",
            "answer": "Biscuit",
            "answer_session_ids": ["answer_aa_1"],
            **common,
        },
        {
            "question_id": "q_multi",
            "question_type": "multi-session",
            "question": "Which happened first: Ottilie's greyhound adoption or booking the Stromness ferry?",
            "question_date": "2023/05/10 (Wed) 10:00",
            "answer": "the adoption",
            "answer_session_ids": ["answer_aa_1", "answer_aa_2"],
            **common,
        },
    ]


def _write_dataset(path: Path, questions: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(questions, f)
    return path


def _check_saved_run(path: Path, rows: tuple[str, ...], count: int) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert sorted(data["rows"]) == sorted(rows)
    for outcomes in data["rows"].values():
        assert len(outcomes) == count
        for o in outcomes:
            assert set(o["metrics"]) == set(METRIC_NAMES)
            assert all(0.0 <= v <= 1.0 for v in o["metrics"].values())
            assert len(o["top"]) <= 10 and o["ranks"]
    return data


def test_longmemeval_bench_on_two_development_questions(tmp_path, capsys):
    if not longmemeval.DATA.is_file():
        pytest.skip(f"the development data is not here ({longmemeval.DATA})")
    out = tmp_path / "run.json"
    longmemeval.main(["--embedder", "none", "--limit", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    for column in (
        "any@5",
        "all@5",
        "all@10",
        "ndcg@10",
        "paired against bm25",
        "latency none",
        "latency bm25",
    ):
        assert column in printed
    overall = re.search(r"^\s+all\s+2\s+none\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", printed, re.M)
    assert overall is not None, printed
    assert all(0.0 <= float(v) <= 1.0 for v in overall.groups())
    data = _check_saved_run(out, ("none", "bm25"), 2)
    asked = longmemeval.load(longmemeval.DATA, 2)
    for o, q in zip(data["rows"]["none"], asked, strict=True):
        assert o["qid"] == q["question_id"] and sorted(o["ranks"]) == sorted(q["answer_session_ids"])


def test_longmemeval_bench_finds_made_up_evidence_and_compares_runs(tmp_path, capsys):
    data = _write_dataset(tmp_path / "lme.json.gz", _made_up_questions())
    out = tmp_path / "run.json"
    longmemeval.main(["--embedder", "none", "--data", str(data), "--out", str(out)])
    saved = _check_saved_run(out, ("none", "bm25"), 2)
    for row in ("none", "bm25"):
        single, multi = saved["rows"][row]
        assert single["ranks"] == {"answer_aa_1": 1}
        assert single["metrics"] == dict.fromkeys(METRIC_NAMES, 1.0)
        assert multi["metrics"]["recall_all@5"] == 1.0
    # Run B: the second evidence session of q_multi fell out of the top 10.
    worse = json.loads(out.read_text(encoding="utf-8"))
    multi = worse["rows"]["none"][1]
    multi["ranks"]["answer_aa_2"] = None
    multi["metrics"].update({"recall_all@5": 0.0, "recall_all@10": 0.0, "ndcg_any@10": 0.6})
    (tmp_path / "b.json").write_text(json.dumps(worse), encoding="utf-8")
    capsys.readouterr()
    longmemeval.main(["--compare", str(out), str(tmp_path / "b.json")])
    compared = capsys.readouterr().out
    assert re.search(r"recall_any@5\s+0 better\s+0 worse\s+2 same", compared), compared
    assert re.search(r"recall_all@5\s+0 better\s+1 worse\s+1 same\s+mean 1.000 -> 0.500", compared), compared
    assert "1 question(s) changed" in compared
    assert re.search(r"q_multi\s+multi-session\s+answer_aa_1: 1 -> 1, answer_aa_2: \d+ -> None", compared)
    longmemeval.main(["--compare", str(out), str(out), "--row", "bm25,none"])
    assert "run.json (none) against" in capsys.readouterr().out


def test_no_session_id_or_answer_mark_reaches_the_vault(tmp_path):
    [question, _] = _made_up_questions()
    notes = longmemeval.session_notes(question)
    longmemeval.write_vault(tmp_path, notes)
    files = sorted(tmp_path.rglob("*.md"))
    assert len(files) == 4  # two sessions at the same minute get two notes
    text = "".join(f.relative_to(tmp_path).as_posix() + f.read_text(encoding="utf-8") for f in files)
    for secret in (*question["haystack_session_ids"], "has_answer", "answer_", "sharegpt", "ultrachat"):
        assert secret not in text
    first = (tmp_path / notes[0].path).read_text(encoding="utf-8")
    assert first.startswith(
        '---\ntitle: "Chat — 2023/05/01 (Mon) 09:00"\ndate: 2023-05-01\n---\nUser: My sister'
    )


def test_ndcg_any_is_binary_relevance_over_the_ideal_order():
    assert longmemeval.ndcg({"a": 1, "b": 2}) == pytest.approx(1.0)
    assert longmemeval.ndcg({"a": 2}) == pytest.approx(1 / math.log2(3))
    assert longmemeval.ndcg({"a": 1, "b": None}) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert longmemeval.ndcg({"a": 11}) == 0.0


def test_plain_bm25_reads_question_syntax_as_words():
    assert plain_match('what\'s C++ "NEAR" -v: (2023)?') == '"c" OR "near" OR "v" OR "2023"'
    index = PlainBM25()
    index.add("x.md", "Session", "NEAR the harbour in 2023")
    assert index.search('"NEAR" -2023: AND') == ["x.md"]
    index.close()


def test_locomo_bench_runs_on_a_made_up_conversation(tmp_path, capsys):
    conv = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a greyhound called Biscuit."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely, greyhounds are calm."},
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I booked a ferry to Stromness for kayaking."}
        ],
        "qa": [
            {
                "question": "What is Ana's greyhound called?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where is Ben kayaking?",
                "answer": "Stromness",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {"question": "Adversarial", "adversarial_answer": "x", "evidence": ["D2:1"], "category": 5},
        ],
    }
    (tmp_path / "conv-1.json").write_text(json.dumps(conv), encoding="utf-8")
    out = tmp_path / "run.json"
    locomo.main(["--embedder", "none", "--data", str(tmp_path), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "2 questions (categories 1-4), 2 session notes" in printed
    assert "paired against bm25" in printed and "latency none" in printed
    saved = json.loads(out.read_text(encoding="utf-8"))
    for row in ("none", "bm25"):
        assert [o["metrics"]["r@5"] for o in saved["rows"][row]] == [1.0, 1.0]
    assert [o["metrics"]["turn@5"] for o in saved["rows"]["none"]] == [1.0, 1.0]
    assert "turn@5" not in saved["rows"]["bm25"][0]["metrics"]
