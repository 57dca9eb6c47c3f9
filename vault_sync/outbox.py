"""What a queued write must still do to the vault: the payloads of the outbox (DESIGN §2, one writer per vault).

A process that does not hold the vault's lease (a second MCP client's server) changes the graph at once and
queues what the note must still receive; the lease holder applies it through the safe writer. A payload holds
intentions, not bytes: properties to set, keys to take out, an observation with the day it was made, relations
to the nodes they reach. The holder re-plans them against the note's text at the moment it writes, so a note the
person edited meanwhile keeps every one of their bytes, and applying a payload twice (a crash between the note
write and the row's removal) changes nothing the second time.

Pure values and their JSON form; the table lives in the store (`server/store/outbox_sql.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENTITY, ARCHIVE, TRASH, INSIGHT, INSIGHT_WRITE = "entity", "archive", "trash", "insight", "insight_write"


@dataclass(frozen=True)
class QueuedRelation:
    """A relation to mirror into the source note: its type and the node it reaches (the holder decides the
    link's text when it writes, from the vault as it is then)."""

    rel_type: str
    target_id: str
    target_name: str


@dataclass(frozen=True)
class EntityChange:
    """`engrama_remember` / `engrama_relate`: what the entity's note must say after the write."""

    node_id: str
    label: str
    name: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    observation: str | None = None
    day: str = ""  # the ISO date the observation is dated with (the day it was made, not the day it lands)
    reason: str = ""
    relations: tuple[QueuedRelation, ...] = ()
    # What the changed keys (`properties`, `remove`) held in the graph when the write was queued (None for an
    # absent key); None when not known (a row of an older version). A key holding something else when the row
    # is applied was changed since (the person's edit, a later write): the row leaves it as it is.
    base: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ArchiveChange:
    """`engrama_forget` (archive): the note's `status:` line says `archived`. `base` holds what the node's
    `status` property was when the archive was queued ({"status": value or None}; None in a row of an older
    version): a status the person set since is left as it is (review 22a)."""

    node_id: str
    name: str
    base: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class TrashChange:
    """`engrama_forget` (purge with delete_note): the note at `path`, if it still holds `node_id`, goes to `.trash/`."""

    node_id: str
    name: str
    path: str


@dataclass(frozen=True)
class InsightRecord:
    """An insight decision whose vault record (its note, or a line of the dismissed list) is still to write."""

    insight_id: str


@dataclass(frozen=True)
class InsightWrite:
    """`engrama_write_insight_to_vault` asked of a process without the vault: the approved insight's section goes
    into its entities' notes (or `target_note`), as the holder finds them when it writes."""

    insight_id: str
    target_note: str | None = None


Change = EntityChange | ArchiveChange | TrashChange | InsightRecord | InsightWrite


def kind_of(change: Change) -> str:
    if isinstance(change, EntityChange):
        return ENTITY
    if isinstance(change, ArchiveChange):
        return ARCHIVE
    if isinstance(change, TrashChange):
        return TRASH
    if isinstance(change, InsightWrite):
        return INSIGHT_WRITE
    return INSIGHT


def subject_of(change: Change) -> str:
    """The node (or insight) the change is about: changes to one subject are applied in order, one at a time."""
    return change.insight_id if isinstance(change, InsightRecord | InsightWrite) else change.node_id


def encode(change: Change) -> str:
    """The change as JSON text (the outbox row's `payload`)."""
    if isinstance(change, EntityChange):
        data: dict[str, Any] = {
            "node_id": change.node_id,
            "label": change.label,
            "name": change.name,
            "properties": dict(change.properties),
            "remove": list(change.remove),
            "observation": change.observation,
            "day": change.day,
            "reason": change.reason,
            "relations": [[r.rel_type, r.target_id, r.target_name] for r in change.relations],
            "base": dict(change.base) if change.base is not None else None,
        }
    elif isinstance(change, ArchiveChange):
        data = {
            "node_id": change.node_id,
            "name": change.name,
            "base": dict(change.base) if change.base is not None else None,
        }
    elif isinstance(change, TrashChange):
        data = {"node_id": change.node_id, "name": change.name, "path": change.path}
    elif isinstance(change, InsightWrite):
        data = {"insight_id": change.insight_id, "target_note": change.target_note}
    else:
        data = {"insight_id": change.insight_id}
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)


def decode(kind: str, payload: str) -> Change:
    """The change a row holds. Raises ValueError for a kind this version does not know or a damaged payload."""
    try:
        data = json.loads(payload)
        if kind == ENTITY:
            return EntityChange(
                node_id=data["node_id"],
                label=data["label"],
                name=data["name"],
                properties=dict(data["properties"]),
                remove=tuple(data["remove"]),
                observation=data["observation"],
                day=data["day"],
                reason=data["reason"],
                # Rows queued by an older version also carry the link's text: the holder decides it now.
                relations=tuple(QueuedRelation(*r[:3]) for r in data["relations"]),
                base=dict(data["base"]) if data.get("base") is not None else None,
            )
        if kind == ARCHIVE:
            base = data.get("base")
            return ArchiveChange(data["node_id"], data["name"], dict(base) if base is not None else None)
        if kind == TRASH:
            return TrashChange(data["node_id"], data["name"], data["path"])
        if kind == INSIGHT:
            return InsightRecord(data["insight_id"])
        if kind == INSIGHT_WRITE:
            return InsightWrite(data["insight_id"], data["target_note"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"a queued {kind} write cannot be read ({exc!r})") from exc
    raise ValueError(
        f"a queued write of kind {kind!r} comes from a newer engrama-vault; upgrade this one to apply it"
    )
