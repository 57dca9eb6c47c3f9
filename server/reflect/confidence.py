"""How sure reflect is about an insight: one formula for every pattern, in [0, 1].

    confidence = prior(pattern) x strength x support x severity

- prior: how often a pattern of this kind is worth a person's attention when the evidence is perfect
  (a solved problem next door beats a concept that merely recurs). Fixed per pattern below.
- strength: how firmly the entities are connected, the mean weight of the edges the insight rests on.
  A typed relation (in frontmatter, or made by a tool) weighs 1.0; a bare body wikilink weighs 0.6, because
  a mention says less than a stated relation. Where one pair is joined both ways, the stronger edge counts.
- support: how many entities back the insight beyond the pattern's minimum. At the minimum it is 0.6 and
  each extra entity halves the remaining doubt: 0.6, 0.8, 0.9, 0.95 ... (never 1: more is never certainty).
- severity: for the patterns about a single node (stale, under-connected), how far the node is past the
  threshold; 1.0 for the others.

Rounded to two decimals, so a title can quote it and reruns compare equal.
"""

from __future__ import annotations

from collections.abc import Iterable

PRIORS: dict[str, float] = {
    "cross_project_solution": 0.9,
    "training_opportunity": 0.8,
    "technique_transfer": 0.8,
    "shared_technology": 0.8,
    "stale_knowledge": 0.8,
    "concept_clustering": 0.7,
    "under_connected": 0.6,
}
ORIGIN_WEIGHTS: dict[str, float] = {"frontmatter": 1.0, "tool": 1.0, "wikilink": 0.6}
BASE_SUPPORT = 0.6


def edge_weight(origin: str) -> float:
    """The strength of one edge by where it came from (unknown origins count as a mention)."""
    return ORIGIN_WEIGHTS.get(origin, ORIGIN_WEIGHTS["wikilink"])


def support(count: int, minimum: int) -> float:
    """0.6 at the pattern's minimum number of entities; each extra entity halves the remaining doubt."""
    extra = max(0, count - minimum)
    return 1.0 - (1.0 - BASE_SUPPORT) * 0.5**extra


def score(pattern: str, weights: Iterable[float], count: int, minimum: int, severity: float = 1.0) -> float:
    """The confidence of one insight (see the module docstring for the formula and its parts)."""
    values = list(weights)
    strength = sum(values) / len(values) if values else 1.0
    value = PRIORS[pattern] * strength * support(count, minimum) * min(max(severity, 0.0), 1.0)
    return round(value, 2)
