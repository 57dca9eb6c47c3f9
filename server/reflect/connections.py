"""Patterns that connect entities across the graph: solutions, technologies, courses, techniques, concepts.

Each pattern is a function `(graph, now) -> list[Finding]`; `now` is unused here but keeps one signature for
all patterns. Every finding names its anchors (what the insight is about, hence its identity) and the rest
of its entities, and scores itself with `confidence.score`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from server.reflect.confidence import score
from server.reflect.graph import Entity, Graph, is_open
from server.reflect.values import Finding
from server.reflect.wording import count, join_names

SHARED_TECHNOLOGY_RELATIONS = ("USES", "TEACHES", "COMPOSED_OF")
DOMAIN_RELATIONS = ("USED_IN", "IN_DOMAIN")


def _labelled(graph: Graph, node_id: str, *labels: str) -> Entity | None:
    entity = graph.real(node_id)
    return entity if entity is not None and entity.label in labels else None


def _linked(graph: Graph, node_id: str, label: str) -> dict[str, float]:
    """Entities of `label` joined to `node_id` by any edge, either way, with the strongest weight."""
    return {
        other: weight
        for other, weight in graph.neighbours(node_id).items()
        if _labelled(graph, other, label) is not None
    }


def _sorted_ids(graph: Graph, ids: Iterable[str]) -> list[str]:
    """Ids ordered by name, so titles, bodies and entity lists read the same on every run."""
    return sorted(ids, key=lambda i: (graph.entities[i].name.casefold(), i))


# --- 1. cross-project solution ---------------------------------------------------------------------------


@dataclass
class _Solution:
    """Evidence that a Decision that resolved problems elsewhere may solve one open problem."""

    concepts: dict[str, float] = field(default_factory=dict)
    solved: dict[str, float] = field(default_factory=dict)
    projects: dict[str, float] = field(default_factory=dict)
    weights: list[float] = field(default_factory=list)


# A resolved problem as evidence: (problem, [(decision, weight)], {project: weight}, weight of its APPLIES).
_Solved = tuple[Entity, list[tuple[str, float]], dict[str, float], float]


def _solved_by_concept(graph: Graph) -> dict[str, list[_Solved]]:
    """Concept -> the resolved, decided problems of some project that apply it."""
    index: dict[str, list[_Solved]] = defaultdict(list)
    for problem in graph.by_label.get("Problem", []):
        if is_open(problem, graph):
            continue
        decisions = [
            (t.other, t.weight)
            for t in graph.out(problem.id, "SOLVED_BY")
            if _labelled(graph, t.other, "Decision")
        ]
        projects = _linked(graph, problem.id, "Project")
        if not decisions or not projects:
            continue
        for tie in graph.out(problem.id, "APPLIES"):
            if _labelled(graph, tie.other, "Concept"):
                index[tie.other].append((problem, decisions, projects, tie.weight))
    return index


def cross_project_solution(graph: Graph, now: float) -> list[Finding]:
    """An open Problem of one Project shares a Concept with a resolved Problem of another Project that was
    SOLVED_BY a Decision: propose that Decision. One insight per (open problem, decision)."""
    index = _solved_by_concept(graph)
    findings = []
    for problem in graph.by_label.get("Problem", []):
        mine = _linked(graph, problem.id, "Project")
        if not mine or not is_open(problem, graph):
            continue
        evidence: dict[str, _Solution] = defaultdict(_Solution)
        for tie in graph.out(problem.id, "APPLIES"):
            for solved, decisions, theirs, weight in index.get(tie.other, []):
                elsewhere = {p: w for p, w in theirs.items() if p not in mine}
                if not elsewhere:
                    continue  # the same project: not a transfer between projects
                for decision, decision_weight in decisions:
                    ev = evidence[decision]
                    ev.concepts[tie.other] = tie.weight
                    ev.solved[solved.id] = weight
                    ev.projects.update(elsewhere)
                    ev.weights += [tie.weight, weight, decision_weight, *elsewhere.values()]
        for decision, ev in evidence.items():
            findings.append(_solution_finding(graph, problem, decision, mine, ev))
    return findings


def _solution_finding(
    graph: Graph, problem: Entity, decision: str, mine: dict[str, float], ev: _Solution
) -> Finding:
    name = graph.entities[decision].name
    concepts, solved = _sorted_ids(graph, ev.concepts), _sorted_ids(graph, ev.solved)
    projects = _sorted_ids(graph, ev.projects)
    body = (
        f"{problem.name} is still open in {join_names(graph.names(_sorted_ids(graph, mine)))}. It shares "
        f"{join_names(graph.names(concepts))} with {join_names(graph.names(solved))} in "
        f"{join_names(graph.names(projects))}, which the decision {name} resolved. "
        f"Consider whether {name} would solve {problem.name} too."
    )
    return Finding(
        pattern="cross_project_solution",
        anchors=(problem.id, decision),
        entities=(problem.id, decision, *concepts, *solved, *_sorted_ids(graph, mine), *projects),
        title=f"Cross-project solution: {name} may solve {problem.name}",
        body=body,
        confidence=score(
            "cross_project_solution",
            [*ev.weights, *mine.values()],
            len(concepts) + len(solved),
            2,
        ),
    )


# --- 2. shared technology --------------------------------------------------------------------------------


def shared_technology(graph: Graph, now: float) -> list[Finding]:
    """Entities that use, teach or are composed of the same Technology: one insight per Technology."""
    findings = []
    for tech in graph.by_label.get("Technology", []):
        users: dict[str, float] = {}
        for tie in graph.into(tech.id, *SHARED_TECHNOLOGY_RELATIONS):
            if graph.real(tie.other) is not None:
                users[tie.other] = max(users.get(tie.other, 0.0), tie.weight)
        if len(users) < 2:
            continue
        ids = _sorted_ids(graph, users)
        findings.append(
            Finding(
                pattern="shared_technology",
                anchors=(tech.id,),
                entities=(tech.id, *ids),
                title=f"Shared technology: {count(len(ids), 'entity', 'entities')} build on {tech.name}",
                body=f"{join_names(graph.names(ids))} use, teach or are built from {tech.name}. What one "
                f"of them learned about {tech.name} (versions, pitfalls, decisions) may help the others.",
                confidence=score("shared_technology", users.values(), len(ids), 2),
            )
        )
    return findings


# --- 3. training opportunity -----------------------------------------------------------------------------


def training_opportunity(graph: Graph, now: float) -> list[Finding]:
    """An open Problem or Vulnerability linked to a Concept that a Course COVERS: one per (problem, course)."""
    courses_by_concept: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for course in graph.by_label.get("Course", []):
        for tie in graph.out(course.id, "COVERS"):
            if _labelled(graph, tie.other, "Concept"):
                courses_by_concept[tie.other].append((course.id, tie.weight))
    findings = []
    for problem in [*graph.by_label.get("Problem", []), *graph.by_label.get("Vulnerability", [])]:
        if not is_open(problem, graph):
            continue
        per_course: dict[str, dict[str, list[float]]] = defaultdict(dict)
        for concept, weight in _linked(graph, problem.id, "Concept").items():
            for course, covers in courses_by_concept.get(concept, []):
                per_course[course][concept] = [weight, covers]
        for course, concepts in per_course.items():
            findings.append(_training_finding(graph, problem, course, concepts))
    return findings


def _training_finding(
    graph: Graph, problem: Entity, course: str, concepts: dict[str, list[float]]
) -> Finding:
    name = graph.entities[course].name
    ids = _sorted_ids(graph, concepts)
    return Finding(
        pattern="training_opportunity",
        anchors=(problem.id, course),
        entities=(problem.id, course, *ids),
        title=f"Training opportunity: {name} covers what {problem.name} needs",
        body=f"The open {problem.label.lower()} {problem.name} involves {join_names(graph.names(ids))}, "
        f"which the course {name} covers. The course may help solve it, and it may make a good case "
        "study for the course.",
        confidence=score(
            "training_opportunity", [w for pair in concepts.values() for w in pair], len(ids), 1
        ),
    )


# --- 4. technique transfer -------------------------------------------------------------------------------


def technique_transfer(graph: Graph, now: float) -> list[Finding]:
    """A Technique used in two or more Domains: one insight per Technique."""
    findings = []
    for technique in graph.by_label.get("Technique", []):
        domains: dict[str, float] = {}
        for tie in graph.out(technique.id, *DOMAIN_RELATIONS):
            if _labelled(graph, tie.other, "Domain"):
                domains[tie.other] = max(domains.get(tie.other, 0.0), tie.weight)
        if len(domains) < 2:
            continue
        ids = _sorted_ids(graph, domains)
        findings.append(
            Finding(
                pattern="technique_transfer",
                anchors=(technique.id,),
                entities=(technique.id, *ids),
                title=f"Technique transfer: {technique.name} is used in {count(len(ids), 'domain')}",
                body=f"{technique.name} is practised in {join_names(graph.names(ids))}. What works for it "
                "in one domain may carry over to the others: compare how each applies it.",
                confidence=score("technique_transfer", domains.values(), len(ids), 2),
            )
        )
    return findings


# --- 5. concept clustering -------------------------------------------------------------------------------


def concept_clustering(graph: Graph, now: float) -> list[Finding]:
    """A Concept that three or more entities point at (any relation, wikilinks included, at their weight)."""
    findings = []
    for concept in graph.by_label.get("Concept", []):
        sharers: dict[str, float] = {}
        for tie in graph.into(concept.id):
            if graph.real(tie.other) is not None:
                sharers[tie.other] = max(sharers.get(tie.other, 0.0), tie.weight)
        if len(sharers) < 3:
            continue
        ids = _sorted_ids(graph, sharers)
        findings.append(
            Finding(
                pattern="concept_clustering",
                anchors=(concept.id,),
                entities=(concept.id, *ids),
                title=f"Concept cluster: {count(len(ids), 'entity', 'entities')} share {concept.name}",
                body=f"{join_names(graph.names(ids))} connect to {concept.name}. Together they may form "
                "a theme worth a note of its own, or a pattern worth naming.",
                confidence=score("concept_clustering", sharers.values(), len(ids), 3),
            )
        )
    return findings
