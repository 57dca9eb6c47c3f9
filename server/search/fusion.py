"""Fusing rankings into one score per node (pure functions; no I/O).

Signals, each scaled to 0..1 over this query's candidates (min-max) and then weighted:

- `note`: whole-note bm25 (one FTS row per note);
- `passage`: the note's best passage by bm25, plus 0.3 x its best passage elsewhere in the note (a second,
  separate place that matches; see `passage_evidence`);
- `vector`: the note's best passage by cosine similarity (hybrid mode only);
- `names`: 1 when the note holds every name of the question (see names.py);
- `anchor`: the question holds the note's name or an alias (anchors.py);
- `graph`: the share of a graph walk from the named entities and strongest hits the note receives (walk.py),
  scaled so the note receiving most gets the full weight;
- `time`: how well the note's date fits the window the question's time words name ("last Saturday", "in
  May": search/when/), against the search's reference time. A supporting cue, as a name is: it reorders notes
  that are close on text and never wins on its own (0.2, below the names bonus);
- `recency`: confidence x 2^(-days since update / half-life).

Min-max rather than reciprocal-rank fusion: on LoCoMo, RRF lost ~1 point of MRR between the two bm25 rankings
and ~3 with the (weak) vector ranking; min-max lost none (docs/search.md). The text weights below are the
measured ones. Graph and recency are small on purpose when the question names nothing: they reorder near-ties (a linked note, a fresh confident memory) and never
overturn a clear text match. When the question names an entity, the notes linked to it are what it asks
about: the walk then counts as much as the passage signal, so a linked note sharing no word with the
question can reach the top (issue 13), and the named note itself gets the anchor signal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from server.store.search_sql import PassageHit


@dataclass(frozen=True)
class Weights:
    """How much each signal counts. `FULLTEXT` and `HYBRID` are the defaults of the two modes."""

    note: float = 0.5
    passage: float = 0.5
    vector: float = 0.0
    names: float = 0.3
    graph: float = 0.1  # the most linked-to note of a walk from the text hits alone (walk.py)
    graph_anchored: float = 0.5  # the same when the question names an entity (anchors.py): see below
    anchor: float = 0.5  # a note whose full name the question holds (times the name's strength)
    time: float = 0.2  # a note dated inside the window the question's time words name (when/), times its fit
    recency: float = 0.05
    half_life_days: float = 30.0
    graph_seeds: int = 5  # neighbours of this many top hits are boosted
    second_passage: float = 0.3  # weight of a note's second, separate matching passage (passage_evidence)


FULLTEXT = Weights()
HYBRID = Weights(note=0.4, passage=0.4, vector=0.2)


@dataclass
class Candidate:
    """One node being ranked: its signal contributions and the passage that best represents it."""

    node_id: str
    signals: dict[str, float] = field(default_factory=dict)
    chunk_id: int | None = None
    chunk_score: float = -1.0
    step: str = ""  # which step of the search placed it where it is (explain)

    @property
    def text_score(self) -> float:
        return sum(v for k, v in self.signals.items() if k in ("note", "passage", "vector", "names"))

    @property
    def score(self) -> float:
        return sum(self.signals.values())


def minmax(scores: Mapping[str, float]) -> dict[str, float]:
    """Scores scaled to 0..1 (all 1.0 when they are equal, so a single hit counts fully)."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in scores.items()}


def _bounds(values: Iterable[float]) -> tuple[float, float]:
    items = list(values)
    return (min(items), max(items)) if items else (0.0, 0.0)


def _scale(value: float, lo: float, hi: float) -> float:
    return (value - lo) / (hi - lo) if hi > lo else 1.0


def passage_evidence(passages: list[PassageHit], second: float) -> dict[str, float]:
    """Per note: its best passage's bm25 plus `second` x the best of its passages that shares no line with
    that one (ordinals two or more apart; neighbouring windows overlap).

    A note where two separate places answer the question holds more evidence than one where a single place
    does. Overlapping windows repeat the same lines, so counting the runner-up window would count one
    matching line twice: that is why summing a note's best passages did not help (docs/search.md)."""
    best: dict[str, tuple[float, int]] = {}  # node id -> (score, ordinal) of its best passage
    for _, node_id, score, ordinal in passages:
        if node_id not in best or score > best[node_id][0]:
            best[node_id] = (score, ordinal)
    apart: dict[str, float] = {}
    for _, node_id, score, ordinal in passages:
        if abs(ordinal - best[node_id][1]) >= 2 and score > apart.get(node_id, 0.0):
            apart[node_id] = score
    return {node_id: score + second * apart.get(node_id, 0.0) for node_id, (score, _) in best.items()}


def fuse_text(
    notes: Mapping[str, float],
    passages: list[PassageHit],
    vectors: list[tuple[int, str, float]],
    named: set[str] | None,
    weights: Weights,
) -> dict[str, Candidate]:
    """Combine the text signals into candidates; each keeps its best passage (by the same weighted scale)."""
    found: dict[str, Candidate] = {}

    def candidate(node_id: str) -> Candidate:
        return found.setdefault(node_id, Candidate(node_id))

    for node_id, value in minmax(notes).items():
        candidate(node_id).signals["note"] = weights.note * value
    chunks: dict[int, tuple[str, float]] = {}  # chunk id -> (node id, weighted passage + vector score)
    text_hits = [(h.chunk_id, h.node_id, h.score) for h in passages]
    for name, hits, weight in (("passage", text_hits, weights.passage), ("vector", vectors, weights.vector)):
        if weight <= 0 or not hits:
            continue
        best: dict[str, float] = {}
        for _, node_id, score in hits:
            best[node_id] = max(best.get(node_id, score), score)
        lo, hi = _bounds(best.values())
        for chunk_id, node_id, score in hits:
            scaled = weight * _scale(score, lo, hi)
            c = candidate(node_id)
            c.signals[name] = max(c.signals.get(name, 0.0), scaled)
            chunks[chunk_id] = (node_id, chunks.get(chunk_id, (node_id, 0.0))[1] + scaled)
    if weights.passage > 0 and weights.second_passage > 0 and passages:
        for node_id, value in minmax(passage_evidence(passages, weights.second_passage)).items():
            found[node_id].signals["passage"] = weights.passage * value
    for chunk_id, (node_id, total) in chunks.items():
        c = found[node_id]
        if c.chunk_id is None or total > c.chunk_score or (total == c.chunk_score and chunk_id < c.chunk_id):
            c.chunk_id, c.chunk_score = chunk_id, total
    if named is not None and weights.names > 0:
        for node_id in named & found.keys():
            found[node_id].signals["names"] = weights.names
    return found


def graph_seeds(found: Mapping[str, Candidate], weights: Weights) -> list[str]:
    """The strongest text hits (at least half the best score), whose neighbours get the graph boost."""
    if weights.graph <= 0 or not found:
        return []
    ranked = sorted(found.values(), key=lambda c: -c.text_score)
    top = ranked[0].text_score
    return [c.node_id for c in ranked[: weights.graph_seeds] if top > 0 and c.text_score >= top / 2]


def recency(confidence: float, updated_at: str | None, now: datetime, half_life_days: float) -> float:
    """confidence x 2^(-age in days / half-life); 0 for an unknown date."""
    if not updated_at:
        return 0.0
    try:
        then = datetime.fromisoformat(updated_at.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    days = max(0.0, (now - then).total_seconds() / 86400)
    return max(0.0, confidence) * math.pow(2.0, -days / half_life_days)


def best_by_overlap(tokens: list[str], passages: list[tuple[int, str, str]]) -> dict[str, str]:
    """Per node, the passage holding the most query words (each looked for by its first five letters, a
    rough stand-in for the index's stemming); the first passage when none holds any. Substring tests, not
    tokenizing: this runs over every passage of up to `limit` notes inside a search."""
    stems = {t[:5] for t in tokens}
    best: dict[str, tuple[int, str]] = {}
    for _, node_id, text in passages:
        lowered = text.lower()
        overlap = sum(1 for stem in stems if stem in lowered)
        if node_id not in best or overlap > best[node_id][0]:
            best[node_id] = (overlap, text)
    return {node_id: text for node_id, (_, text) in best.items()}


STEP_OF_SIGNAL = {
    "note": "text",
    "passage": "text",
    "names": "text",
    "vector": "semantic",
    "anchor": "anchor",
    "graph": "graph",
    "time": "time",
    "recency": "recency",
}


def main_step(c: Candidate) -> str:
    """The step whose signals count most in `c`'s score: text, semantic, anchor, graph or time. Recency only
    breaks near-ties: every candidate gets it, and what made it a candidate is the reason it is there (review
    22d: the weakest text hit scales to 0, and "recency" was given as the reason its words found it). Steps
    that count the same are named in the pipeline's order."""
    totals: dict[str, float] = {}
    for name, value in c.signals.items():
        step = STEP_OF_SIGNAL.get(name, name)
        totals[step] = totals.get(step, 0.0) + value
    found_by = {step: total for step, total in totals.items() if step != "recency"}
    if not found_by:
        return "recency" if totals else "text"
    order = {step: i for i, step in enumerate(dict.fromkeys(STEP_OF_SIGNAL.values()))}
    # A trace of a signal (a date far outside the window still fits a little) is no reason either (review
    # 22f): below NEGLIGIBLE, the first step of the pipeline that gave the note a signal is named.
    counted = {step: total for step, total in found_by.items() if total >= NEGLIGIBLE} or {
        step: 0.0 for step in found_by
    }
    return min(counted, key=lambda s: (-counted[s], order.get(s, len(order)), s))


NEGLIGIBLE = 0.01  # a hundredth of the best text score: less than recency's near-tie breaker


def ranked(found: Mapping[str, Candidate]) -> list[Candidate]:
    """Best first; ties broken by node id so the order is stable."""
    return sorted(found.values(), key=lambda c: (-c.score, c.node_id))
