"""Throwaway exploration: ranking variants on LoCoMo, one sync, many runs (figures for docs/search.md).

Run: .venv/bin/python bench/_explore_variants.py [variant ...]   (no argument: every variant)
A variant patches the search module for the duration of its run; see VARIANTS.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import Score, evaluate, print_table, write_vault  # noqa: E402
from server.runtime import open_runtime  # noqa: E402
from server.search import service  # noqa: E402
from server.search.service import DEFAULT_TUNING  # noqa: E402
from server.settings import Settings  # noqa: E402


@contextlib.contextmanager
def patched(obj: object, name: str, value: object) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield


from server.search import fusion, names  # noqa: E402


def names_as_facet() -> contextlib.AbstractContextManager[None]:
    """Names only select (the all-names bonus), bm25 ranks by the other words (when there are any)."""
    orig = names.weighted_match

    def wm(question, found, *, name_weight=2, prefix_min=None):
        full = orig(question, found, name_weight=name_weight, prefix_min=prefix_min)
        if not found:
            return full
        terms = [t for t in (full or "").split(" OR ") if t.strip('"') not in found]
        return " OR ".join(terms) if terms else full

    return patched(service, "weighted_match", wm)


def agg_apart(second: float) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Passage signal: best + second x the best passage that does not overlap it (chunk id not adjacent)."""
    orig = fusion.fuse_text

    def fuse(notes, passages, vectors, named, weights):
        found = orig(notes, passages, vectors, named, weights)
        per: dict[str, list[tuple[float, int]]] = {}
        for chunk_id, node_id, score, *_ in passages:
            per.setdefault(node_id, []).append((score, chunk_id))
        summed = {}
        for node_id, items in per.items():
            items.sort(reverse=True)
            top, cid = items[0]
            rest = [sc for sc, c in items[1:] if abs(c - cid) > 1]
            summed[node_id] = top + second * (rest[0] if rest else 0.0)
        for node_id, v in fusion.minmax(summed).items():
            found[node_id].signals["passage"] = weights.passage * v
        return found

    return lambda: patched(service.fusion, "fuse_text", fuse)


def both(*makers: Callable[[], contextlib.AbstractContextManager[None]]):
    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for m in makers:
                stack.enter_context(m())
            yield

    return ctx


def agg(second: float, third: float = 0.0) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """A note's passage signal: best + second x next best (+ third x the one after), then min-max."""
    orig = fusion.fuse_text

    def fuse(notes, passages, vectors, named, weights):
        found = orig(notes, passages, vectors, named, weights)
        per: dict[str, list[float]] = {}
        for _, node_id, score, *_ in passages:
            per.setdefault(node_id, []).append(score)
        summed = {}
        for node_id, scores in per.items():
            s = sorted(scores, reverse=True) + [0.0, 0.0]
            summed[node_id] = s[0] + second * s[1] + third * s[2]
        for node_id, v in fusion.minmax(summed).items():
            found[node_id].signals["passage"] = weights.passage * v
        return found

    return lambda: patched(service.fusion, "fuse_text", fuse)


import math  # noqa: E402
import re  # noqa: E402

from server.store import search_sql  # noqa: E402

_WORD = re.compile(r"[^\W_]+")
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ies", "ied", "ed", "es", "ly", "er", "s")


def stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:5]


def proximity(
    weight: float,
    idf: bool = False,
    unit: str = "line",
    top: int = 300,
    leaders: bool = False,
    minmax_it: bool = False,
    min_terms: int = 1,
    speaker: bool = False,
) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Add weight x (share of the query's words held by the note's best line among its top passages)."""
    orig = service._gather_candidates

    def gather(conn, match, names_match, vector, where, tuning, *aside):
        found, weights, reason = orig(conn, match, names_match, vector, where, tuning, *aside)
        passages = search_sql.passage_hits(conn, match, tuning.passage_candidates, where)[:top]
        if leaders:
            lead = sorted(found.values(), key=lambda c: -c.text_score)[:top]
            passages = [(c.chunk_id, c.node_id, 0.0, 0) for c in lead if c.chunk_id is not None]
        texts = search_sql.passage_texts(conn, [h[0] for h in passages])
        quoted = re.findall(r'"([^"]*)"', match)
        tokens = list(dict.fromkeys(quoted))
        names_q = {t for t in tokens if quoted.count(t) > 1}
        keys = {t: stem(t) for t in tokens}
        units = []
        for chunk_id, node_id, *_ in passages:
            text = texts.get(chunk_id, "")
            parts = text.split("\n") if unit != "passage" else [text]
            if unit == "pair":
                parts = [a + "\n" + b for a, b in zip(parts, parts[1:], strict=False)] or parts
            for part in parts:
                low = part.lower()
                words = {stem(w) for w in _WORD.findall(low)}
                held = {t for t, k in keys.items() if k in words}
                if speaker:
                    head, _, rest = low.partition(":")
                    said = {t for t in names_q if head.strip() == t}
                    held = (held - names_q) | said
                units.append((node_id, held))
        w = {t: (2.0 if t in names_q else 1.0) for t in tokens}
        if idf and units:
            n = len(units)
            for t in tokens:
                df = sum(1 for _, held in units if t in held)
                w[t] = math.log(1 + n / (1 + df)) * (2.0 if t in names_q else 1.0)
        total = sum(w.values()) or 1.0
        best: dict[str, float] = {}
        for node_id, held in units:
            v = sum(w[t] for t in held) / total if len(held) >= min_terms else 0.0
            best[node_id] = max(best.get(node_id, 0.0), v)
        if minmax_it:
            best = fusion.minmax(best)
        for node_id, v in best.items():
            if node_id in found:
                found[node_id].signals["prox"] = weight * v
        return found, weights, reason

    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        with patched(service, "_gather_candidates", gather):
            yield

    return ctx


_AUX = r"(?:did|does|do|is|are|was|were|has|have|had|can|could|would|will|should|might)"
_LEAD = re.compile(rf"(?i)^\s*(?:what|which)\s+((?:[\w+-]+\s+){{0,3}}?)([\w-]+)\s+{_AUX}\b")


def answer_type(kind_of: bool) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Drop the answer-type noun of "What/Which <noun> <aux> ..." (the answer is an instance of it)."""
    orig = names.weighted_match

    def wm(question, found, *, name_weight=2, prefix_min=None):
        full = orig(question, found, name_weight=name_weight, prefix_min=prefix_min)
        m = _LEAD.match(question)
        if not m or full is None:
            return full
        pre = m.group(1).lower().split()
        head = m.group(2).lower()
        if not kind_of and pre[-1:] == ["of"]:
            return full
        if head in found:
            return full
        terms = [t for t in full.split(" OR ") if t.strip('"*') != head]
        wm.dropped.append(head)
        return " OR ".join(terms) if terms else full

    wm.dropped = []
    return lambda: patched(service, "weighted_match", wm)


# --old: every variant on top of the earlier default (a note's best passage only, no second passage).
BASE = (
    replace(DEFAULT_TUNING, fulltext=replace(DEFAULT_TUNING.fulltext, second_passage=0.0))
    if "--old" in sys.argv
    else DEFAULT_TUNING
)
STATE = {"tuning": BASE}


def weights(**kw: float) -> Callable[[], contextlib.AbstractContextManager[None]]:
    tuning = replace(BASE, fulltext=replace(BASE.fulltext, **kw))
    return lambda: patched(sys.modules[__name__], "STATE", {"tuning": tuning})


def prf(
    beta: float, k: int = 5, m: int = 8, scope: str = "passage", lines_of_names: bool = False
) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """Pseudo-relevance feedback as an extra signal: the top-k passages' most distinctive words (tf x idf
    over the candidates) form a second query; beta x its min-max bm25 is added."""
    from server.search.fts_query import STOPWORDS, quote_token

    orig = service._gather_candidates

    def gather(conn, match, names_match, vector, where, tuning, *aside):
        found, weights, reason = orig(conn, match, names_match, vector, where, tuning, *aside)
        quoted = re.findall(r'"([^"]*)"', match)
        qterms = set(quoted)
        names_q = {t for t in quoted if quoted.count(t) > 1}
        qstems = {stem(t) for t in qterms}
        passages = search_sql.passage_hits(conn, match, tuning.passage_candidates, where)
        texts = search_sql.passage_texts(conn, [h[0] for h in passages])
        docs = []
        for chunk_id, _, _ in passages:
            text = texts.get(chunk_id, "").lower()
            if lines_of_names and names_q:
                text = "\n".join(ln for ln in text.split("\n") if any(n in ln for n in names_q))
            docs.append([w for w in _WORD.findall(text) if len(w) > 2 and w not in STOPWORDS])
        n = len(docs)
        if n == 0:
            return found, weights, reason
        df: dict[str, int] = {}
        for d in docs:
            for w in set(d):
                df[w] = df.get(w, 0) + 1
        score: dict[str, float] = {}
        for d in docs[:k]:
            for w in d:
                if stem(w) in qstems or w in qterms:
                    continue
                score[w] = score.get(w, 0.0) + math.log(1 + n / df[w]) / max(1, len(d))
        expansion = [w for w, _ in sorted(score.items(), key=lambda x: -x[1])[:m]]
        if not expansion:
            return found, weights, reason
        query = " OR ".join(quote_token(w) for w in expansion)
        if scope == "passage":
            hits = search_sql.passage_hits(conn, query, tuning.passage_candidates, where)
            best: dict[str, float] = {}
            for _, node_id, sc in hits:
                best[node_id] = max(best.get(node_id, sc), sc)
        else:
            best = dict(search_sql.note_hits(conn, query, tuning.note_candidates, where))
        for node_id, v in fusion.minmax(best).items():
            if node_id in found:
                found[node_id].signals["prf"] = beta * v
        return found, weights, reason

    return lambda: patched(service, "_gather_candidates", gather)


VARIANTS: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "default": nothing,
    "names as facet": names_as_facet,
    "note only": weights(passage=0.0),
    "passage only": weights(note=0.0),
    "no names bonus": weights(names=0.0),
    "answer type": answer_type(False),
    "answer type incl kind of": answer_type(True),
    "prox line 0.2": proximity(0.2),
    "prox line 0.1": proximity(0.1),
    "prox line 0.05": proximity(0.05),
    "prf 0.1": prf(0.1),
    "prf 0.2": prf(0.2),
    "prf 0.2 note": prf(0.2, scope="note"),
    "prf 0.2 k3 m5": prf(0.2, k=3, m=5),
    "prf 0.2 k10 m15": prf(0.2, k=10, m=15),
    "prf 0.2 name lines": prf(0.2, lines_of_names=True),
    "prox speaker 0.2": proximity(0.2, speaker=True),
    "prox speaker 0.1": proximity(0.1, speaker=True),
    "prox line 0.2 min2": proximity(0.2, min_terms=2),
    "prox line 0.2 mm": proximity(0.2, minmax_it=True),
    "prox pair 0.2": proximity(0.2, unit="pair"),
    "prox line 0.2 top50": proximity(0.2, top=50),
    "prox line 0.3": proximity(0.3),
    "prox line idf 0.2": proximity(0.2, idf=True),
    "prox line idf 0.1": proximity(0.1, idf=True),
    "prox passage idf 0.2": proximity(0.2, idf=True, unit="passage"),
    "agg apart 0.5": agg_apart(0.5),
    "agg apart 0.3": agg_apart(0.3),
    "agg apart 0.2": agg_apart(0.2),
    "agg apart 0.4": agg_apart(0.4),
    "agg apart 1.0": agg_apart(1.0),
    "apart 0.3 + prox speaker 0.2": both(agg_apart(0.3), proximity(0.2, speaker=True)),
    "apart 0.3 + prox line 0.2": both(agg_apart(0.3), proximity(0.2)),
    "apart 0.5 + prox line 0.2": both(agg_apart(0.5), proximity(0.2)),
    "apart 0.3 + prox line 0.2 top50": both(agg_apart(0.3), proximity(0.2, top=50)),
    "apart 0.5 + prox speaker 0.2": both(agg_apart(0.5), proximity(0.2, speaker=True)),
    "apart 0.3 + prox line leaders50": both(agg_apart(0.3), proximity(0.2, top=50, leaders=True)),
    "apart 0.3 + prox speaker leaders50": both(
        agg_apart(0.3), proximity(0.2, top=50, leaders=True, speaker=True)
    ),
    "prox line leaders50": proximity(0.2, top=50, leaders=True),
    "agg 0.5": agg(0.5),
    "agg 0.3": agg(0.3),
    "agg 1.0": agg(1.0),
    "agg 0.5 0.25": agg(0.5, 0.25),
}


_orig_add = Score.add


def _add(self, q, paths, snippets, seconds):
    _orig_add(self, q, paths, snippets, seconds)
    first = next((i for i, p in enumerate(paths) if p in q.sessions), None)
    r5 = len(q.sessions & set(paths[:5])) / len(q.sessions)
    self.__dict__.setdefault("per", []).append((q, (r5, 0.0 if first is None else 1 / (first + 1))))


Score.add = _add


async def main() -> None:
    chosen = [a for a in sys.argv[1:] if not a.startswith("--")] or list(VARIANTS)
    per: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        questions = write_vault(root)
        settings = Settings(vault=root, db_path=Path(tmp) / "g.db", embedding_provider="none", watch=False)
        async with open_runtime(settings) as rt:
            await rt.require_sync().sync_vault()
            for name in chosen:
                with VARIANTS[name]():
                    score, mode = await evaluate(rt, questions, STATE["tuning"])
                print_table(name, score, mode)
                r5, _, mrr, turn = score.row(0)
                print(f"  exact: R@5 {r5:.4f} MRR {mrr:.4f} turn {turn:.4f}")
                per[name] = score.per  # type: ignore[attr-defined]
    if "--diff" in sys.argv and len(per) == 2:
        a, b = per.values()
        for (q, x), (_, y) in zip(a, b, strict=True):
            if x != y:
                print(f"  [{q.category}] R@5 {x[0]:.2f}->{y[0]:.2f} rr {x[1]:.2f}->{y[1]:.2f}  {q.text}")


if __name__ == "__main__":
    asyncio.run(main())
