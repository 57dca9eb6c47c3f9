"""The graph as reflect reads it: one snapshot in memory, with adjacency by relation type.

Reflect loads every live node and open edge once (two queries, one WAL snapshot) and runs all patterns over
plain dicts. On a 10,000-note vault that is a few hundred thousand Python operations, far cheaper than one
SQL query per pattern per node, and it lets each pattern be a short, testable function.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from server.reflect.confidence import edge_weight
from server.store.insights_sql import NodeRow

# Property values that mean a Problem/Vulnerability is no longer open, and that a Project/Course is over.
RESOLVED_STATES = frozenset(
    {"resolved", "solved", "fixed", "closed", "done", "patched", "mitigated", "remediated", "wontfix"}
)
INACTIVE_STATES = frozenset(
    {
        "done",
        "completed",
        "complete",
        "finished",
        "archived",
        "cancelled",
        "canceled",
        "closed",
        "abandoned",
        "ended",
        "inactive",
        "paused",
        "on hold",
    }
)


@dataclass(frozen=True, slots=True)
class Entity:
    """A live node. `updated` is when its knowledge last changed, as epoch seconds (see `_last_change`)."""

    id: str
    label: str
    name: str
    path: str | None
    stub: bool
    state: str
    confidence: float
    updated: float


@dataclass(frozen=True, slots=True)
class Tie:
    """One edge seen from one end: its type, the node at the other end, and its weight (confidence.py)."""

    type: str
    other: str
    weight: float


class Graph:
    """Adjacency over the snapshot; `out`/`into` filter by relation types, `neighbours` ignores them."""

    def __init__(self, entities: Iterable[Entity], edges: Iterable[tuple[str, str, str, str]]) -> None:
        self.entities: dict[str, Entity] = {e.id: e for e in entities}
        self._out: dict[str, list[Tie]] = defaultdict(list)
        self._into: dict[str, list[Tie]] = defaultdict(list)
        self.relation_counts: Counter[str] = Counter()
        for source, rel_type, target, origin in edges:
            if source not in self.entities or target not in self.entities:
                continue
            weight = edge_weight(origin)
            self._out[source].append(Tie(rel_type, target, weight))
            self._into[target].append(Tie(rel_type, source, weight))
            self.relation_counts[rel_type] += 1
        self.by_label: dict[str, list[Entity]] = defaultdict(list)
        for entity in sorted(self.entities.values(), key=lambda e: (e.name.casefold(), e.id)):
            if not entity.stub:
                self.by_label[entity.label].append(entity)

    @property
    def label_counts(self) -> Counter[str]:
        return Counter({label: len(items) for label, items in self.by_label.items()})

    @property
    def entity_count(self) -> int:
        """Nodes backed by a note or a tool (stubs are only names someone linked to)."""
        return sum(len(items) for items in self.by_label.values())

    def out(self, node_id: str, *types: str) -> list[Tie]:
        ties = self._out.get(node_id, ())
        return [t for t in ties if not types or t.type in types]

    def into(self, node_id: str, *types: str) -> list[Tie]:
        ties = self._into.get(node_id, ())
        return [t for t in ties if not types or t.type in types]

    def neighbours(self, node_id: str) -> dict[str, float]:
        """Every node joined to `node_id` either way, with the strongest edge weight between them."""
        best: dict[str, float] = {}
        for tie in (*self._out.get(node_id, ()), *self._into.get(node_id, ())):
            best[tie.other] = max(best.get(tie.other, 0.0), tie.weight)
        return best

    def real(self, node_id: str) -> Entity | None:
        """The entity if it is live and not a stub."""
        entity = self.entities.get(node_id)
        return None if entity is None or entity.stub else entity

    def names(self, ids: Sequence[str]) -> list[str]:
        return [self.entities[i].name for i in ids if i in self.entities]


def is_open(entity: Entity, graph: Graph) -> bool:
    """A Problem/Vulnerability is open unless its status says resolved, or it has no status but a solution."""
    if entity.state:
        return entity.state not in RESOLVED_STATES
    return not graph.out(entity.id, "SOLVED_BY", "MITIGATED_BY")


def is_active(entity: Entity) -> bool:
    """A Project/Course is active unless its status property says it is over."""
    return entity.state not in INACTIVE_STATES


def build_graph(nodes: Sequence[NodeRow], edges: Iterable[tuple[str, str, str, str]]) -> Graph:
    return Graph((_entity(row) for row in nodes), edges)


def _entity(row: NodeRow) -> Entity:
    return Entity(
        id=row.id,
        label=row.label,
        name=row.name,
        path=row.path,
        stub=row.status == "stub",
        state=row.state,
        confidence=row.confidence,
        updated=_last_change(row),
    )


def _last_change(row: NodeRow) -> float:
    """When the knowledge in a node last changed, as epoch seconds.

    An `updated` / `modified` date in the note wins: it is what the person maintains, and the file's mtime
    moves whenever engrama itself writes the note (an id line, an insight section). Then the file's mtime,
    which survives a database rebuild; then the node's `updated_at` (tool-only nodes).
    """
    stated = _parse_time(row.changed)
    if stated is not None:
        return stated
    if row.mtime_ns:
        return row.mtime_ns / 1e9
    return _parse_time(row.updated_at) or 0.0


def _parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        try:
            when = datetime.combine(date.fromisoformat(text.strip()[:10]), datetime.min.time())
        except ValueError:
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
