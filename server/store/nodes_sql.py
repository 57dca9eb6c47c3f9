"""Reading nodes and their neighbourhoods (synchronous; run through `GraphStore`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import PurePosixPath
from typing import Any

from server.search.when import title_date
from vault_sync.began import earliest, frontmatter_began, id_began, lenient_moment
from vault_sync.identify import new_engrama_id
from vault_sync.model import ParsedNote
from vault_sync.names import canonical, fold, visible


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


# A node called `name`: its name equal but for ASCII case (the index `nodes_name`), or any case and Unicode form
# by its name key (`vault_sync.names.fold`: "ÉCOLE" is "école", as in Obsidian's links). Parameters: `same_name`.
SAME_NAME = "(n.name = ? collate nocase or n.id in (select k.node_id from node_keys k where k.key = ? and k.kind = 'name'))"


def same_name(name: str) -> tuple[str, str]:
    """The parameters of `SAME_NAME` for `name`: as names are stored, and its key."""
    return canonical(name), fold(name)


def moment_width(as_of: str) -> int:
    """How many characters of a stored timestamp to compare with `as_of`: a date (10) covers its whole day."""
    return 10 if len(as_of) == 10 else 20


def valid_on(alias: str, as_of: str) -> tuple[str, list[str]]:
    """SQL saying the node `alias` held on `as_of`, and its parameters.

    A node's `valid_from` is when its note began (`note_start`), so `as_of` answers with what was known on
    that day. Only a stub (a name some note links to, with no note of its own) has none: it held as far back
    as the links to it, which `edge_valid_on` dates."""
    width = moment_width(as_of)
    return (
        f"({alias}.valid_from is null or substr({alias}.valid_from, 1, {width}) <= ?) "
        f"and ({alias}.valid_to is null or substr({alias}.valid_to, 1, {width}) >= ?)",
        [as_of, as_of],
    )


def edge_valid_on(alias: str, as_of: str) -> tuple[str, list[str]]:
    """SQL saying the edge `alias` held on `as_of`, and its parameters.

    An edge the note already had when the graph first read it (opened no later than its source node was
    created) starts with the note, at the node's `valid_from`; an edge added later starts when it was added."""
    width = moment_width(as_of)
    start = (
        f"(select case when {alias}.valid_from <= s.created_at then s.valid_from else {alias}.valid_from end "
        f"from nodes s where s.id = {alias}.source)"
    )
    return (
        f"({alias}.valid_to is null or substr({alias}.valid_to, 1, {width}) >= ?) "
        f"and coalesce(substr({start}, 1, {width}) <= ?, 1)",
        [as_of, as_of],
    )


def note_start(note: ParsedNote, node_id: str, previous: str | None, now: str) -> tuple[str, str]:
    """(valid_from, began_at) for the node of `note`: when it began, by the best evidence there is.

    `began_at` is what the file and the graph vouch for: the earliest of the file's creation and
    modification times seen so far (`note.file_began`), the time stamped in an id engrama minted
    (`began.id_began`), and when the graph first saw the note (`previous`, the stored `began_at`; `now` for a
    new node). It only ever moves earlier, so an edit never makes a note younger. `valid_from` is the note's
    own `valid_from:` when it has one; else its `date:` / `created:` date, unless the file shows the note
    existed before that day (a note dated ahead, e.g. a planned meeting, was still known since it was written);
    else `began_at`. Deleting the database and syncing again gives the same answer: the note and its id are
    in the vault, and the id carries the file's evidence from before engrama wrote the id line. Only a note
    whose id engrama did not stamp (ids from before UUIDv7, or written by hand) can start later after a
    rebuild: at its file's times as they are then."""
    began_at = earliest(previous or now, note.file_began, id_began(node_id)) or now
    if note.valid_from:
        return note.valid_from, began_at
    return earliest(note.began, began_at) or began_at, began_at


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
    """Nodes called `name` (case-insensitive; aliases count), best match first: live, exact name, label. A name
    holding characters that show as nothing (`visible`) that reaches none is looked up without them (review
    23h: "Atlas" with a zero-width space made a second entity beside Atlas); a note whose own name holds them
    is still reached by it."""
    found = _find_nodes(conn, name, label, include_archived)
    if not found and visible(name) != name:
        found = _find_nodes(conn, visible(name), label, include_archived)
    return found


def _find_nodes(conn: Any, name: str, label: str | None, include_archived: bool) -> list[Node]:
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
        (fold(name), *statuses, label, label),
    ).fetchall()
    return [row_to_node(r) for r in rows]


def had_note(conn: Any, node_id: str) -> bool:
    """Whether a note ever stood for the node: a sync recorded its bytes (a node made by a tool in the graph
    only, or a stub, has none). Its id may then come back with that note's file (from the trash, a backup)."""
    row = conn.execute("select checksum from nodes where id = ?", (node_id,)).fetchone()
    return row is not None and row[0] is not None


def merge_entity(conn: Any, label: str, name: str, properties: dict[str, Any], now: str) -> tuple[str, bool]:
    """MERGE by label + name (case-insensitive): update the live node if there is one, else create it.

    A stub of the same name is promoted instead of creating a second node. Returns (id, created)."""
    row = conn.execute(
        f"select id, properties, status from nodes n where {SAME_NAME} and status != 'archived' "
        "and (label = ? or status = 'stub') order by status = 'stub', created_at limit 1",
        (*same_name(name), label),
    ).fetchone()
    if row is None:
        node_id = new_engrama_id()
        # A tool's entity begins now; when its note is written and read, `note_start` takes over.
        payload = json.dumps(properties, sort_keys=True, default=str)
        conn.execute(
            "insert into nodes (id, label, name, properties, status, created_at, updated_at, valid_from, "
            "began_at) values (?, ?, ?, ?, 'active', ?, ?, ?, ?)",
            (node_id, label, name.strip(), payload, now, now, now, now),
        )
        conn.execute(
            "insert or ignore into node_keys (key, node_id, kind) values (?, ?, 'name')",
            (fold(name), node_id),
        )
        refresh_note_days(conn, [node_id])
        return node_id, True
    merged = {**json.loads(row["properties"] or "{}"), **properties}
    conn.execute(
        "update nodes set label = ?, properties = ?, status = 'active', updated_at = ?, confidence = 1.0, "
        "base_confidence = null, decayed_at = null, valid_from = coalesce(valid_from, ?), "
        "began_at = coalesce(began_at, ?) where id = ?",
        (label, json.dumps(merged, sort_keys=True, default=str), now, now, now, row["id"]),
    )
    refresh_note_days(conn, [row["id"]])
    return row["id"], row["status"] == "stub"


def note_dates(conn: Any, node_ids: Sequence[str]) -> dict[str, date]:
    """The date each note is about (`note_day`), as stored with its node; ids without one are left out."""
    found: dict[str, date] = {}
    ids = list(dict.fromkeys(node_ids))
    for at in range(0, len(ids), 500):  # under SQLite's limit on bound parameters
        part = ids[at : at + 500]
        rows = conn.execute(
            f"select id, note_day from nodes where id in ({','.join('?' * len(part))}) and note_day is not null",
            part,
        ).fetchall()
        found.update((row["id"], date.fromisoformat(row["note_day"])) for row in rows)
    return found


def note_day(path: str | None, name: str | None, properties: str | None, began_at: str | None) -> str | None:
    """The ISO date a note is about, from its row's columns: what `nodes.note_day` holds (written with the node,
    read by `note_dates` and `dated_in`), by the best evidence the note carries:

    1. its frontmatter `date:` (read as `valid_from` reads dates: ISO, `May 1, 2020`, `[[2020-05-01]]`);
    2. a date in its file name (a daily note `2024-03-07.md`, `2024-03-07 Standup.md`) or folders
       (`2024/03/07.md`);
    3. a date in its title (`Session 3 — 1:56 pm on 8 May, 2023`, `Chat — 2023/05/30 (Tue) 23:42`);
    4. another start key of its frontmatter (`created:` ...): when it was written, not what it is about;
    5. `began_at`, the earliest time its file and the graph vouch for.
    Dates in names and titles are read by `server.search.when.title_date` (a year is required; a numeric
    date whose day and month could be swapped is not evidence)."""
    day = _note_date({"path": path, "name": name, "properties": properties, "began_at": began_at})
    return None if day is None else day.isoformat()


def refresh_note_days(conn: Any, node_ids: Sequence[str] | None = None) -> None:
    """Set `note_day` of `node_ids` (every node when None) from their rows as they are now."""
    where, params = "", list(node_ids or [])
    if node_ids is not None:
        if not node_ids:
            return
        where = f" where id in ({','.join('?' * len(params))})"
    rows = conn.execute(f"select id, path, name, properties, began_at from nodes{where}", params).fetchall()
    days = [(row["id"], _note_date(row)) for row in rows]
    conn.executemany(
        "update nodes set note_day = ?1 where id = ?2 and note_day is not ?1",
        [(None if day is None else day.isoformat(), node_id) for node_id, day in days],
    )


def dated_in(
    conn: Any, spans: Sequence[tuple[date, date]], where: tuple[str, Sequence[Any]], cap: int
) -> list[str]:
    """The notes dated inside any of `spans` (inclusive) that pass `where` (a clause over `nodes n` and its
    parameters: `NodeFilter.sql()`), when they are at most `cap`; else none: a window holding more notes than
    that does not single any out."""
    if not spans:
        return []
    inside = " or ".join("n.note_day between ? and ?" for _ in spans)
    clause, params = where
    rows = conn.execute(
        f"select n.id from nodes n where ({inside}) and {clause} order by n.note_day desc, n.id limit ?",
        [*(d.isoformat() for span in spans for d in span), *params, cap + 1],
    ).fetchall()
    return [] if len(rows) > cap else [r[0] for r in rows]


def _note_date(row: Any) -> date | None:
    try:
        properties = json.loads(row["properties"] or "{}")
    except json.JSONDecodeError:
        properties = {}
    properties = properties if isinstance(properties, dict) else {}
    keyed = {str(k).strip().casefold(): v for k, v in properties.items()}
    path = row["path"] or ""
    texts = [
        PurePosixPath(path).stem,
        path.removesuffix(".md"),
        row["name"] or "",
        str(keyed.get("title") or ""),
    ]
    for moment in (
        lenient_moment(keyed["date"]) if "date" in keyed else None,
        *(title_date(text) for text in texts if text),
        frontmatter_began(properties),
        row["began_at"],
    ):
        if isinstance(moment, date):
            return moment
        if moment:
            try:
                return date.fromisoformat(moment[:10])
            except ValueError:
                continue
    return None


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


def claim_meta(conn: Any, key: str, value: str) -> str:
    """Record `value` under `key` unless a value is recorded already; the value recorded (one statement: of two
    processes claiming at once, one wins and both read what it wrote)."""
    conn.execute("insert into meta (key, value) values (?, ?) on conflict(key) do nothing", (key, value))
    return str(conn.execute("select value from meta where key = ?", (key,)).fetchone()[0])


def set_meta(conn: Any, key: str, value: str) -> None:
    conn.execute(
        "insert into meta (key, value) values (?, ?) on conflict(key) do update set value = excluded.value",
        (key, value),
    )


def some_active_name(conn: Any) -> str | None:
    """The name of one live node (the start-up warm-up searches for it), or None in an empty graph."""
    row = conn.execute("select name from nodes where status = 'active' limit 1").fetchone()
    return None if row is None else row[0]
