"""Expand: a personalized PageRank walk of the links around what the question is about (issue 13 step 3).

A note one or two links from the entity a question names can answer it while sharing no word with it ("who
works on Harbor Analytics?" -> the person notes that link to it). The walk starts from the seeds (the named
entities, anchors.py, and the strongest text hits), follows open edges both ways (wikilinks, frontmatter links,
relations: each says two notes are related), and at every step returns to the seeds with probability RESTART.
A node's score is the probability mass it *receives* through links (its own restart share taken out), so a seed
scores by how much the other relevant notes point at it, and a note linked from several seeds beats a note
linked from one. Mass spreads over a node's links: the hundred backlinks of a hub each get little.

RESTART is 0.5, the damping HippoRAG used for the same purpose (Gutiérrez et al., NeurIPS 2024): half the mass
stays within a link of the seeds, a quarter within two. After ROUNDS rounds the scores are within
RESTART^ROUNDS (0.1%) of the fixed point. The walk runs on the neighbourhood search fetched (two links around
the named entities, one around the text hits); links leaving it are not followed, so a boundary node keeps the
mass it would have passed on. That approximation only ever favours nodes near the seeds, which is the point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

RESTART = 0.5
ROUNDS = 10


def personalized_pagerank(
    links: Iterable[tuple[str, str]],
    seeds: Mapping[str, float],
    *,
    restart: float = RESTART,
    rounds: int = ROUNDS,
) -> dict[str, float]:
    """What each node receives through links at the fixed point of a walk over the undirected `links` that
    restarts at `seeds` (weights, any scale) with probability `restart` at each step. A node with no links
    hands its mass back to the seeds; that return is not counted as received, so an isolated seed scores 0."""
    total = sum(w for w in seeds.values() if w > 0)
    if total <= 0:
        return {}
    start = {node: w / total for node, w in seeds.items() if w > 0}
    neighbours: dict[str, set[str]] = {}
    for a, b in links:
        if a != b:
            neighbours.setdefault(a, set()).add(b)
            neighbours.setdefault(b, set()).add(a)
    adjacency = {node: sorted(linked) for node, linked in neighbours.items()}
    mass = dict(start)
    inflow: dict[str, float] = {}
    for _ in range(rounds):
        inflow = {}
        stranded = 0.0
        for node, m in mass.items():
            linked = adjacency.get(node)
            if not linked:
                stranded += (1 - restart) * m
                continue
            share = (1 - restart) * m / len(linked)
            for other in linked:
                inflow[other] = inflow.get(other, 0.0) + share
        mass = dict(inflow)
        for node, w in start.items():
            mass[node] = mass.get(node, 0.0) + (restart + stranded) * w
    return inflow
