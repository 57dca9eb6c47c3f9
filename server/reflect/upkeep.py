"""Patterns about the upkeep of single nodes: stale knowledge and under-connected nodes."""

from __future__ import annotations

from server.reflect.confidence import score
from server.reflect.graph import Entity, Graph, is_active
from server.reflect.values import Finding
from server.reflect.wording import join_names

STALE_DAYS = 90
LOW_CONFIDENCE = 0.3
# Under-connected nodes are only worth flagging once the graph is big enough for relations to be expected;
# in a vault of a dozen notes every note is "under-connected" and saying so is noise.
MIN_ENTITIES_FOR_UNDER_CONNECTED = 20
ANCHOR_LABELS = ("Project", "Course")
_DAY = 86_400.0


def stale_knowledge(graph: Graph, now: float) -> list[Finding]:
    """A node still linked to an active Project or Course that has not changed for 90+ days, or whose
    confidence fell below 0.3. Severity grows with age (90 days: 0.5, 180+: 1) or with lost confidence."""
    active = {e.id for label in ANCHOR_LABELS for e in graph.by_label.get(label, []) if is_active(e)}
    linked: dict[str, dict[str, float]] = {}
    for anchor in sorted(active):
        for other, weight in graph.neighbours(anchor).items():
            if other != anchor and graph.real(other) is not None:
                linked.setdefault(other, {})[anchor] = weight
    findings = []
    for node_id, anchors in linked.items():
        entity = graph.entities[node_id]
        age_days = max(0.0, (now - entity.updated) / _DAY)
        severity = _staleness(age_days, entity.confidence)
        if severity <= 0.0:
            continue
        ids = sorted(anchors, key=lambda i: (graph.entities[i].name.casefold(), i))
        findings.append(
            Finding(
                pattern="stale_knowledge",
                anchors=(node_id,),
                entities=(node_id, *ids),
                title=f"Stale knowledge: {entity.name} ({_reason(age_days, entity.confidence)})",
                body=f"{entity.name} is still linked to the active {join_names(graph.names(ids))}, but "
                f"{_detail(age_days, entity.confidence)}. Check that it still holds: update it, or archive it "
                "if it no longer does.",
                confidence=score("stale_knowledge", anchors.values(), len(ids), 1, severity),
            )
        )
    return findings


def _staleness(age_days: float, confidence: float) -> float:
    """0 when the node is neither old nor doubted; else the larger of its age and its doubt, in (0, 1]."""
    by_age = min(1.0, age_days / (2 * STALE_DAYS)) if age_days >= STALE_DAYS else 0.0
    by_doubt = 1.0 - confidence if confidence < LOW_CONFIDENCE else 0.0
    return max(by_age, by_doubt)


def _reason(age_days: float, confidence: float) -> str:
    if age_days >= STALE_DAYS:
        return f"not updated for {int(age_days)} days"
    return f"confidence {confidence:.2f}"


def _detail(age_days: float, confidence: float) -> str:
    parts = []
    if age_days >= STALE_DAYS:
        parts.append(f"it has not changed for {int(age_days)} days")
    if confidence < LOW_CONFIDENCE:
        parts.append(f"its confidence is down to {confidence:.2f}")
    return " and ".join(parts)


def under_connected(graph: Graph, now: float) -> list[Finding]:
    """Nodes (stubs excluded) joined to fewer than two other nodes. Severity: no relation 1.0, one 0.5."""
    findings = []
    for entities in graph.by_label.values():
        for entity in entities:
            others = graph.neighbours(entity.id)
            if len(others) < 2:
                findings.append(_lonely(graph, entity, list(others)))
    return findings


def _lonely(graph: Graph, entity: Entity, others: list[str]) -> Finding:
    if others:
        what = f"only one relation (to {graph.entities[others[0]].name})"
        title = f"Under-connected: {entity.name} has only one relation"
    else:
        what = "no relations at all"
        title = f"Under-connected: {entity.name} has no relations"
    return Finding(
        pattern="under_connected",
        anchors=(entity.id,),
        entities=(entity.id, *others),
        title=title,
        body=f"{entity.name} ({entity.label}) has {what} in the graph. Relate it to the projects, concepts "
        "or people it belongs with, or archive it if it no longer matters.",
        confidence=score("under_connected", [], 1, 1, 1.0 - len(others) / 2),
    )
