"""All SQL of reflect and insights: the graph snapshot reflect reads, and the `insights` table.

Synchronous units of work on the raw connection, run through `GraphStore.read` / `GraphStore.write`.
Insight notes (label `Insight`) are left out of the snapshot so that reflect never feeds on its own output.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from vault_sync.model import NodeRef

INSIGHT_LABEL = "Insight"
PENDING, APPROVED, DISMISSED = "pending", "approved", "dismissed"

_INSIGHT_COLUMNS = (
    "key, id, pattern, title, body, confidence, entities, status, created_at, updated_at, decided_at, "
    "written_paths"
)


@dataclass(frozen=True)
class NodeRow:
    """One live node as reflect sees it; `changed` is its last-change evidence (see `snapshot_nodes`)."""

    id: str
    label: str
    name: str
    path: str | None
    status: str
    confidence: float
    state: str  # the `status` property (open, resolved, active ...), "" when none
    changed: str | None  # `updated`/`modified` property, else None
    mtime_ns: int | None  # the person's last change of the note file (files.touched_ns), None without a note
    updated_at: str


@dataclass(frozen=True)
class InsightRow:
    key: str
    id: str
    pattern: str
    title: str
    body: str
    confidence: float
    entities: tuple[str, ...]
    status: str
    created_at: str
    updated_at: str
    decided_at: str | None
    written_paths: tuple[str, ...]


@dataclass(frozen=True)
class Proposal:
    """An insight reflect wants pending (identity already computed)."""

    key: str
    id: str
    pattern: str
    title: str
    body: str
    confidence: float
    entities: tuple[str, ...]


@dataclass(frozen=True)
class SaveOutcome:
    """Keys of new pending insights, keys of pending ones refreshed in place, how many were withdrawn."""

    created: tuple[str, ...]
    kept: tuple[str, ...]
    withdrawn: int


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 0.0 <= number <= 1.0 else None


# --- the snapshot ----------------------------------------------------------------------------------------


def snapshot_nodes(conn: Any) -> list[NodeRow]:
    """Every live (active or stub) node except insight notes, with what reflect needs to judge it.

    A numeric `confidence` property in the note beats the column (the vault is the truth).
    """
    rows = conn.execute(
        """
        select n.id, n.label, n.name, n.path, n.status, n.confidence, n.updated_at,
               json_extract(n.properties, '$.status') as state,
               json_extract(n.properties, '$.confidence') as stated_confidence,
               coalesce(json_extract(n.properties, '$.updated'), json_extract(n.properties, '$.modified'))
                   as changed,
               coalesce(f.touched_ns, f.mtime_ns) as mtime_ns
        from nodes n left join files f on f.path = n.path
        where n.status != 'archived' and n.label != ?
        """,
        (INSIGHT_LABEL,),
    )
    return [_node_row(r) for r in rows]


def _node_row(r: Any) -> NodeRow:
    stated = _number(r["stated_confidence"])
    return NodeRow(
        *(r["id"], r["label"], r["name"], r["path"], r["status"]),
        confidence=stated if stated is not None else float(r["confidence"]),
        state=str(r["state"] or "").strip().lower(),
        changed=str(r["changed"]) if r["changed"] is not None else None,
        mtime_ns=r["mtime_ns"],
        updated_at=r["updated_at"],
    )


def snapshot_edges(conn: Any) -> list[tuple[str, str, str, str]]:
    """(source, type, target, origin) of every open edge between live nodes that are not insight notes."""
    rows = conn.execute(
        """
        select e.source, e.type, e.target, e.origin from edges e
        join nodes s on s.id = e.source join nodes t on t.id = e.target
        where e.valid_to is null and e.source != e.target
          and s.status != 'archived' and t.status != 'archived' and s.label != ? and t.label != ?
        """,
        (INSIGHT_LABEL, INSIGHT_LABEL),
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def snapshot(conn: Any) -> tuple[list[NodeRow], list[tuple[str, str, str, str]]]:
    """Nodes and edges in one read (one WAL snapshot, so they agree with each other)."""
    conn.execute("begin")
    try:
        return snapshot_nodes(conn), snapshot_edges(conn)
    finally:
        conn.execute("commit")


# --- the insights table ----------------------------------------------------------------------------------


def _row(r: Any) -> InsightRow:
    lists = {name: tuple(json.loads(r[name] or "[]")) for name in ("entities", "written_paths")}
    return InsightRow(
        **{**dict(zip(r.keys(), r, strict=True)), **lists, "confidence": float(r["confidence"])}
    )


def _rows_in(conn: Any, sql: str, ids: Sequence[str]) -> list[Any]:
    """Run `sql` (`{marks}` stands for the id list) over `ids` in slices under SQLite's parameter limit."""
    rows: list[Any] = []
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        rows += conn.execute(sql.format(marks=",".join("?" * len(chunk))), chunk).fetchall()
    return rows


def _insights(conn: Any, where: str, params: Sequence[Any] = ()) -> list[InsightRow]:
    return [_row(r) for r in conn.execute(f"select {_INSIGHT_COLUMNS} from insights where {where}", params)]


def get_insight(conn: Any, insight_id: str) -> InsightRow | None:
    found = _insights(conn, "id = ?", (insight_id,))
    return found[0] if found else None


def insights_by_keys(conn: Any, keys: Sequence[str]) -> list[InsightRow]:
    sql = f"select {_INSIGHT_COLUMNS} from insights where key in ({{marks}})"
    return [_row(r) for r in _rows_in(conn, sql, keys)]


# An insight stands while every entity it is about does: a pending insight naming a note the person deleted
# (archived) is not offered, and the next reflect withdraws it (`withdraw_fallen`), whichever patterns it runs.
STANDING = (
    "not exists (select 1 from json_each(insights.entities) e left join nodes n on n.id = e.value "
    "where n.id is null or n.status = 'archived')"
)


def pending_insights(conn: Any) -> list[InsightRow]:
    """Every pending insight that still stands, most confident first."""
    return _insights(
        conn, f"status = ? and {STANDING} order by confidence desc, updated_at desc, key", (PENDING,)
    )


def standing(conn: Any, insight_id: str) -> bool:
    """Whether every entity of the insight is still there (not archived, not gone)."""
    return (
        conn.execute(f"select 1 from insights where id = ? and {STANDING}", (insight_id,)).fetchone()
        is not None
    )


def withdraw_fallen(conn: Any) -> set[str]:
    """Delete the pending insights about an entity that is archived or gone; returns their keys."""
    return {
        r[0]
        for r in conn.execute(
            f"delete from insights where status = ? and not {STANDING} returning key", (PENDING,)
        )
    }


def pending_about(conn: Any, node_ids: Sequence[str], limit: int) -> list[InsightRow]:
    """Pending insights naming any of `node_ids`, most confident first."""
    ids = list(dict.fromkeys(node_ids))[:500]
    if not ids:
        return []
    named = (
        f"exists (select 1 from json_each(insights.entities) e where e.value in ({','.join('?' * len(ids))}))"
    )
    order = "order by confidence desc, updated_at desc, key limit ?"
    return _insights(conn, f"status = ? and {named} and {STANDING} {order}", (PENDING, *ids, limit))


def statuses(conn: Any) -> dict[str, str]:
    """key -> status of every insight."""
    return {r["key"]: r["status"] for r in conn.execute("select key, status from insights")}


def save_proposals(
    conn: Any, ran: Sequence[str], proposals: Sequence[Proposal], found: Iterable[str], now: str
) -> SaveOutcome:
    """Make `proposals` the pending insights of the patterns in `ran`.

    New keys are inserted pending; pending ones proposed again get the new title, body, confidence and
    entities; approved and dismissed ones are never touched. Pending insights of a pattern that ran and no
    longer found them (`found` holds every key the patterns found, also those beyond the per-run cap) are
    withdrawn: the person never decided on them, and their evidence is gone.
    """
    existing = {r["key"]: r for r in conn.execute(f"select {_INSIGHT_COLUMNS} from insights")}
    created, kept = [], []
    for p in proposals:
        old = existing.get(p.key)
        entities = json.dumps(list(p.entities))
        if old is None and (carried := _carried(conn, p.key)):
            # Approved and written into these notes, its own note deleted by the person (the graph rebuilt since):
            # the sections are its record in the vault; approved, and not recorded again (review 21b).
            conn.execute(
                f"insert into insights ({_INSIGHT_COLUMNS}, recorded_at) "
                "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    p.key,
                    p.id,
                    p.pattern,
                    p.title,
                    p.body,
                    p.confidence,
                    entities,
                    APPROVED,
                    now,
                    now,
                    now,
                    json.dumps(carried),
                    now,
                ),
            )
        elif old is None:
            conn.execute(
                f"insert into insights ({_INSIGHT_COLUMNS}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, null, '[]')",
                (p.key, p.id, p.pattern, p.title, p.body, p.confidence, entities, PENDING, now, now),
            )
            created.append(p.key)
        elif old["status"] == PENDING:
            fresh = (p.title, p.body, p.confidence, entities)
            if (old["title"], old["body"], old["confidence"], old["entities"]) != fresh:
                conn.execute(
                    "update insights set title = ?, body = ?, confidence = ?, entities = ?, updated_at = ? "
                    "where key = ?",
                    (*fresh, now, p.key),
                )
            kept.append(p.key)
    wanted = set(found) | {p.key for p in proposals}
    stale = [
        (key,)
        for key, r in existing.items()
        if r["status"] == PENDING and r["pattern"] in ran and key not in wanted
    ]
    conn.executemany("delete from insights where key = ? and status = 'pending'", stale)
    fallen = withdraw_fallen(conn)  # about a note deleted since, though its pattern did not run
    return SaveOutcome(
        tuple(k for k in created if k not in fallen),
        tuple(k for k in kept if k not in fallen),
        len(stale) + len(fallen),
    )


def _carried(conn: Any, key: str) -> list[str]:
    """The paths of the notes that carry the insight section of `key`, sorted."""
    return [
        r[0]
        for r in conn.execute(
            "select n.path from insight_sections s join nodes n on n.id = s.node_id "
            "where s.key = ? and n.path is not null and n.status != 'stub' order by n.path",
            (key,),
        )
    ]


def decide(conn: Any, insight_id: str, status: str, now: str) -> bool:
    """Take a decision taken in the chat on a *pending* insight (its vault record is still to be written:
    `mark_recorded`); False when it was no longer pending (another client's decision got there first: theirs
    stands)."""
    cursor = conn.execute(
        "update insights set status = ?, decided_at = ?, updated_at = ?, recorded_at = null "
        "where id = ? and status = ?",
        (status, now, now, insight_id, PENDING),
    )
    return cursor.rowcount > 0


def record_written(conn: Any, insight_id: str, paths: Sequence[str]) -> None:
    """Add `paths` to the notes known to carry the insight's section."""
    for row in conn.execute("select written_paths from insights where id = ?", (insight_id,)).fetchall():
        merged = sorted(set(json.loads(row[0] or "[]")) | set(paths))
        conn.execute("update insights set written_paths = ? where id = ?", (json.dumps(merged), insight_id))


def mark_recorded(conn: Any, insight_id: str, now: str) -> None:
    conn.execute(
        "update insights set recorded_at = ? where id = ? and recorded_at is null", (now, insight_id)
    )


def unrecorded_decisions(conn: Any) -> list[InsightRow]:
    """Decisions not yet written to the vault (taken where the vault could not be written)."""
    return _insights(conn, "status != ? and recorded_at is null order by key", (PENDING,))


# --- decisions kept in the vault -------------------------------------------------------------------------


@dataclass(frozen=True)
class InsightNote:
    """An insight's own note as the graph derived it: its frontmatter and the entities it is ABOUT."""

    node_id: str
    path: str | None
    name: str
    properties: dict[str, Any]
    about: tuple[str, ...]


@dataclass(frozen=True)
class VaultDecision:
    """A decision read back from the vault (an approved insight's note, a line of the dismissed list)."""

    key: str
    id: str
    pattern: str
    status: str
    title: str
    body: str
    confidence: float
    entities: tuple[str, ...]
    decided_at: str | None


def insight_notes(conn: Any) -> list[InsightNote]:
    """Every live note carrying an `insight_key` in its frontmatter, with its ABOUT targets."""
    rows = conn.execute(
        "select id, path, name, properties from nodes where label = ? and status = 'active' "
        "and json_extract(properties, '$.insight_key') is not null order by path",
        (INSIGHT_LABEL,),
    ).fetchall()
    notes = []
    for r in rows:
        about = conn.execute(
            "select target from edges where source = ? and type = 'ABOUT' and valid_to is null order by id",
            (r["id"],),
        )
        notes.append(
            InsightNote(
                r["id"], r["path"], r["name"], json.loads(r["properties"]), tuple(a[0] for a in about)
            )
        )
    return notes


def insight_note_path(conn: Any, key: str) -> str | None:
    """The path of the live note that records the insight `key`, if there is one."""
    row = conn.execute(
        "select path from nodes where label = ? and status = 'active' and path is not null "
        "and json_extract(properties, '$.insight_key') = ? order by created_at limit 1",
        (INSIGHT_LABEL, key),
    ).fetchone()
    return None if row is None else row["path"]


def note_path_named(conn: Any, name: str) -> str | None:
    """The path of the live Insight note named `name` (any case), wherever the person moved it; the oldest when
    there are several (the first one engrama made)."""
    row = conn.execute(
        "select path from nodes where label = ? and status = 'active' and path is not null "
        "and name = ? collate nocase order by created_at, path limit 1",
        (INSIGHT_LABEL, name),
    ).fetchone()
    return None if row is None else row["path"]


def apply_vault_decisions(conn: Any, decisions: Sequence[VaultDecision], now: str) -> int:
    """Give each insight the decision its vault record states; returns how many rows changed.

    A missing row is re-created from the record (after a rebuild); an existing row takes the record's status
    when it differs (the person may have edited `insight_status` in the note). Its text stays as it is.
    Either way the decision is now on record in the vault.
    """
    changed = 0
    for d in decisions:
        row = conn.execute("select status from insights where key = ?", (d.key,)).fetchone()
        decided = d.decided_at or now
        if row is None:
            entities = json.dumps(list(d.entities))
            values = (
                d.key,
                d.id,
                d.pattern,
                d.title,
                d.body,
                d.confidence,
                entities,
                d.status,
                now,
                now,
                decided,
            )
            conn.execute(
                f"insert into insights ({_INSIGHT_COLUMNS}, recorded_at) "
                "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', ?)",
                (*values, now),
            )
        elif row["status"] != d.status:
            conn.execute(
                "update insights set status = ?, decided_at = ?, updated_at = ?, recorded_at = ? where key = ?",
                (d.status, decided, now, now, d.key),
            )
        else:
            continue
        changed += 1
    return changed


# --- nodes named by insights, and the remember counter ---------------------------------------------------


def entity_nodes(conn: Any, ids: Sequence[str]) -> dict[str, NodeRef]:
    """The nodes with these ids that still exist, keyed by id."""
    rows = _rows_in(conn, "select id, label, name, path, status from nodes where id in ({marks})", ids)
    return {r["id"]: NodeRef(*r) for r in rows}


def node_checksum(conn: Any, path: str) -> str | None:
    """The checksum the graph last recorded for the file at `path`."""
    row = conn.execute("select checksum from files where path = ?", (path,)).fetchone()
    return None if row is None else row["checksum"]


def bump_counter(conn: Any, key: str) -> int:
    """Add one to the integer kept in meta under `key`; returns the new value."""
    sql = (
        "insert into meta (key, value) values (?, '1') on conflict(key) "
        "do update set value = cast(cast(value as integer) + 1 as text) returning cast(value as integer)"
    )
    return int(conn.execute(sql, (key,)).fetchone()[0])


def read_counter(conn: Any, key: str) -> int:
    row = conn.execute("select cast(value as integer) from meta where key = ?", (key,)).fetchone()
    return 0 if row is None else int(row[0])


def reset_counter(conn: Any, key: str) -> None:
    conn.execute("insert or replace into meta (key, value) values (?, '0')", (key,))
