"""The store's side of `vault_sync.protocol.GraphPort`: synchronous units of work on the raw connection.

Each public function here runs inside one transaction on the database thread (see `GraphStore`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from server.store import brief_sql, history_sql, passages_sql, search_sql
from server.store.nodes_sql import note_day, note_start
from vault_sync.model import Chunk, FileState, Link, NodeRef, NoteUpdate, ParsedNote
from vault_sync.names import canonical, fold
from vault_sync.parse import iso_moment
from vault_sync.readers import OWED_ID

STUB_LABEL = "Note"
ARCHIVED = "archived"
SUPERSEDED_FACTOR = 0.5  # a node whose `valid_to` is set keeps half the confidence it declares


def row_to_ref(row: Any) -> NodeRef:
    ino = row["ino"] if "ino" in row.keys() else None  # noqa: SIM118 - `in` on a Row tests its values
    return NodeRef(
        id=row["id"], label=row["label"], name=row["name"], path=row["path"], status=row["status"], ino=ino
    )


def file_states(conn: Any, paths: Sequence[str] | None = None) -> dict[str, FileState]:
    """Every recorded file, or those of `paths` (a few looked up, not the whole table read)."""
    sql = "select path, size, mtime_ns, checksum, node_id, ino from files"
    if paths is None:
        rows = conn.execute(sql).fetchall()
    else:
        wanted = list(dict.fromkeys(paths))
        rows = []
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            rows += conn.execute(f"{sql} where path in ({','.join('?' * len(part))})", part).fetchall()
    return {r["path"]: _file_row(r) for r in rows}


def _file_row(r: Any) -> FileState:
    return FileState(r["path"], r["size"], r["mtime_ns"], r["checksum"], r["node_id"], r["ino"])


def knows_files(conn: Any) -> bool:
    """Whether the graph has seen any note file of the vault."""
    return conn.execute("select 1 from files limit 1").fetchone() is not None


def file_state(conn: Any, path: str) -> FileState | None:
    r = conn.execute(
        "select path, size, mtime_ns, checksum, node_id, ino from files where path = ?", (path,)
    ).fetchone()
    return None if r is None else _file_row(r)


def files_with_inode(conn: Any, ino: int) -> list[FileState]:
    rows = conn.execute(
        "select path, size, mtime_ns, checksum, node_id, ino from files where ino = ?", (ino,)
    ).fetchall()
    return [_file_row(r) for r in rows]


def record_file_state(conn: Any, state: FileState) -> None:
    """Record what the sync knows of a file. When the person last changed it (`touched_ns`): the time the state
    carries (engrama's id line kept the one from before it), else unchanged while the bytes are (a file read
    again, touched, or renamed is not edited), else the file's modification time."""
    conn.execute(
        "insert into files (path, size, mtime_ns, checksum, node_id, ino, touched_ns) values (?, ?, ?, ?, ?, ?, ?) "
        "on conflict(path) do update set size = excluded.size, mtime_ns = excluded.mtime_ns, "
        "checksum = excluded.checksum, node_id = excluded.node_id, ino = excluded.ino, "
        "touched_ns = coalesce(excluded.touched_ns, "
        "case when files.checksum = excluded.checksum then files.touched_ns end)",
        (state.path, state.size, state.mtime_ns, state.checksum, state.node_id, state.ino, state.touched_ns),
    )


def record_inodes(conn: Any, inodes: Sequence[tuple[str, int]]) -> None:
    conn.executemany("update files set ino = ? where path = ?", [(ino, path) for path, ino in inodes])


def nodes_by_ids(conn: Any, node_ids: Sequence[str]) -> dict[str, NodeRef]:
    found: dict[str, NodeRef] = {}
    unique = list(dict.fromkeys(node_ids))
    for start in range(0, len(unique), 500):  # stay under SQLite's host-parameter limit
        part = unique[start : start + 500]
        rows = conn.execute(
            "select n.id, n.label, n.name, n.path, n.status, f.ino from nodes n "
            f"left join files f on f.path = n.path where n.id in ({','.join('?' * len(part))})",
            part,
        ).fetchall()
        found.update((row["id"], row_to_ref(row)) for row in rows)
    return found


def link_keys(path: str | None, name: str, aliases: Sequence[str]) -> list[tuple[str, str]]:
    """The (key, kind) pairs a wikilink may use to reach a node, casefolded like Obsidian's matching."""
    keys: list[tuple[str, str]] = []
    if path:
        without_ext = path[:-3] if path.lower().endswith(".md") else path
        keys.append((fold(without_ext), "path"))
        keys.append((fold(without_ext.rsplit("/", 1)[-1]), "stem"))
    keys.append((fold(name), "name"))
    keys.extend((fold(alias), "alias") for alias in aliases if alias.strip())
    return list(dict.fromkeys(keys))


def replace_keys(conn: Any, node_id: str, keys: list[tuple[str, str]]) -> None:
    conn.execute("delete from node_keys where node_id = ?", (node_id,))
    conn.executemany(
        "insert or ignore into node_keys (key, node_id, kind) values (?, ?, ?)",
        [(key, node_id, kind) for key, kind in keys],
    )


# Which node a link target means, as a function of the vault alone (so a rebuild resolves it the same way): a
# link spelling out a note's path means that note, archived or not (as in Obsidian: `[[Raven]]` is the vault's
# top-level Raven.md, `[[Projects/Raven]]` that one); otherwise live notes beat notes archived in the vault
# (`status: archived`), which beat stubs, and a file-name match beats a name or alias; a note deleted from the
# vault is no longer a target (a rebuild would not know it); ties go to the shortest path, then the path, then
# the id.
_RESOLVE_SQL = """
select k.node_id from node_keys k cross join nodes n on n.id = k.node_id
where k.key = ? and n.id != ?
  and (n.status != 'archived' or exists (select 1 from files f where f.node_id = n.id))
order by k.kind != 'path',
         case n.status when 'active' then 0 when 'archived' then 1 else 2 end,
         case k.kind when 'path' then 0 when 'stem' then 1 when 'name' then 2 else 3 end,
         n.path is null, length(n.path), n.path, n.id
limit 1
"""


def link_key(target: str) -> tuple[str, str | None]:
    """The casefolded key a link target is matched by, and for `folder/Note` its file-name fallback."""
    key = target.strip()
    if key.lower().endswith(".md"):
        key = key[:-3]
    folded = fold(key)
    return folded, folded.rsplit("/", 1)[-1] if "/" in folded else None


def resolve_key(conn: Any, key: str, stem: str | None, source_id: str) -> str | None:
    """The node a link with this key means now, or None when nothing (not even a stub) has the name."""
    row = conn.execute(_RESOLVE_SQL, (key, source_id)).fetchone()
    if row is None and stem is not None:
        row = conn.execute(_RESOLVE_SQL, (stem, source_id)).fetchone()
    return None if row is None else row["node_id"]


def link_leads_to(conn: Any, target: str) -> str | None:
    """The node a wikilink `[[target]]` written into a note would resolve to now (None: nothing, a stub)."""
    key, stem = link_key(target)
    return resolve_key(conn, key, stem, "")


def bare_name_is_unique(conn: Any, name: str, node_id: str) -> bool:
    """True when `[[name]]` leads to `node_id` now and no other note answers to that name (its file name,
    `name:` or an alias), archived ones included. Obsidian writes a link by file name only when no other
    file has that name, for the same reason: a name several notes share means one of them only until
    another of them is restored, un-archived or moved (the link would then lead there)."""
    key, _ = link_key(name)
    if resolve_key(conn, key, None, "") != node_id:
        return False
    return (
        conn.execute(
            "select 1 from node_keys k join nodes n on n.id = k.node_id "
            "where k.key = ? and k.node_id != ? and n.path is not null limit 1",
            (key, node_id),
        ).fetchone()
        is None
    )


def resolve_target(conn: Any, target: str, source_id: str, now: str) -> str:
    """The node id a link target names; creates a stub node when nothing matches yet."""
    key, stem = link_key(target)
    found = resolve_key(conn, key, stem, source_id)
    if found is not None:
        return found
    stub_id = str(uuid.uuid4())
    bare = target.strip()[:-3] if target.strip().lower().endswith(".md") else target.strip()
    name = canonical(bare.rsplit("/", 1)[-1] or bare)
    conn.execute(
        "insert into nodes (id, label, name, status, created_at, updated_at) values (?, ?, ?, 'stub', ?, ?)",
        (stub_id, STUB_LABEL, name, now, now),
    )
    replace_keys(conn, stub_id, [(key, "name")] + ([(stem, "stem")] if stem else []))
    return stub_id


def node_key_set(conn: Any, node_id: str) -> set[str]:
    return {r["key"] for r in conn.execute("select key from node_keys where node_id = ?", (node_id,))}


def reresolve_node_links(conn: Any, node_id: str, now: str) -> None:
    """The node stopped or started being a link target, or changed rank (archived, revived, deleted from the
    vault): re-resolve the links that use any of its names."""
    reresolve_links(conn, node_key_set(conn, node_id), now)


def reresolve_links(conn: Any, keys: set[str], now: str) -> None:
    """Some nodes gained or lost these names (or stopped being targets): re-resolve the links that use them.

    A note whose links now mean other nodes gets its edges recomputed from its stated links, exactly as if it
    had been read again, so the live graph stays what a rebuild from the vault would give."""
    if not keys:
        return
    folded = sorted(keys)
    stale: set[str] = set()
    best: dict[tuple[str, str | None], str | None] = {}  # one resolution per name, not per link
    for start in range(0, len(folded), 400):
        part = folded[start : start + 400]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"select distinct source, key, stem, target from note_links where key in ({marks}) "
            f"or stem in ({marks})",
            part + part,
        ).fetchall()
        for r in rows:
            if r["source"] in stale:
                continue
            name = (r["key"], r["stem"])
            if name not in best:
                best[name] = resolve_key(conn, r["key"], r["stem"], "")
            means = best[name]
            if means == r["source"]:  # a note never links to itself: the next best, for this one
                means = resolve_key(conn, r["key"], r["stem"], r["source"])
            if means != r["target"]:
                stale.add(r["source"])
    for source in sorted(stale):
        links = [
            Link(r["rel_type"], r["target_text"], r["origin"])
            for r in conn.execute(
                "select rel_type, target_text, origin from note_links where source = ? order by rowid",
                (source,),
            )
        ]
        replace_note_edges(conn, source, links, now)


def absorb_stubs(conn: Any, node_id: str, keys: list[tuple[str, str]]) -> None:
    """A note appeared under a name that stubs were standing in for: move their edges to it, drop them."""
    folded = sorted({key for key, _ in keys})
    marks = ",".join("?" * len(folded))
    stubs = [
        r["node_id"]
        for r in conn.execute(
            f"select distinct k.node_id from node_keys k cross join nodes n on n.id = k.node_id "
            f"where n.status = 'stub' and k.key in ({marks})",
            folded,
        )
    ]
    for stub in stubs:
        conn.execute("update or ignore edges set target = ? where target = ?", (node_id, stub))
        conn.execute("update note_links set target = ? where target = ?", (node_id, stub))
        conn.execute("delete from nodes where id = ?", (stub,))  # cascades to leftover duplicate edges


def replace_note_edges(conn: Any, node_id: str, links: Sequence[Link], now: str) -> None:
    """Make the open note-derived edges of `node_id` exactly those its note states; close the rest.

    The stated links are kept beside them (`note_links`), so they can be resolved again when names move."""
    wanted: set[tuple[str, str, str]] = set()
    stated = []
    for link in links:
        target = resolve_target(conn, link.target, node_id, now)
        key, stem = link_key(link.target)
        stated.append((node_id, link.rel_type, link.origin, link.target, key, stem, target))
        if target != node_id:
            wanted.add((link.rel_type, target, link.origin))
    conn.execute("delete from note_links where source = ?", (node_id,))
    conn.executemany(
        "insert into note_links (source, rel_type, origin, target_text, key, stem, target) "
        "values (?, ?, ?, ?, ?, ?, ?)",
        stated,
    )
    current = {
        (r["type"], r["target"], r["origin"]): r["id"]
        for r in conn.execute(
            "select id, type, target, origin from edges "
            "where source = ? and valid_to is null and origin in ('frontmatter', 'wikilink')",
            (node_id,),
        )
    }
    gone = [(now, edge_id) for key, edge_id in current.items() if key not in wanted]
    conn.executemany("update edges set valid_to = ? where id = ?", gone)
    conn.executemany(
        "insert into edges (source, type, target, origin, valid_from, created_at) values (?, ?, ?, ?, ?, ?)",
        [(node_id, rel, target, origin, now, now) for rel, target, origin in wanted - current.keys()],
    )


def replace_chunks(conn: Any, node_id: str, title: str, chunks: Sequence[Chunk]) -> bool:
    """Store the note's passages; unchanged passages keep their row (and so their embedding). True when any
    passage changed (its words, heading or title), was added or went.

    The texts are stored once per note (`passages_sql`); new passages wait in the stage for
    `index_new_chunks`, which adds them to the full-text index. Before anything changes, the note's
    whole-note row leaves its index with the words of the passages stored now (`passages_sql.unindex_notes`);
    the caller indexes it again (`apply_notes`)."""
    existing = {
        r["ordinal"]: (r["id"], r["title"], r["heading"], r["repeats"])
        for r in conn.execute(
            "select id, ordinal, title, heading, repeats from chunks where node_id = ?", (node_id,)
        )
    }
    old_texts = passages_sql.passages_by_note(conn, [node_id]).get(node_id, {}) if existing else {}
    keep: set[int] = set()
    for chunk in chunks:
        old = existing.get(chunk.ordinal)
        if old is not None and (old[1], old[2], old_texts.get(chunk.ordinal)) == (
            title,
            chunk.heading,
            chunk.text,
        ):
            keep.add(chunk.ordinal)
    gone = [
        (row[0], row[1], row[2], old_texts.get(ordinal))
        for ordinal, row in existing.items()
        if ordinal not in keep
    ]
    new = [c for c in chunks if c.ordinal not in keep]
    # A kept passage may repeat another share of the one before it (that one changed): its words and vector
    # stand, only what it adds to the whole-note row moves.
    moved = [
        (c.repeats, existing[c.ordinal][0])
        for c in chunks
        if c.ordinal in keep and existing[c.ordinal][3] != c.repeats
    ]
    if gone or new or moved:
        held = [(existing[o][2], old_texts[o], existing[o][3]) for o in sorted(existing) if o in old_texts]
        passages_sql.unindex_notes(conn, [node_id], {node_id: passages_sql.note_text(held)})
    conn.executemany("update chunks set repeats = ? where id = ?", moved)
    passages_sql.unindex_passages(conn, gone)
    conn.executemany("delete from chunks where id = ?", [(row[0],) for row in gone])
    conn.executemany(
        "insert into chunks (node_id, ordinal, title, heading, repeats) values (?, ?, ?, ?, ?)",
        [(node_id, c.ordinal, title, c.heading, c.repeats) for c in new],
    )
    if new:
        ids = dict(conn.execute("select ordinal, id from chunks where node_id = ?", (node_id,)).fetchall())
        passages_sql.stage_passages(conn, [(ids[c.ordinal], title, c.heading, c.text) for c in new])
    texts = {c.ordinal: c.text for c in chunks}
    if texts != old_texts:
        passages_sql.store_passages(conn, node_id, texts)
    return bool(gone or new or moved)


def index_new_chunks(conn: Any) -> None:
    """Add the passages stored in this unit of work to the FTS index in one set-based statement."""
    passages_sql.index_staged(conn)


def close_outgoing_edges(conn: Any, node_id: str, now: str) -> None:
    conn.execute("update edges set valid_to = ? where source = ? and valid_to is null", (now, node_id))


def apply_notes(conn: Any, updates: Sequence[NoteUpdate], now: str) -> list[bool]:
    """Apply many notes (in the caller's transaction); True for each node that is new."""
    moved_names: set[str] = set()  # names nodes gained or lost: the links using them are resolved again
    changed: set[str] = set()  # notes whose indexed words changed: their whole-note row is indexed again
    created = [
        _apply_one(conn, u.note, u.node_id, u.chunks, u.state, now, moved_names, changed) for u in updates
    ]
    reresolve_links(conn, moved_names, now)
    index_new_chunks(conn)
    # Only changed notes: a note read again after its id was written, or whose frontmatter alone changed, keeps
    # its row.
    search_sql.index_note_docs(
        conn,
        [
            (
                u.node_id,
                indexed_name(u.note),
                passages_sql.note_text((c.heading, c.text, c.repeats) for c in u.chunks),
            )
            for u in updates
            if u.node_id in changed
        ],
    )
    return created


# The recorded checksum of a note whose passages `replace_text` set: no file has it, so its next read applies.
TEXT_ONLY = "text-only"


def replace_text(conn: Any, node_id: str, chunks: Sequence[Chunk]) -> bool:
    """What a known note's text says now, when it cannot be read as a note (its frontmatter broken, or it
    cannot be read at all: no `chunks`): its passages and whole-note row only; its properties, names and links
    stay as last read, until it can be read again. So search finds what the note says, never what it said
    (review 21a: a word removed while the YAML was broken still found the note). True when its indexed words
    changed."""
    row = conn.execute(
        "select n.name, d.name as indexed from nodes n left join note_docs d on d.node_id = n.id "
        "where n.id = ? and n.status != 'stub'",
        (node_id,),
    ).fetchone()
    if row is None:
        return False
    if not replace_chunks(conn, node_id, row["name"], chunks):
        return False
    index_new_chunks(conn)
    body = passages_sql.note_text((c.heading, c.text, c.repeats) for c in chunks)
    search_sql.index_note_docs(conn, [(node_id, row["indexed"] or row["name"], body)])
    # Its file state no longer says what the index holds: whatever the file holds next (its old bytes put back
    # too: review 21e) is read and applied again.
    conn.execute("update files set checksum = ?, size = -1 where node_id = ?", (TEXT_ONLY, node_id))
    return True


def apply_note(
    conn: Any, note: ParsedNote, node_id: str, chunks: Sequence[Chunk], state: FileState, now: str
) -> bool:
    """Upsert the node of one note with its keys, edges, passages and file state. True when newly created."""
    return apply_notes(conn, [NoteUpdate(note, node_id, tuple(chunks), state)], now)[0]


def _apply_one(
    conn: Any,
    note: ParsedNote,
    node_id: str,
    chunks: Sequence[Chunk],
    state: FileState,
    now: str,
    moved_names: set[str],
    changed: set[str],
) -> bool:
    existing = conn.execute(
        "select status, path, name, label, properties, checksum, valid_to, "
        "coalesce(base_confidence, confidence) as declared, coalesce(began_at, created_at) as began_at, "
        "(select d.name from note_docs d where d.node_id = nodes.id) as indexed "
        "from nodes where id = ?",
        (node_id,),
    ).fetchone()
    # The note (re)appears at this path: restored from the trash, or the first note of a node a tool made in
    # the graph alone. Which note a link means depends on which notes the vault holds (`_RESOLVE_SQL`), so the
    # links using its names are resolved again, even when its names and status are what the graph already
    # held: what a rebuild from the vault would give.
    arrived = conn.execute("select node_id from files where path = ?", (note.path,)).fetchone()
    arrived = arrived is None or arrived["node_id"] != node_id
    # Another node sitting on this path (the person replaced the file or changed its id) loses the path.
    for row in conn.execute(
        "select id from nodes where path = ? and id != ?", (note.path, node_id)
    ).fetchall():
        conn.execute(
            "update nodes set path = null, status = 'archived', updated_at = ? where id = ?", (now, row["id"])
        )
        close_outgoing_edges(conn, row["id"], now)
        conn.execute("delete from note_links where source = ?", (row["id"],))
        moved_names |= node_key_set(conn, row["id"])
    stated_properties = note_properties(note)
    properties = json.dumps(stated_properties, ensure_ascii=False, sort_keys=True, default=str)
    valid_from, began_at = note_start(note, node_id, existing["began_at"] if existing else None, now)
    # A known node's passages first: whether they changed is part of whether the note says something new (a
    # note still owing its id line is recorded under a placeholder checksum, which hides its edits).
    passages_changed = existing is not None and replace_chunks(conn, node_id, note.name, chunks)
    stated = {
        "label": note.label,
        "name": note.name,
        "properties": properties,
        "path": note.path,
        "checksum": state.checksum,
        "status": note_status(note),
        "valid_to": note.valid_to,
        "declared": note_confidence(note),
    }
    same = not passages_changed and existing is not None and all(existing[k] == v for k, v in stated.items())
    # Nothing the person wrote changed, only what the graph records of it: the id line the note was owed is
    # written (its checksum was the placeholder: review 21d), or the same bytes are read again by a version that
    # keeps more of them (migration 17: its tags). That column alone is set, with no stamp, no change number and
    # no history, and the brief's record of the version follows it (else the note is "edited" again).
    quiet = None if same or passages_changed or existing is None else _quiet_change(existing, stated)
    if quiet is not None:
        brief_sql.quietly(conn, node_id, quiet, stated[quiet])
        same = True
    # The node is written only when the note says something new: applying the same note again (a process
    # without the lease meets a note still owing its id line on every pass) must not make it look edited
    # (updated_at feeds the brief and recency) nor undo its confidence decay.
    conn.execute(
        """
        insert into nodes (id, label, name, properties, path, checksum, status, created_at, updated_at,
                           confidence, valid_from, valid_to, began_at, note_day)
        values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        on conflict(id) do update set label = excluded.label, name = excluded.name,
            properties = excluded.properties, path = excluded.path, checksum = excluded.checksum,
            status = excluded.status, updated_at = excluded.updated_at, confidence = excluded.confidence,
            base_confidence = null, decayed_at = null, valid_from = excluded.valid_from,
            valid_to = excluded.valid_to, began_at = excluded.began_at, note_day = excluded.note_day
        where not ?
        """,
        (
            node_id,
            *(stated[k] for k in ("label", "name", "properties", "path", "checksum", "status")),
            now,
            now,
            stated["declared"],
            valid_from,
            stated["valid_to"],
            began_at,
            note_day(note.path, note.name, properties, began_at),
            same,
        ),
    )
    if (
        quiet is None
        and existing is not None
        and existing["status"] != "stub"
        and existing["properties"] != properties
    ):
        before = json.loads(existing["properties"] or "{}")
        if "tags" in stated_properties and "tags" not in before and _tags_not_kept(conn, existing["path"]):
            before["tags"] = stated_properties["tags"]  # stated all along: no news (review 23c)
        history_sql.record_changes(conn, node_id, before, stated_properties, now)
    if existing is not None and existing["path"] and existing["path"] != note.path:  # the note moved
        rows = conn.execute(
            "delete from files where path = ? returning checksum, touched_ns", (existing["path"],)
        ).fetchall()
        left = rows[0] if rows else None
        if left is not None and left["checksum"] == state.checksum and state.touched_ns is None:
            state = replace(state, touched_ns=left["touched_ns"])  # a rename is no edit of the person's
    keys = link_keys(note.path, note.name, note.aliases)
    old_keys = node_key_set(conn, node_id)
    new_keys = {key for key, _ in keys}
    if existing is None or arrived or old_keys != new_keys or existing["status"] != note_status(note):
        moved_names |= old_keys | new_keys
    replace_keys(conn, node_id, keys)
    absorb_stubs(conn, node_id, keys)
    if note.insight_keys or existing is not None:  # the insight sections it carries now
        conn.execute("delete from insight_sections where node_id = ?", (node_id,))
        conn.executemany(
            "insert or ignore into insight_sections (key, node_id) values (?, ?)",
            [(key, node_id) for key in note.insight_keys],
        )
    replace_note_edges(conn, node_id, note.links, now)
    if existing is None:
        passages_changed = replace_chunks(conn, node_id, note.name, chunks)
    # A node without a whole-note row gets one, also when its note states no passage: one a tool made in the
    # graph alone (a second client's queued write) is found by its name once its note arrives.
    if passages_changed or existing is None or existing["indexed"] != indexed_name(note):
        changed.add(node_id)
    record_file_state(conn, replace(state, path=note.path, node_id=node_id))
    return existing is None or existing["status"] == "stub"


def note_properties(note: ParsedNote) -> dict[str, Any]:
    """The properties the graph keeps for a note: its frontmatter's, with its tags (`tags:`, without `#`) as
    the note states them (review 21a: they were parsed and kept nowhere)."""
    return {**note.properties, "tags": list(note.tags)} if note.tags else dict(note.properties)


def _quiet_change(existing: Any, stated: dict[str, Any]) -> str | None:
    """The one column of a known note's node that changes though the person changed nothing (`_apply_one`):
    "checksum" when the owed id line was written, "properties" when the same bytes now give its tags; else
    None."""
    differing = [key for key, value in stated.items() if existing[key] != value]
    if differing == ["checksum"] and existing["checksum"] == OWED_ID:
        return "checksum"
    if differing == ["properties"] and _without_tags(existing["properties"]) == _without_tags(
        stated["properties"]
    ):
        return "properties"  # the checksum is the same: the same bytes
    return None


def _tags_not_kept(conn: Any, path: str | None) -> bool:
    """Whether the note at `path` was last read by a version that kept no tags (its file is still marked by
    migration 17): the tags it states now are not a change, though the graph had none."""
    row = conn.execute("select checksum from files where path = ?", (path,)).fetchone() if path else None
    return row is not None and row[0] == "read-again-m017"


def _without_tags(properties: str | None) -> dict[str, Any]:
    stated = json.loads(properties or "{}")
    stated.pop("tags", None)
    return stated


def indexed_name(note: ParsedNote) -> str:
    """What the note's whole-note row holds in its name column: its name, its aliases, its tags (a note tagged
    `q3-goals` is found by those words, as strongly as by its name: the person's own topic for it) and the
    words of its other properties (`status: blocked`, `client: "[[Acme]]"`): what the person states about the
    note, found as Obsidian's own search finds a note by its frontmatter. Dates, numbers and booleans are left
    out: a question's dates are matched by the notes' days (`nodes.note_day`), not by their digits."""
    return " ".join((note.name, *note.aliases, *note.tags, *property_words(note.properties)))


def property_words(properties: Any) -> list[str]:
    """The text values of a note's properties (in lists and mappings too), in their order, less dates."""
    if isinstance(properties, str):
        text = properties.strip()
        return [text] if text and iso_moment(text) is None else []
    if isinstance(properties, dict):
        return [word for value in properties.values() for word in property_words(value)]
    if isinstance(properties, list):
        return [word for value in properties for word in property_words(value)]
    return []


def note_status(note: ParsedNote) -> str:
    """`archived` when the note says `status: archived` (how `engrama_forget` archives), else `active`."""
    status = note.properties.get("status")
    return "archived" if isinstance(status, str) and status.strip().casefold() == ARCHIVED else "active"


def note_confidence(note: ParsedNote) -> float:
    """The confidence a note declares (1.0 by default), halved while it is superseded (`valid_to` set)."""
    declared = 1.0 if note.confidence is None else note.confidence
    return declared * (SUPERSEDED_FACTOR if note.valid_to else 1.0)


def unpurged(conn: Any, path: str) -> bool:
    """Forget the file state of the note at `path` when the node it names was purged from the graph (the note
    kept: `engrama_forget` purge without delete_note), so the next reconcile reads the note again as the
    vault has it; True when there was such a state."""
    return (
        conn.execute(
            "delete from files where path = ? and node_id is not null "
            "and not exists (select 1 from nodes n where n.id = files.node_id)",
            (path,),
        ).rowcount
        > 0
    )


def archive_path(conn: Any, path: str, now: str) -> str | None:
    """The file at `path` is gone. Archive its node unless the node has already moved to another path."""
    state = file_state(conn, path)
    conn.execute("delete from files where path = ?", (path,))
    row = conn.execute("select id, path from nodes where path = ?", (path,)).fetchone()
    node_id = row["id"] if row is not None else (state.node_id if state else None)
    if node_id is None:
        return None
    current = conn.execute("select path, status from nodes where id = ?", (node_id,)).fetchone()
    if current is None or (current["path"] is not None and current["path"] != path):
        return None
    conn.execute("update nodes set status = 'archived', updated_at = ? where id = ?", (now, node_id))
    close_outgoing_edges(conn, node_id, now)
    conn.execute("delete from note_links where source = ?", (node_id,))  # the note is gone; so are its links
    reresolve_node_links(conn, node_id, now)  # a deleted note is no longer a link target
    return node_id


def compose_names(conn: Any, now: str) -> None:
    """Migration 11's step: entity names stored composed and every key folded as `vault_sync.names` does now
    (a name from a file named on a Mac was kept decomposed, so "Café" typed anywhere else never met it), then
    the links whose keys changed resolved again, so the graph is what a rebuild from the vault gives."""
    renamed = [
        (canonical(r["name"]), r["id"])
        for r in conn.execute("select id, name from nodes").fetchall()
        if canonical(r["name"]) != r["name"]
    ]
    conn.executemany("update nodes set name = ? where id = ?", renamed)
    keys = [
        (r["key"], r["node_id"], r["kind"], fold(r["key"]))
        for r in conn.execute("select key, node_id, kind from node_keys").fetchall()
        if fold(r["key"]) != r["key"]
    ]
    conn.executemany(
        "delete from node_keys where key = ? and node_id = ? and kind = ?", [k[:3] for k in keys]
    )
    conn.executemany(
        "insert or ignore into node_keys (key, node_id, kind) values (?, ?, ?)",
        [(k[3], k[1], k[2]) for k in keys],
    )
    links = []
    for r in conn.execute("select rowid, key, stem from note_links").fetchall():
        key, stem = fold(r["key"]), fold(r["stem"]) if r["stem"] is not None else None
        if (key, stem) != (r["key"], r["stem"]):
            links.append((key, stem, r["rowid"]))
    conn.executemany("update note_links set key = ?, stem = ? where rowid = ?", links)
    changed = {k[3] for k in keys} | {k for key, stem, _ in links for k in (key, stem) if k is not None}
    # A stub stood in for a name that a note holds now that both are spelled alike: it gives way to the note, as
    # when a note appears under a stub's name (where one live note alone holds the name).
    for key in sorted(changed):
        holders = [
            r[0]
            for r in conn.execute(
                "select distinct k.node_id from node_keys k join nodes n on n.id = k.node_id "
                "where k.key = ? and n.status not in ('stub', 'archived')",
                (key,),
            )
        ]
        if len(holders) == 1:
            absorb_stubs(conn, holders[0], [(key, "")])
    reresolve_links(conn, changed, now)
