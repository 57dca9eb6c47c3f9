"""The reflect patterns, what each needs from the graph, and the profile that decides which can run.

Reflect first profiles the graph (how many live nodes of each label, how many open edges of each relation)
and runs only the patterns whose needs that profile meets; the others are reported as skipped, so the
assistant can tell the person what is missing ("no Course covers a Concept yet") instead of silence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from server.reflect.connections import (
    DOMAIN_RELATIONS,
    SHARED_TECHNOLOGY_RELATIONS,
    concept_clustering,
    cross_project_solution,
    shared_technology,
    technique_transfer,
    training_opportunity,
)
from server.reflect.errors import ReflectError
from server.reflect.graph import Graph
from server.reflect.upkeep import (
    ANCHOR_LABELS,
    MIN_ENTITIES_FOR_UNDER_CONNECTED,
    stale_knowledge,
    under_connected,
)
from server.reflect.values import Finding


@dataclass(frozen=True)
class GraphProfile:
    """Which labels and relations have data: live, non-stub nodes per label; open edges per relation."""

    labels: Counter[str]
    relations: Counter[str]
    entities: int

    @classmethod
    def of(cls, graph: Graph) -> GraphProfile:
        return cls(graph.label_counts, Counter(graph.relation_counts), graph.entity_count)


@dataclass(frozen=True)
class Needs:
    """A pattern's preconditions. Each inner tuple is "at least one of these"; all groups must hold."""

    labels: tuple[tuple[str, ...], ...] = ()
    relations: tuple[tuple[str, ...], ...] = ()
    min_entities: int = 0

    def met_by(self, profile: GraphProfile) -> bool:
        return (
            profile.entities >= self.min_entities
            and all(any(profile.labels[label] for label in group) for group in self.labels)
            and all(any(profile.relations[rel] for rel in group) for group in self.relations)
        )


@dataclass(frozen=True)
class Pattern:
    name: str
    needs: Needs
    find: Callable[[Graph, float], list[Finding]]


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "cross_project_solution",
        Needs(
            labels=(("Problem",), ("Project",), ("Concept",), ("Decision",)),
            relations=(("APPLIES",), ("SOLVED_BY",)),
        ),
        cross_project_solution,
    ),
    Pattern(
        "shared_technology",
        Needs(labels=(("Technology",),), relations=(SHARED_TECHNOLOGY_RELATIONS,)),
        shared_technology,
    ),
    Pattern(
        "training_opportunity",
        Needs(labels=(("Course",), ("Concept",), ("Problem", "Vulnerability")), relations=(("COVERS",),)),
        training_opportunity,
    ),
    Pattern(
        "technique_transfer",
        Needs(labels=(("Technique",), ("Domain",)), relations=(DOMAIN_RELATIONS,)),
        technique_transfer,
    ),
    Pattern("concept_clustering", Needs(labels=(("Concept",),), min_entities=4), concept_clustering),
    Pattern("stale_knowledge", Needs(labels=(ANCHOR_LABELS,)), stale_knowledge),
    Pattern("under_connected", Needs(min_entities=MIN_ENTITIES_FOR_UNDER_CONNECTED), under_connected),
)
PATTERN_NAMES: tuple[str, ...] = tuple(p.name for p in PATTERNS)


def select_patterns(names: Sequence[str] | None) -> list[Pattern]:
    """The patterns called `names` (all of them for None), in the canonical order."""
    if names is None:
        return list(PATTERNS)
    wanted = [str(n).strip() for n in names]
    unknown = [n for n in wanted if n not in PATTERN_NAMES]
    if unknown:
        raise ReflectError(
            f"unknown pattern{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"use any of: {', '.join(PATTERN_NAMES)} (or leave patterns out to run them all)"
        )
    return [p for p in PATTERNS if p.name in wanted]


def run_patterns(
    graph: Graph, patterns: Sequence[Pattern], now: float
) -> tuple[list[str], list[str], list[Finding]]:
    """Run the patterns whose needs the graph meets: (ran, skipped, findings)."""
    profile = GraphProfile.of(graph)
    ran, skipped, findings = [], [], []
    for pattern in patterns:
        if not pattern.needs.met_by(profile):
            skipped.append(pattern.name)
            continue
        ran.append(pattern.name)
        findings.extend(pattern.find(graph, now))
    return ran, skipped, findings
