"""Units of work for the outbox (m005): a follower's graph change and its queued vault write in one transaction,
and the lease holder's bookkeeping while it applies them.

Each `*_and_queue` unit makes the graph change a tool asks for and, when `queue` is set (a vault exists but
another process holds its lease), adds the row that carries the change into the vault. Both commit together or
not at all, so a SIGKILL of either process at any moment leaves either both or neither.

Synchronous functions on the raw connection, run through `GraphStore.read` / `GraphStore.write`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from server.store import forget_sql, insights_sql, memory_sql
from server.store.forget_sql import Purged
from vault_sync.outbox import (
    ArchiveChange,
    Change,
    EntityChange,
    InsightRecord,
    QueuedRelation,
    TrashChange,
    encode,
    kind_of,
    subject_of,
)

_TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class QueuedRow:
    """One row of the outbox as the holder reads it."""

    id: int
    kind: str
    subject: str
    payload: str
    queued_at: str
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class OutboxSummary:
    """What `engrama_status` says about the outbox."""

    waiting: int
    oldest_queued_at: str | None = None
    failing: int = 0  # rows whose last attempt failed
    error: str | None = None  # the last error of the oldest failing row


def enqueue(conn: Any, change: Change, now: str) -> int:
    """Add `change` to the outbox; returns its row id."""
    cursor = conn.execute(
        "insert into outbox (kind, subject, payload, queued_at) values (?, ?, ?, ?)",
        (kind_of(change), subject_of(change), encode(change), now),
    )
    return cursor.lastrowid


def remember_and_queue(
    conn: Any,
    label: str,
    name: str,
    properties: dict[str, Any],
    observation: str | None,
    now: str,
    reason: str,
    remove: tuple[str, ...],
    relations: Sequence[QueuedRelation],
    day: str | None,
    note_base: Mapping[str, Any] | None = None,
) -> tuple[str, bool, int]:
    """MERGE the entity and open its relations as tool edges in the graph; with `day` set, also queue the
    note write (dated `day`). Returns (node id, created, relations added)."""
    target = memory_sql.find_merge_target(conn, label, name)
    held = target.properties if target is not None and target.status != "stub" else {}
    base = {key: held.get(key) for key in (*properties, *remove)} | dict(note_base or {})
    node_id, created = memory_sql.remember_in_graph(
        conn, label, name, properties, observation, now, reason, remove
    )
    added = sum(memory_sql.add_tool_edge(conn, node_id, r.rel_type, r.target_id, now) for r in relations)
    if day is not None:
        (merged_name,) = conn.execute("select name from nodes where id = ?", (node_id,)).fetchone()
        change = EntityChange(
            node_id=node_id,
            label=label,
            name=merged_name,
            properties=properties,
            remove=remove,
            observation=observation,
            day=day,
            reason=reason,
            relations=tuple(relations),
            base=base,
        )
        enqueue(conn, change, now)
    return node_id, created, added


def archive_and_queue(conn: Any, node_id: str, name: str, now: str, reason: str, queue: bool) -> bool:
    """Archive the node in the graph; with `queue`, also queue its note's `status: archived` line, with the
    status the node had (a status the person sets meanwhile wins: `services.outbox`)."""
    row = conn.execute("select properties from nodes where id = ?", (node_id,)).fetchone()
    held = json.loads(row["properties"] or "{}") if row is not None else {}
    changed = forget_sql.archive_in_graph(conn, node_id, now, reason)
    if queue:
        status = held.get("status") if isinstance(held, dict) else None
        enqueue(conn, ArchiveChange(node_id, name, {"status": status}), now)
    return changed


def purge_and_queue(conn: Any, node_id: str, name: str, path: str, now: str) -> Purged:
    """Purge the node from the graph and queue the move of its note at `path` to the vault's trash."""
    purged = forget_sql.purge_node(conn, node_id, None, now)
    enqueue(conn, TrashChange(node_id, name, path), now)
    return purged


def decide_and_queue(conn: Any, insight_id: str, status: str, now: str) -> int | None:
    """Take a decision on a pending insight and queue its vault record; returns the queued row's id, or None
    (nothing done) when the insight was no longer pending."""
    if not insights_sql.decide(conn, insight_id, status, now):
        return None
    return enqueue(conn, InsightRecord(insight_id), now)


def insight_recorded(conn: Any, insight_id: str) -> bool:
    """True when the insight's decision is already on record in the vault (or the insight is gone)."""
    row = conn.execute("select status, recorded_at from insights where id = ?", (insight_id,)).fetchone()
    return row is None or row["status"] == insights_sql.PENDING or row["recorded_at"] is not None


# --- the holder's side ---------------------------------------------------------------------------------------


def has_waiting(conn: Any) -> bool:
    return conn.execute("select 1 from outbox limit 1").fetchone() is not None


def waiting(conn: Any, after_id: int, limit: int) -> list[QueuedRow]:
    """Rows after `after_id`, oldest first (the order the writes were accepted in)."""
    rows = conn.execute(
        "select id, kind, subject, payload, queued_at, attempts, last_error from outbox "
        "where id > ? order by id limit ?",
        (after_id, limit),
    ).fetchall()
    return [QueuedRow(*tuple(r)) for r in rows]


def applied(conn: Any, row_id: int, node_id: str | None, now: str) -> None:
    """The row's change is in the vault: drop the row, and close the tool edges of `node_id` that stood in for
    it, so the graph holds what a rebuild from the vault would. Once nothing more is queued for the entity,
    all of them: its note is the truth now, whichever note its links lead to (names may have moved since the
    follower planned them); while later rows wait, only those its note already states."""
    subject = conn.execute("select subject from outbox where id = ?", (row_id,)).fetchone()
    conn.execute("delete from outbox where id = ?", (row_id,))
    if node_id is None:
        return
    more = (
        subject is not None
        and conn.execute("select 1 from outbox where subject = ? limit 1", (subject[0],)).fetchone()
    )
    stated = (
        " and exists (select 1 from edges f where f.source = edges.source and f.type = edges.type "
        "and f.target = edges.target and f.origin = 'frontmatter' and f.valid_to is null)"
    )
    conn.execute(
        "update edges set valid_to = ? where source = ? and origin = 'tool' and valid_to is null"
        + (stated if more else ""),
        (now, node_id),
    )


def failed(conn: Any, row_id: int, error: str, now: str) -> None:
    """The row could not be applied now: keep it, with why, for the next attempt."""
    conn.execute(
        "update outbox set attempts = attempts + 1, last_error = ?, last_tried_at = ? where id = ?",
        (error, now, row_id),
    )


def summary(conn: Any) -> OutboxSummary:
    (count, oldest, failing) = conn.execute(
        "select count(*), min(queued_at), count(last_error) from outbox"
    ).fetchone()
    if not count:
        return OutboxSummary(0)
    first_failing = conn.execute(
        "select last_error from outbox where last_error is not null order by id limit 1"
    ).fetchone()
    return OutboxSummary(count, oldest, failing, first_failing[0] if first_failing else None)


def age_seconds(queued_at: str, now: datetime | None = None) -> float:
    """Seconds since the store timestamp `queued_at`."""
    then = datetime.strptime(queued_at, _TIMESTAMP).replace(tzinfo=UTC)
    return max(0.0, ((now or datetime.now(UTC)) - then).total_seconds())
