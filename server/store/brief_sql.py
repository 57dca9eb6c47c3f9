"""The reads of the session brief, its per-client marks and the open clarifications (synchronous; via GraphStore).

A brief reports what changed since the same client's previous brief (m008). Two cursors make that exact, both
numbers given in commit order whatever the clock says: fact changes by `property_history` id, and node changes
by `node_changes.seq` (m016: each node's last change; by `updated_at` before it, and a clock put right then
hid the changes made meanwhile: review 21d), minus the node versions the previous brief already covered
(`brief_seen`). Whether a node is new, and a client's first brief, still go by time: when the graph met it,
and the last days by the person's clock.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Mark:
    """Where a client's brief left off: the next brief of that client starts here."""

    client: str
    briefed_at: str
    history_id: int
    seen: tuple[tuple[str, str], ...]  # (node id, fingerprint) of versions covered at or after `briefed_at`
    change_seq: int = 0  # the last node change (`node_changes.seq`) the brief saw: the next starts after it


@dataclass(frozen=True)
class Entry:
    """A node as the brief names it; `active_at` is the person's last touch (file mtime, else updated_at)."""

    id: str
    label: str
    name: str
    path: str | None
    status: str
    state: str  # the `status` property ("open", "resolved" ...), "" when none
    created_at: str
    updated_at: str
    active_at: str
    valid_from: str | None = None
    covered: bool = False  # the client's previous brief covered a version of it (`brief_seen`): not new now
    deleted: bool = False  # its note was deleted from the vault (no file at its path): `path` is None then


@dataclass(frozen=True)
class FactChange:
    history_id: int
    node: Entry
    key: str
    old: Any  # None: the key was not set
    new: Any  # None: the key is gone
    source: str
    reason: str


@dataclass(frozen=True)
class OpenClarification:
    node: Entry
    key: str
    current: Any
    proposed: Any
    question: str
    asked_at: str


# When the person last changed a note's file: its modification time, unless engrama's id line moved that
# (`files.touched_ns` keeps the time from before).
TOUCHED = "coalesce(f.touched_ns, f.mtime_ns)"
_ENTRY = (
    "n.id, n.label, n.name, n.path, n.status, n.created_at, n.updated_at, n.valid_from, "
    f"coalesce(json_extract(n.properties, '$.status'), '') as state, {TOUCHED} as mtime_ns, "
    "f.path is not null as on_disk"
)
_FROM = "nodes n left join files f on f.path = n.path"
# A node's version as a brief covers it: its status, note checksum, properties and path (a rename changes no
# byte), not its `updated_at`, so two changes within one second differ, and a note read again unchanged (a
# follower's catch-up re-reads a known note whose id line was removed until the lease holder writes it back)
# is not news a second time inside the margin.
# What a brief records of each version it covered. The node's change number counts every change the person
# made: while a note is still owed its id line its checksum is a placeholder, and an edit then (the body
# pasted into a new note) looked like the version already covered, in no brief ever (review 22h).
_FINGERPRINT = (
    "n.status || ' ' || coalesce(n.checksum, '') || ' ' || length(n.properties) || ' ' || coalesce(n.path, '') "
    "|| ' ' || coalesce((select c.seq from node_changes c where c.node_id = n.id), '')"
)


def quietly(conn: Any, node_id: str, column: str, value: Any) -> None:
    """Set one column of a node where nothing the person wrote changed (`checksum`: the id line a note was owed
    was written; `properties`: the same bytes read again by a version that keeps more of them): no stamp, no
    change number, and the versions of it a brief covered stay covered, so it is no news a second time."""
    assert column in ("checksum", "properties")
    (before,) = conn.execute(f"select {_FINGERPRINT} from nodes n where n.id = ?", (node_id,)).fetchone()
    conn.execute(f"update nodes set {column} = ? where id = ?", (value, node_id))
    conn.execute(
        f"update brief_seen set fingerprint = (select {_FINGERPRINT} from nodes n where n.id = ?) "
        "where node_id = ? and fingerprint = ?",
        (node_id, node_id, before),
    )


def _iso_ns(mtime_ns: int | None) -> str | None:
    if not mtime_ns:
        return None
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(row: Any) -> Entry:
    state = row["state"]
    # A note deleted from the vault keeps its path in the graph (archived): it is named, never linked, since a
    # link to it would make Obsidian create an empty note of that name (review 21d).
    deleted = row["path"] is not None and not row["on_disk"]
    return Entry(
        id=row["id"],
        label=row["label"],
        name=row["name"],
        path=None if deleted else row["path"],
        deleted=deleted,
        status=row["status"],
        state=state if isinstance(state, str) else json.dumps(state),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        active_at=_iso_ns(row["mtime_ns"]) or row["updated_at"],
        valid_from=row["valid_from"],
    )


# --- marks ---------------------------------------------------------------------------------------------------


def get_mark(conn: Any, client: str) -> Mark | None:
    row = conn.execute(
        "select briefed_at, history_id, change_seq from brief_marks where client = ?", (client,)
    ).fetchone()
    if row is None:
        return None
    seen = conn.execute("select node_id, fingerprint from brief_seen where client = ?", (client,)).fetchall()
    return Mark(
        client, row["briefed_at"], row["history_id"], tuple((r[0], r[1]) for r in seen), row["change_seq"]
    )


def next_mark(conn: Any, client: str, briefed_at: str) -> Mark:
    """The mark a brief read now leaves: the last fact change it saw and the node changes since `briefed_at`."""
    (history_id,) = conn.execute("select coalesce(max(id), 0) from property_history").fetchone()
    (change_seq,) = conn.execute("select coalesce(max(seq), 0) from node_changes").fetchone()
    seen = conn.execute(
        f"select n.id, {_FINGERPRINT} from nodes n where n.updated_at >= ? and n.status != 'stub'",
        (briefed_at,),
    ).fetchall()
    return Mark(client, briefed_at, history_id, tuple((r[0], r[1]) for r in seen), change_seq)


def set_mark(conn: Any, mark: Mark) -> None:
    """Record `mark` as the client's (in the caller's transaction); a mark never moves backwards."""
    row = conn.execute(
        "select history_id, change_seq from brief_marks where client = ?", (mark.client,)
    ).fetchone()
    if row is not None and (row["history_id"] > mark.history_id or row["change_seq"] > mark.change_seq):
        return  # a later brief of the same client was recorded first
    conn.execute(
        "insert into brief_marks (client, briefed_at, history_id, change_seq) values (?, ?, ?, ?) "
        "on conflict(client) do update set briefed_at = excluded.briefed_at, history_id = excluded.history_id, "
        "change_seq = excluded.change_seq",
        (mark.client, mark.briefed_at, mark.history_id, mark.change_seq),
    )
    conn.execute("delete from brief_seen where client = ?", (mark.client,))
    conn.executemany(
        "insert or replace into brief_seen (client, node_id, fingerprint) values (?, ?, ?)",
        [(mark.client, node_id, at) for node_id, at in mark.seen],
    )


# --- what changed --------------------------------------------------------------------------------------------

_CHANGED = f"""
    from {_FROM}
    where n.updated_at >= ? and n.status != 'stub'
      and not exists (select 1 from brief_seen s
                      where s.client = ? and s.node_id = n.id and s.fingerprint = {_FINGERPRINT})
"""
# Since the previous brief of the client: the node changes numbered after the last it saw (`node_changes`,
# numbered in commit order whatever the clock says: review 21d), less the versions it covered.
_CHANGED_AFTER = f"""
    from {_FROM} join node_changes c on c.node_id = n.id
    where c.seq > ? and n.status != 'stub'
      and not exists (select 1 from brief_seen s
                      where s.client = ? and s.node_id = n.id and s.fingerprint = {_FINGERPRINT})
"""
# A first brief covers the last days by the person's clock, not the graph's: the graph may have met every note
# of the vault a minute ago (a first sync), and then every one looked new. A note counts when the person
# changed its file in the window (or it was archived then); an entity without a note, by when it changed.
_FIRST = f"""
      and (n.path is null or n.status = 'archived' or {TOUCHED} >= ?)
"""
# New: a node the graph met since the previous brief. A first brief cannot tell a note made in its window from
# one edited there (the graph met both at its first sync, and a file's creation time is not kept everywhere):
# it calls notes changed, and new only the entities made in the graph alone in the window.
_NEW = (
    "n.status != 'archived' and n.created_at >= ? "
    "and not exists (select 1 from brief_seen b where b.client = ? and b.node_id = n.id)"
)
_NEW_FIRST = "n.status != 'archived' and n.path is null and n.created_at >= ?"


def changed_nodes(
    conn: Any,
    since: str,
    client: str | None,
    limit: int,
    *,
    first: bool = False,
    after_seq: int | None = None,
) -> tuple[list[Entry], dict[str, int]]:
    """Notes and entities created, edited or archived since `client`'s last brief that it did not cover, the
    latest first; and how many of each kind there are in all. With `after_seq` (the last node change that
    brief saw) they are the changes numbered after it; else those stamped since `since`. `first`: a client's
    first brief, which counts a note's change by when the person changed its file (`_FIRST`). A node is new
    when the graph met it at or after `since`."""
    if after_seq is not None and not first:
        where, params = _CHANGED_AFTER, (after_seq, client)
        order = f"c.seq desc, {TOUCHED} desc"
    else:
        where = _CHANGED + (_FIRST if first else "")
        params = (since, client, *((_ns(since),) if first else ()))
        order = f"{TOUCHED} desc, n.updated_at desc" if first else f"n.updated_at desc, {TOUCHED} desc"
    rows = conn.execute(
        f"select {_ENTRY} {where} order by {order}, n.name limit ?", (*params, limit)
    ).fetchall()
    counts = conn.execute(
        "select count(*) as total, coalesce(sum(n.status = 'archived'), 0) as archived, "
        f"coalesce(sum({_NEW_FIRST if first else _NEW}), 0) as created {where}",
        (since, *(() if first else (client,)), *params),
    ).fetchone()
    entries = [_entry(r) for r in rows]
    if client is not None and not first:
        covered = {r[0] for r in conn.execute("select node_id from brief_seen where client = ?", (client,))}
        entries = [replace(e, covered=True) if e.id in covered else e for e in entries]
    return entries, {k: counts[k] for k in ("total", "created", "archived")}


def is_new(entry: Entry, since: str, *, first: bool) -> bool:
    """Whether `entry` is new in the window starting at `since` (see `_NEW`, `_NEW_FIRST`)."""
    if entry.status == "archived" or entry.covered or (first and entry.path is not None):
        return False
    return entry.created_at >= since


def _ns(stamp: str) -> int:
    """A stored timestamp (`2026-11-27T05:00:00Z`) as nanoseconds since the epoch, as file times are kept."""
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()) * 1_000_000_000


def fact_changes(conn: Any, after_id: int, since: str | None, limit: int) -> list[FactChange]:
    """Property changes recorded after history row `after_id` (and, when `since` is given, since then), the
    latest first, one per node and key: from the value before the first of them to the value now."""
    rows = conn.execute(
        f"select h.id as hid, h.key, h.value, h.source, h.reason, n.properties, {_ENTRY} "
        "from property_history h join nodes n on n.id = h.node_id left join files f on f.path = n.path "
        "where h.id > ? and (? is null or h.valid_to >= ?) and n.status != 'stub' "
        "order by h.id desc limit ?",
        (after_id, since, since, limit),
    ).fetchall()
    earliest: dict[tuple[str, str], Any] = {}
    for row in rows:  # newest first: the last row seen per key is the first change in the window
        earliest[(row["id"], row["key"])] = row
    changes = []
    for (_, key), row in earliest.items():
        old = None if row["value"] is None else json.loads(row["value"])
        new = json.loads(row["properties"] or "{}").get(key)
        if json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
            changes.append(FactChange(row["hid"], _entry(row), key, old, new, row["source"], row["reason"]))
    return sorted(changes, key=lambda c: -c.history_id)


# --- active work ---------------------------------------------------------------------------------------------


def live_of_labels(conn: Any, labels: Sequence[str], limit: int) -> list[Entry]:
    """Live entities with these labels, the most recently touched first."""
    if not labels:
        return []
    rows = conn.execute(
        f"select {_ENTRY} from {_FROM} where n.status = 'active' and n.label in ({','.join('?' * len(labels))}) "
        f"order by coalesce({TOUCHED}, unixepoch(n.updated_at) * 1000000000) desc, n.name limit ?",
        (*labels, limit),
    ).fetchall()
    return [_entry(r) for r in rows]


def linked(conn: Any, anchors: Sequence[str], labels: Sequence[str]) -> list[tuple[str, Entry]]:
    """(anchor id, entity) for every live entity with one of `labels` joined to an anchor by an open edge
    in either direction (any relation type: a typed relation or a wikilink)."""
    if not anchors or not labels:
        return []
    ids, kinds = ",".join("?" * len(anchors)), ",".join("?" * len(labels))
    found: list[tuple[str, Entry]] = []
    for near, far in (("source", "target"), ("target", "source")):
        rows = conn.execute(
            # CROSS JOIN keeps the edges of the few anchors as the outer loop (else SQLite may scan every live
            # node of those labels: 50-150 ms instead of ~1 ms on 10,000 notes).
            f"select distinct e.{near} as anchor, {_ENTRY} from edges e cross join nodes n on n.id = e.{far} "
            "left join files f on f.path = n.path "
            f"where e.valid_to is null and e.{near} in ({ids}) and n.label in ({kinds}) and +n.status = 'active'",
            (*anchors, *labels),
        ).fetchall()
        found += [(r["anchor"], _entry(r)) for r in rows]
    return found


def entries(conn: Any, ids: Sequence[str]) -> dict[str, Entry]:
    if not ids:
        return {}
    rows = conn.execute(f"select {_ENTRY} from {_FROM} where n.id in ({','.join('?' * len(ids))})", ids)
    return {r["id"]: _entry(r) for r in rows.fetchall()}


def live_counts(conn: Any) -> tuple[int, int]:
    """(notes, entities): live nodes with a note, and all live nodes (graph-only entities too)."""
    row = conn.execute(
        "select coalesce(sum(path is not null), 0), count(*) from nodes where status = 'active'"
    ).fetchone()
    return row[0], row[1]


def ambiguous_stems(conn: Any, stems: Sequence[str]) -> set[str]:
    """The casefolded file stems among `stems` that more than one note in the vault has (a `[[stem]]` link
    would be ambiguous in Obsidian)."""
    if not stems:
        return set()
    rows = conn.execute(
        "select k.key from node_keys k join nodes n on n.id = k.node_id "
        f"where k.kind = 'stem' and k.key in ({','.join('?' * len(stems))}) "
        "and exists (select 1 from files f where f.path = n.path) group by k.key having count(*) > 1",
        list(stems),
    ).fetchall()
    return {r[0] for r in rows}


# --- clarifications ------------------------------------------------------------------------------------------


def record_clarifications(
    conn: Any, node_id: str, asked: Sequence[tuple[str, Any, Any, str]], settled: Sequence[str], now: str
) -> None:
    """Keep the questions engrama_remember asked about `node_id` (key, current, proposed, question), and close
    those about `settled` keys (a later remember of the key decided it)."""
    conn.executemany(
        "delete from clarifications where node_id = ? and key = ?", [(node_id, key) for key in settled]
    )
    conn.executemany(
        "insert or replace into clarifications (node_id, key, current, proposed, question, asked_at) "
        "values (?, ?, ?, ?, ?, ?)",
        [
            (node_id, key, json.dumps(cur, default=str), json.dumps(new, default=str), question, now)
            for key, cur, new, question in asked
        ],
    )


def open_clarifications(conn: Any, limit: int) -> list[OpenClarification]:
    """Questions still waiting for the person, the latest first. One whose property has changed since it
    was asked (the person edited the note, or a later write settled it) is no longer open."""
    rows = conn.execute(
        f"select c.key, c.current, c.proposed, c.question, c.asked_at, n.properties, {_ENTRY} "
        "from clarifications c join nodes n on n.id = c.node_id left join files f on f.path = n.path "
        "where n.status = 'active' "
        "order by c.asked_at desc limit ?",
        (limit * 4,),
    ).fetchall()
    found = []
    for row in rows:
        current = json.loads(row["current"])
        now = json.loads(row["properties"] or "{}").get(row["key"])
        if json.dumps(now, default=str) == json.dumps(current, default=str):
            proposed = json.loads(row["proposed"])
            found.append(
                OpenClarification(
                    _entry(row), row["key"], current, proposed, row["question"], row["asked_at"]
                )
            )
    return found[:limit]
