"""Reading nodes and their neighbourhoods (synchronous; run through `GraphStore`)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    name: str
    properties: dict[str, Any]
    path: str | None
    status: str
    confidence: float
    valid_from: str | None
    valid_to: str | None
    created_at: str
    updated_at: str


NODE_COLUMNS = (
    "id, label, name, properties, path, status, confidence, valid_from, valid_to, created_at, updated_at"
)


def moment_width(as_of: str) -> int:
    """How many characters of a stored timestamp to compare with `as_of`: a date (10) covers its whole day."""
    return 10 if len(as_of) == 10 else 20


def valid_on(alias: str, as_of: str) -> tuple[str, list[str]]:
    """SQL saying the node or edge `alias` held on `as_of`, and its parameters.

    A null `valid_from` is an unknown start: it held as far back as anyone can ask."""
    width = moment_width(as_of)
    return (
        f"({alias}.valid_from is null or substr({alias}.valid_from, 1, {width}) <= ?) "
        f"and ({alias}.valid_to is null or substr({alias}.valid_to, 1, {width}) >= ?)",
        [as_of, as_of],
    )


def row_to_node(row: Any) -> Node:
    return Node(
        id=row["id"],
        label=row["label"],
        name=row["name"],
        properties=json.loads(row["properties"] or "{}"),
        path=row["path"],
        status=row["status"],
        confidence=row["confidence"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def get_node(conn: Any, node_id: str) -> Node | None:
    row = conn.execute(f"select {NODE_COLUMNS} from nodes where id = ?", (node_id,)).fetchone()
    return None if row is None else row_to_node(row)


def find_nodes(conn: Any, name: str, label: str | None = None, include_archived: bool = False) -> list[Node]:
    """Nodes called `name` (case-insensitive; aliases count), best match first: live, exact name, label."""
    statuses = ("active", "stub", "archived") if include_archived else ("active", "stub")
    rows = conn.execute(
        f"""
        select {", ".join("n." + c.strip() for c in NODE_COLUMNS.split(","))},
               min(case k.kind when 'name' then 0 when 'stem' then 1 when 'path' then 2 else 3 end) as rank
        from node_keys k cross join nodes n on n.id = k.node_id
        where k.key = ? and n.status in ({",".join("?" * len(statuses))})
          and (? is null or n.label = ?)
        group by n.id
        order by case n.status when 'active' then 0 when 'stub' then 1 else 2 end, rank, n.created_at
        """,
        (name.strip().casefold(), *statuses, label, label),
    ).fetchall()
    return [row_to_node(r) for r in rows]


def merge_entity(conn: Any, label: str, name: str, properties: dict[str, Any], now: str) -> tuple[str, bool]:
    """MERGE by label + name (case-insensitive): update the live node if there is one, else create it.

    A stub of the same name is promoted instead of creating a second node. Returns (id, created)."""
    row = conn.execute(
        "select id, properties, status from nodes where name = ? collate nocase and status != 'archived' "
        "and (label = ? or status = 'stub') order by status = 'stub', created_at limit 1",
        (name.strip(), label),
    ).fetchone()
    if row is None:
        node_id = str(uuid.uuid4())
        conn.execute(
            "insert into nodes (id, label, name, properties, status, created_at, updated_at) "
            "values (?, ?, ?, ?, 'active', ?, ?)",
            (node_id, label, name.strip(), json.dumps(properties, sort_keys=True, default=str), now, now),
        )
        conn.execute(
            "insert or ignore into node_keys (key, node_id, kind) values (?, ?, 'name')",
            (name.strip().casefold(), node_id),
        )
        return node_id, True
    merged = {**json.loads(row["properties"] or "{}"), **properties}
    conn.execute(
        "update nodes set label = ?, properties = ?, status = 'active', updated_at = ?, confidence = 1.0, "
        "base_confidence = null, decayed_at = null where id = ?",
        (label, json.dumps(merged, sort_keys=True, default=str), now, row["id"]),
    )
    return row["id"], row["status"] == "stub"


def counts(conn: Any) -> dict[str, int]:
    """Node counts by status, open edge count, note files known, passages waiting for an embedding."""
    result = {
        f"nodes_{r[0]}": r[1] for r in conn.execute("select status, count(*) from nodes group by status")
    }
    result["edges"] = conn.execute("select count(*) from edges where valid_to is null").fetchone()[0]
    result["files"] = conn.execute("select count(*) from files").fetchone()[0]
    result["chunks_unembedded"] = conn.execute(
        "select count(*) from chunks where embedded_model is null"
    ).fetchone()[0]
    return result


def get_meta(conn: Any, key: str) -> str | None:
    row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def set_meta(conn: Any, key: str, value: str) -> None:
    conn.execute(
        "insert into meta (key, value) values (?, ?) on conflict(key) do update set value = excluded.value",
        (key, value),
    )
