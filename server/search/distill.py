"""Distill: the top results chosen for coverage, not as five copies of one strong match (issue 13 step 4).

When a question's evidence spans several notes ("how many doctors did I see this year?"), ranking each note on
its own lets variants of the best note (a log pasted twice, a note and its conflict copy, two drafts, one chat
exported into several notes) take the places the second and third pieces of evidence need. The results are
picked one at a time, as maximal marginal relevance does (Carbonell & Goldstein, SIGIR 1998), each time the
candidate with the most *new* relevance:

    relevance x (1 - its highest redundancy with a result already picked)

Redundancy is how much of a candidate's passage is a passage already shown: the resemblance of their word
3-gram shingles (Broder, 1997: the measure behind near-duplicate detection), counted only from NEAR_COPY up,
the level at which that literature calls two documents near-duplicates. Notes on one topic (the evidence of a
multi-session question often is) share words and the odd phrase, but stay well below it, so they keep all
their relevance and rank as before; a copy or a light edit of a shown passage keeps little. The product form,
rather than MMR's weighted difference, is what lets a copy give way even to a much weaker note: a copy adds
nothing the person has not seen. Only the first DISTILL_WINDOW candidates (service.py) are reordered; past them relevance alone decides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")
NEAR_COPY = 0.5  # shingle resemblance from which two passages count as versions of one
_WORD = re.compile(r"\w+", re.UNICODE)


def shingles(text: str, size: int = 3) -> frozenset[int]:
    """The runs of `size` consecutive words of `text`, casefolded, as hashes (its words when it has fewer)."""
    words = _WORD.findall(text.casefold())
    if len(words) < size:
        return frozenset([hash(tuple(words))]) if words else frozenset()
    return frozenset(map(hash, zip(*(words[i:] for i in range(size)), strict=False)))


def resemblance(a: frozenset[int], b: frozenset[int]) -> float:
    """Jaccard of two shingle sets: 1 for the same text, near 0 for different texts on one topic."""
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def redundancy(a: frozenset[int], b: frozenset[int]) -> float:
    """The resemblance of two passages when they are versions of one (from NEAR_COPY up), else 0. Sets whose
    sizes differ by more than that ratio cannot get there, and are not compared."""
    small, large = sorted((len(a), len(b)))
    if small < NEAR_COPY * large:
        return 0.0
    value = resemblance(a, b)
    return value if value >= NEAR_COPY else 0.0


def diversify(
    ranked: Sequence[T], score: Callable[[T], float], key: Callable[[T], str], texts: Mapping[str, str]
) -> list[T]:
    """`ranked` (best first) reordered by new relevance (see the module docstring); `texts` gives each item's
    representative passage by `key` (an item without one is redundant with nothing)."""
    items = list(ranked)
    if len(items) < 3:
        return items
    sets = {key(item): shingles(texts.get(key(item), "")) for item in items}
    picked: list[T] = [items[0]]
    left = items[1:]
    overlap = {key(item): redundancy(sets[key(item)], sets[key(items[0])]) for item in left}
    while left:
        best_i, best_value = 0, -math.inf
        for i, item in enumerate(left):
            value = max(score(item), 0.0) * (1.0 - overlap[key(item)])
            if value > best_value:
                best_i, best_value = i, value
        chosen = left.pop(best_i)
        picked.append(chosen)
        for item in left:
            overlap[key(item)] = max(overlap[key(item)], redundancy(sets[key(item)], sets[key(chosen)]))
    return picked
