"""Forgetting in the graph (`engrama_forget`): archive a node without a note, or purge a node.

Synchronous functions on the raw connection, run inside the caller's transaction (see `GraphStore`).
Purging deletes the node row only; everything hanging off it goes by the foreign keys of m001-m004: its
keys, edges (both directions), passages (taken out of `chunks_fts` with their text first; their delete trigger
notes their vectors in `vec_orphans`), its `note_docs` row (whose trigger drops the `notes_fts` row) and its property
history. Pending insights that name the node are withdrawn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from server.store import history_sql, passages_sql
from server.store.sync_sql import node_key_set, reresolve_links, reresolve_node_links

ARCHIVED = "archived"


@dataclass(frozen=True)
class Purged:
    relations: int  # open edges from or to the node that went with it
    stubs: int  # placeholder nodes only this node linked to, removed with it
    insights: int  # pending insights that named it, withdrawn
    # Notes whose links name it still: it stays a name (a stub) through them.
    linked_from: tuple[str, ...] = ()


def archive_in_graph(conn: Any, node_id: str, now: str, reason: str) -> bool:
    """Archive the node in the graph alone: status and its `status` property say `archived`, and the
    previous value goes to property history. False when it was already archived (nothing changed)."""
    row = conn.execute("select status, properties from nodes where id = ?", (node_id,)).fetchone()
    if row is None or row["status"] == ARCHIVED:
        return False
    before = json.loads(row["properties"] or "{}")
    after = {**before, "status": ARCHIVED}
    conn.execute(
        "update nodes set status = ?, properties = ?, updated_at = ? where id = ?",
        (ARCHIVED, json.dumps(after, ensure_ascii=False, sort_keys=True, default=str), now, node_id),
    )
    history_sql.record_changes(conn, node_id, before, after, now, source="tool", reason=reason)
    reresolve_node_links(conn, node_id, now)  # a live note of its name now outranks it
    return True


def purge_node(conn: Any, node_id: str, drop_file: str | None, now: str) -> Purged:
    """Delete the node and all that hangs off it; also the sync state of `drop_file` (its note, moved to
    the trash) when given. Stubs left with no edge at all once it is gone are deleted too. The links that
    used its names are resolved again (another note of its name, or a stub, as a rebuild would give)."""
    names = node_key_set(conn, node_id)
    (relations,) = conn.execute(
        "select count(*) from edges where (source = ? or target = ?) and valid_to is null", (node_id, node_id)
    ).fetchone()
    linked_stubs = [
        row["id"]
        for row in conn.execute(
            "select distinct n.id from edges e join nodes n on n.id = e.target "
            "where e.source = ? and n.status = 'stub'",
            (node_id,),
        )
    ]
    linked_from = tuple(
        row["path"]
        for row in conn.execute(
            "select distinct n.path from edges e join nodes n on n.id = e.source "
            "where e.target = ? and e.source != ? and e.valid_to is null and n.path is not null order by n.path",
            (node_id, node_id),
        )
    )
    passages_sql.drop_passages(conn, node_id)  # out of the full-text index with their text (migration 9)
    conn.execute("delete from nodes where id = ?", (node_id,))
    stubs = 0
    for stub in linked_stubs:
        stubs += conn.execute(
            "delete from nodes where id = ? and not exists "
            "(select 1 from edges where source = ? or target = ?)",
            (stub, stub, stub),
        ).rowcount
    if drop_file is not None:
        conn.execute("delete from files where path = ?", (drop_file,))
    reresolve_links(conn, names, now)
    # A suggestion about something the person asked to forget is not shown again. Decided insights stay: their
    # record is in the vault, and the entities still there are resolved by id when they are read.
    insights = conn.execute(
        "delete from insights where status = 'pending' "
        "and exists (select 1 from json_each(insights.entities) e where e.value = ?)",
        (node_id,),
    ).rowcount
    return Purged(relations=relations, stubs=stubs, insights=insights, linked_from=linked_from)
