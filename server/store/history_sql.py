"""Property history: what a node's properties were before they changed (issue #8).

The current value of every property lives in `nodes.properties`. When a value changes or goes away, the
old one is kept in `property_history` with the moment it stopped holding (`valid_to`), the moment it had
started (`valid_from`: the previous change of that key, or null when it predates what the graph knows),
where the change came from (`note`: an edit of the note, in Obsidian or by a tool; `tool`: a tool said
why) and the reason. So `engrama_context` can show what was true before, and what held on a given date.

Synchronous functions on the raw connection, run inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.store.nodes_sql import moment_width

NOTE_EDIT_REASON = "edited in the note"


@dataclass(frozen=True)
class PastValue:
    key: str
    value: Any  # None: the key was not set
    valid_from: str | None
    valid_to: str
    source: str
    reason: str


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def record_changes(
    conn: Any,
    node_id: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    now: str,
    *,
    source: str = "note",
    reason: str = NOTE_EDIT_REASON,
) -> list[str]:
    """Keep every value of `before` that `after` changes or drops, and mark keys `after` adds as
    previously unset. Returns the keys that changed."""
    changed = [
        key
        for key in sorted(set(before) | set(after))
        if key not in after or key not in before or _encode(before[key]) != _encode(after[key])
    ]
    for key in changed:
        (since,) = conn.execute(
            "select max(valid_to) from property_history where node_id = ? and key = ?", (node_id, key)
        ).fetchone()
        conn.execute(
            "insert into property_history (node_id, key, value, valid_from, valid_to, source, reason) "
            "values (?, ?, ?, ?, ?, ?, ?)",
            (node_id, key, _encode(before[key]) if key in before else None, since, now, source, reason),
        )
    return changed


def annotate(conn: Any, node_id: str, keys: Sequence[str], since: str, reason: str) -> int:
    """Say why the changes of `keys` recorded at or after `since` were made (a tool's own write).

    A tool writes the note first and the reconcile records the change; this then gives it the tool's
    reason. Returns how many entries were annotated."""
    if not keys:
        return 0
    marks = ",".join("?" * len(keys))
    cursor = conn.execute(
        f"update property_history set source = 'tool', reason = ? "
        f"where node_id = ? and valid_to >= ? and key in ({marks})",
        (reason, node_id, since, *keys),
    )
    return cursor.rowcount


def history(conn: Any, node_id: str, limit: int = 50) -> list[PastValue]:
    """The node's past property values, the most recent change first."""
    rows = conn.execute(
        "select key, value, valid_from, valid_to, source, reason from property_history "
        "where node_id = ? order by valid_to desc, id desc limit ?",
        (node_id, limit),
    ).fetchall()
    return [_past(row) for row in rows]


def _past(row: Any) -> PastValue:
    value = None if row["value"] is None else json.loads(row["value"])
    return PastValue(row["key"], value, row["valid_from"], row["valid_to"], row["source"], row["reason"])


def previous_value(conn: Any, node_id: str, key: str, unless: str) -> tuple[bool, Any]:
    """(True, the latest value `key` had before, other than `unless`), or (False, None) when it had none. A key
    the person left empty (`status:`) had a value, None (review 23f: told from no key, it was taken out)."""
    for (raw,) in conn.execute(
        "select value from property_history where node_id = ? and key = ? and value is not null "
        "order by valid_to desc, id desc",
        (node_id, key),
    ):
        value = json.loads(raw)
        if not (isinstance(value, str) and value.strip().casefold() == unless):
            return True, value
    return False, None


def properties_as_of(conn: Any, node_id: str, current: Mapping[str, Any], as_of: str) -> dict[str, Any]:
    """The properties as they stood at the end of `as_of` (a date, or a date-time).

    For each key, the value that was replaced first after `as_of` is the one that held then; a key never
    replaced since holds its current value."""
    width = moment_width(as_of)
    rows = conn.execute(
        "select key, value, valid_from, valid_to, source, reason from property_history "
        f"where node_id = ? and substr(valid_to, 1, {width}) > ? order by valid_to, id",
        (node_id, as_of),
    ).fetchall()
    result = dict(current)
    decided: set[str] = set()
    for row in rows:
        if row["key"] in decided:
            continue
        decided.add(row["key"])
        past = _past(row)
        if past.value is None:
            result.pop(past.key, None)
        else:
            result[past.key] = past.value
    return result
