"""All SQL of `engrama-vault decay`: confidence fades with the time since a node or edge was last updated.

confidence = base x exp(-rate x days), where `base` is the confidence at the last update (`base_confidence`,
or `confidence` itself while that is null) and `days` counts whole UTC calendar days. Computing from the base
means a daily run never compounds, and whole days make two runs on the same day write identical values.
The exponential is taken in Python: SQLite's math functions are a compile-time option some builds lack.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

LOWEST_LISTED = 5


@dataclass(frozen=True)
class FadedNode:
    """A node among the least confident after decay, for the summary."""

    id: str
    label: str
    name: str
    confidence: float


@dataclass(frozen=True)
class DecayReport:
    """What one decay run considered and changed (or, in a dry run, would change)."""

    decayed_at: str
    dry_run: bool
    nodes: int
    edges: int
    nodes_changed: int
    edges_changed: int
    lowest: tuple[FadedNode, ...]


_ACTIVE_NODES = """
select id, label, name, confidence, base_confidence, updated_at from nodes where status = 'active'
"""
# Open edges between two live nodes; they fade at the rate of their source's label, from their last update:
# the later of when the edge appeared and when its source (the note stating it) last changed.
_OPEN_EDGES = """
select e.id, s.label, e.confidence, e.base_confidence, max(e.valid_from, s.updated_at)
from edges e join nodes s on s.id = e.source join nodes t on t.id = e.target
where e.valid_to is null and s.status = 'active' and t.status = 'active'
"""
_SET_NODE = "update nodes set confidence = ?, base_confidence = ?, decayed_at = ? where id = ?"
_SET_EDGE = "update edges set confidence = ?, base_confidence = ?, decayed_at = ? where id = ?"


def decay(conn: Any, rates: Callable[[str], float], now: datetime, dry_run: bool = False) -> DecayReport:
    """Fade every active node and every open edge between active nodes as of `now`.

    `rates(label)` is the per-day rate (the profile's `decay_rate_for`). Only rows whose confidence moves are
    written, so a second run on the same day writes nothing. With `dry_run` nothing is written at all.
    """
    moment = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
    stamp, today = moment.strftime("%Y-%m-%dT%H:%M:%SZ"), moment.date()
    rate_of = _cached(rates)
    ages = _DayCounter(today)

    node_rows = conn.execute(_ACTIVE_NODES).fetchall()
    node_updates, faded = [], []
    for node_id, label, name, current, base, updated_at in node_rows:
        base = current if base is None else base
        value = _faded(base, rate_of(label), ages.since(updated_at))
        faded.append((value, node_id, label, name))
        if value != current:
            node_updates.append((value, base, stamp, node_id))

    edge_rows = conn.execute(_OPEN_EDGES).fetchall()
    edge_updates = []
    for edge_id, label, current, base, valid_from in edge_rows:
        base = current if base is None else base
        value = _faded(base, rate_of(label), ages.since(valid_from))
        if value != current:
            edge_updates.append((value, base, stamp, edge_id))

    if not dry_run:
        conn.executemany(_SET_NODE, node_updates)
        conn.executemany(_SET_EDGE, edge_updates)
    lowest = heapq.nsmallest(LOWEST_LISTED, faded)
    return DecayReport(
        decayed_at=stamp,
        dry_run=dry_run,
        nodes=len(node_rows),
        edges=len(edge_rows),
        nodes_changed=len(node_updates),
        edges_changed=len(edge_updates),
        lowest=tuple(FadedNode(node_id, label, name, value) for value, node_id, label, name in lowest),
    )


def _faded(base: float, rate: float, days: int) -> float:
    # Zero days or a zero rate keep the base exactly (exp(0) is 1.0, but skipping it says so).
    return base if days == 0 or rate == 0 else base * math.exp(-rate * days)


def _cached(rates: Callable[[str], float]) -> Callable[[str], float]:
    """`rates` looked up once per label (a graph has a handful of labels and thousands of nodes)."""
    known: dict[str, float] = {}

    def rate_of(label: str) -> float:
        if label not in known:
            known[label] = float(rates(label))
        return known[label]

    return rate_of


class _DayCounter:
    """Whole UTC calendar days from a stored timestamp to `today`, parsed once per distinct date."""

    def __init__(self, today: date) -> None:
        self.today = today
        self._days: dict[str, int] = {}

    def since(self, stamp: str | None) -> int:
        text = stamp or ""
        # The store writes UTC `YYYY-MM-DDTHH:MM:SSZ` (or a bare date), whose first 10 characters are the day;
        # anything else is parsed in full and moved to UTC.
        key = text[:10] if text.endswith("Z") or len(text) == 10 else text
        if key not in self._days:
            self._days[key] = _days_between(key, self.today)
        return self._days[key]


def _days_between(stamp: str, today: date) -> int:
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return 0  # no usable date: the confidence stays at its base
    day = moment.astimezone(UTC).date() if moment.tzinfo else moment.date()
    return max(0, (today - day).days)
