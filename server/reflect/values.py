"""Frozen values that reflect and the insight services hand to MCP tools and CLI commands."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InsightSummary:
    """One insight in a list: enough to show it and to approve or dismiss it by id."""

    id: str
    title: str
    pattern: str
    confidence: float


@dataclass(frozen=True)
class ReflectResult:
    """What one reflect run did.

    `insights` are the pending insights this run found (new or refreshed), most confident first;
    `skipped_patterns` are the requested patterns whose preconditions the graph does not meet yet.
    """

    created: int
    insights: list[InsightSummary]
    skipped_patterns: list[str]


@dataclass(frozen=True)
class EntityRef:
    """A node an insight is about."""

    id: str
    label: str
    name: str


@dataclass(frozen=True)
class InsightView:
    """A pending insight as the person reviews it."""

    id: str
    title: str
    body: str
    pattern: str
    confidence: float
    entities: list[EntityRef]


@dataclass(frozen=True)
class InsightDecision:
    """The status an insight has after approve/dismiss, and where its vault record is (or that it is queued)."""

    id: str
    status: str
    message: str = ""


@dataclass(frozen=True)
class Finding:
    """What a pattern proposes, before it has an identity.

    `anchors` are the entities the insight is *about* (its identity); `entities` are all the entities it names,
    anchors first, which may grow or shrink between runs without making it a different insight.
    """

    pattern: str
    anchors: tuple[str, ...]
    entities: tuple[str, ...]
    title: str
    body: str
    confidence: float
