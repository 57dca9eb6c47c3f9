"""Re-keying a node: the note at a known path now carries another `engrama_id` (synchronous; via `GraphStore`).

This happens when a vault is synced between devices: each device's engrama-vault may give a new note an id
before the sync tool has carried the other's over, and the sync tool then settles on one of them. The device
whose id lost sees its note's id change. The entity is the same one, so its node keeps everything it has
(properties, history, relations both ways, passages and their vectors, insight links) under the new id,
instead of being archived while a new node starts from nothing.

Every table that points at `nodes(id)` through a foreign key is found from the schema, so a table added by a
later migration is carried over too. Insight keys stay as they are: a key is the identity of an insight the
person may already have decided, and notes quote it.
"""

from __future__ import annotations

import json
from typing import Any


def rekey_node(conn: Any, old: str, new: str, now: str) -> bool:
    """Give node `old` the id `new`, keeping every row that refers to it. False when nothing was re-keyed
    (`old` does not exist, or `new` is already taken)."""
    row = conn.execute("select path from nodes where id = ?", (old,)).fetchone()
    if row is None or old == new or conn.execute("select 1 from nodes where id = ?", (new,)).fetchone():
        return False
    columns = [r["name"] for r in conn.execute("pragma table_info(nodes)") if r["name"] != "id"]
    listed = ", ".join(columns)
    conn.execute("update nodes set path = null where id = ?", (old,))  # the path index is unique
    conn.execute(f"insert into nodes (id, {listed}) select ?, {listed} from nodes where id = ?", (new, old))
    conn.execute("update nodes set path = ?, updated_at = ? where id = ?", (row["path"], now, new))
    for table, column in _references(conn):
        conn.execute(f'update "{table}" set "{column}" = ? where "{column}" = ?', (new, old))
    conn.execute("update files set node_id = ? where node_id = ?", (new, old))
    conn.execute("update note_links set target = ? where target = ?", (new, old))
    _rekey_insight_entities(conn, old, new)
    conn.execute("delete from nodes where id = ?", (old,))
    return True


def _references(conn: Any) -> list[tuple[str, str]]:
    """(table, column) for every foreign key that points at `nodes(id)`."""
    tables = [
        r["name"]
        for r in conn.execute("select name from sqlite_master where type = 'table' and sql is not null")
    ]
    found: list[tuple[str, str]] = []
    for table in tables:
        for fk in conn.execute(f'pragma foreign_key_list("{table}")'):
            if fk["table"] == "nodes" and fk["to"] in (None, "id"):
                found.append((table, fk["from"]))
    return found


def _rekey_insight_entities(conn: Any, old: str, new: str) -> None:
    rows = conn.execute(
        "select key, entities from insights where entities like ?", (f'%"{old}"%',)
    ).fetchall()
    for r in rows:
        entities = [new if e == old else e for e in json.loads(r["entities"])]
        conn.execute("update insights set entities = ? where key = ?", (json.dumps(entities), r["key"]))
