"""Distill: the top results chosen for coverage, not as five copies of one strong match (issue 13 step 4).

When a question's evidence spans several notes ("how many doctors did I see this year?"), ranking each note on
its own lets near-copies of the best note (a pasted-twice log, a note and its conflict copy, two drafts) take
the places the second and third pieces of evidence need. Maximal marginal relevance (Carbonell & Goldstein,
SIGIR 1998) picks the results one at a time, each maximising

    LAMBDA x relevance - (1 - LAMBDA) x (highest similarity to a result already picked)

with relevance the fused score over the best one's. LAMBDA is 0.7, the usual choice in that literature
(relevance first, redundancy as the tie-breaker): a note must be far more similar to one already picked than
it is less relevant than the next note before it gives up its place.

Similarity is measured between the passages that represent the notes (their snippets): the cosine of their
vectors when both have one, else the overlap of their words (Jaccard over the sets of content words). Only the
first WINDOW candidates are reordered: past them, relevance alone decides, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from server.search.fts_query import query_tokens

LAMBDA = 0.7
T = TypeVar("T")


def words_of(text: str) -> frozenset[str]:
    """The content words of a passage (stopwords dropped, lowercased), for word-overlap similarity."""
    return frozenset(query_tokens(text, max_tokens=10_000))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


def diversify(
    ranked: Sequence[T],
    score: Callable[[T], float],
    key: Callable[[T], str],
    texts: Mapping[str, str],
    vectors: Mapping[str, Sequence[float]] | None = None,
    *,
    lam: float = LAMBDA,
) -> list[T]:
    """`ranked` (best first) reordered by maximal marginal relevance. `texts`/`vectors` give each item's
    representative passage by `key`; an item without either is compared by nothing (similarity 0)."""
    items = list(ranked)
    if len(items) < 3:
        return items
    top = max(score(items[0]), 1e-9)
    words = {key(item): words_of(texts.get(key(item), "")) for item in items}
    vectors = vectors or {}

    def similarity(a: str, b: str) -> float:
        va, vb = vectors.get(a), vectors.get(b)
        if va is not None and vb is not None:
            return max(0.0, cosine(va, vb))
        return jaccard(words[a], words[b])

    picked: list[T] = [items[0]]
    left = items[1:]
    closest = {key(item): similarity(key(item), key(items[0])) for item in left}
    while left:
        best_i, best_value = 0, -math.inf
        for i, item in enumerate(left):
            value = lam * score(item) / top - (1 - lam) * closest[key(item)]
            if value > best_value:
                best_i, best_value = i, value
        chosen = left.pop(best_i)
        picked.append(chosen)
        for item in left:
            closest[key(item)] = max(closest[key(item)], similarity(key(item), key(chosen)))
    return picked
