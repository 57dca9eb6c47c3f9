"""Units of work for the memory tools (remember, relate): finding the node a write merges into, making
relation targets exist, and the graph-only writes of a process that does not hold the vault's lease.

Synchronous functions on the raw connection, run through `GraphStore.read` / `GraphStore.write`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from server.store import history_sql
from server.store.nodes_sql import (
    NODE_COLUMNS,
    SAME_NAME,
    Node,
    edge_valid_on,
    find_nodes,
    merge_entity,
    refresh_note_days,
    row_to_node,
    same_name,
    valid_on,
)
from server.store.sync_sql import (
    STUB_LABEL,
    link_leads_to,
    node_key_set,
    reresolve_links,
    reresolve_node_links,
)
from vault_sync.names import fold, visible

_COLUMNS = ", ".join("n." + c.strip() for c in NODE_COLUMNS.split(","))
OBSERVATIONS_KEY = "observations"  # where a graph-only remember keeps observations it cannot append to a note


def find_merge_target(conn: Any, label: str, name: str) -> Node | None:
    """The node a write of `label` + `name` merges into, or None when it is new.

    The rule of `nodes_sql.merge_entity` (same name, case-insensitive, and the same label or a stub),
    widened to the aliases of a live node of that label, so `Postgres` merges into a `PostgreSQL` note
    that lists it under `aliases:`, and then to its file name, as a link `[[Atlas]]` reaches `Atlas.md`
    whatever its `name:` says (Obsidian shows a note by its file name; a relation already went there)."""
    row = conn.execute(
        f"select {_COLUMNS} from nodes n where {SAME_NAME} and n.status != 'archived' "
        "and (n.label = ? or n.status = 'stub') order by n.status = 'stub', n.path is null, n.created_at limit 1",
        (*same_name(name), label),
    ).fetchone()
    for kind, order in (("alias", "n.created_at"), ("stem", "length(n.path), n.path")):
        row = row or _by_key(conn, kind, name, label, "active", order)
    return None if row is None else row_to_node(row)


def _by_key(conn: Any, kind: str, name: str, label: str, status: str, order: str) -> Any:
    """The first node of `label` and `status` whose `kind` key ("alias", "stem") is `name`'s, by `order`."""
    return conn.execute(
        f"select {_COLUMNS} from node_keys k cross join nodes n on n.id = k.node_id "
        f"where k.key = ? and k.kind = ? and n.label = ? and n.status = ? order by {order} limit 1",
        (fold(name), kind, label, status),
    ).fetchone()


def live_namesake(conn: Any, label: str, name: str, excluding: str) -> Node | None:
    """The live entity of `label` called `name` (case-insensitive) that has a note, other than `excluding`: the
    one a write for `excluding` goes to when `excluding`'s own note is gone for good (a second note under that
    name would make two entities of one name)."""
    row = conn.execute(
        f"select {_COLUMNS} from nodes n where {SAME_NAME} and n.label = ? and n.status = 'active' "
        "and n.path is not null and n.id != ? order by n.created_at limit 1",
        (*same_name(name), label, excluding),
    ).fetchone()
    return None if row is None else row_to_node(row)


def find_archived_entity(conn: Any, label: str, name: str) -> Node | None:
    """The most recently archived node of `label` called `name` (a forgotten entity a write may revive); else
    the one with that alias, else that file name, as `find_merge_target` widens it for live nodes (review
    23f: forgotten by its alias, it was not found by it again, and remembering the alias made a second
    note)."""
    row = conn.execute(
        f"select {_COLUMNS} from nodes n where {SAME_NAME} and n.label = ? "
        "and n.status = 'archived' order by n.updated_at desc limit 1",
        (*same_name(name), label),
    ).fetchone()
    for kind in ("alias", "stem"):
        row = row or _by_key(conn, kind, name, label, "archived", "n.updated_at desc")
    return None if row is None else row_to_node(row)


def find_entity(conn: Any, label: str, name: str) -> Node | None:
    """The node a tool write of `label` + `name` reaches, or None when the entity is new.

    The live entity (`find_merge_target`); else the archived one of that label, which the write makes
    current again (`services.revival`); else a stub of that name, which the write turns into the note.
    An archived entity comes before a stub: a stub only stands for a name, and reviving the entity lets
    its note absorb the stub instead of becoming a second entity beside the archived one."""
    found = _find_entity(conn, label, name)
    if found is None and visible(name) != name:  # characters that show as nothing (review 23h)
        found = _find_entity(conn, label, visible(name))
    return found


def _find_entity(conn: Any, label: str, name: str) -> Node | None:
    found = find_merge_target(conn, label, name)
    if found is not None and found.status != "stub":
        return found
    return find_archived_entity(conn, label, name) or found


def revive_in_graph(conn: Any, node_id: str, now: str) -> None:
    """Make an archived or superseded node current again (graph-only writes). A live node outranks an
    archived one of the same name, so the links using its names are resolved again now: its note, when the
    holder writes it, says nothing the graph does not already hold, and no later read would notice."""
    conn.execute(
        "update nodes set status = 'active', valid_to = null, confidence = 1.0, base_confidence = null, "
        "decayed_at = null, updated_at = ? where id = ?",
        (now, node_id),
    )
    reresolve_node_links(conn, node_id, now)


def _choose_target(candidates: list[Node], label: str | None) -> Node | None:
    """Which of the nodes called by a name a relation should reach: a live one of `label`, else any live
    one (a wikilink would reach it too), else an archived one of `label` (of any label when none is
    wanted), which the caller revives, else a stub."""
    live = [n for n in candidates if n.status == "active"]
    preferred = next((n for n in live if n.label == label), None) if label else None
    if preferred or live:
        return preferred or live[0]
    archived = next((n for n in candidates if n.status == "archived" and label in (None, n.label)), None)
    return archived or next((n for n in candidates if n.status == "stub"), None)


def _target(conn: Any, name: str, label: str | None) -> Node | None:
    """`_choose_target` over the nodes called `name`; when that is only a stub (or nothing), the note a
    wikilink `[[name]]` leads to instead, if any: the relation is written as that link, so it must mean what
    the link means in the vault (an archived note of another label, a note whose file has that name)."""
    node = _choose_target(find_nodes(conn, name, include_archived=True), label)
    if node is None or node.status == "stub":
        leads = link_leads_to(conn, name)
        if leads is not None and (node is None or leads != node.id):
            found = _node(conn, leads)
            if found.status != "stub":
                return found
    return node


def preview_target(conn: Any, name: str, label: str | None) -> tuple[Node | None, str]:
    """The node `ensure_target` would pick (None: it would create a stub) and the label it would have."""
    node = _target(conn, name, label)
    if node is None:
        return None, label or STUB_LABEL
    return node, node.label if node.status != "stub" else (label or node.label)


def ensure_target(
    conn: Any, name: str, label: str | None, now: str, new_id: str | None = None
) -> tuple[Node, bool]:
    """The node a relation to `name` points at, created as a stub (with id `new_id` when given) when nothing
    is called that yet.

    A stub takes `label` (it is only a name until its note appears, and then the note's own type wins).
    An archived node is returned as it is: the caller makes it current again. Returns (node, created)."""
    node = _target(conn, name, label)
    if node is not None:
        if node.status == "stub":  # in use again: the clean-up of stubs left over gives it its grace anew
            new_label = label if label is not None else node.label
            conn.execute("update nodes set label = ?, updated_at = ? where id = ?", (new_label, now, node.id))
            node = _node(conn, node.id)
        return node, False
    node_id = new_id or str(uuid.uuid4())
    conn.execute(
        "insert into nodes (id, label, name, status, created_at, updated_at) values (?, ?, ?, 'stub', ?, ?)",
        (node_id, label or STUB_LABEL, visible(name).strip(), now, now),
    )
    conn.execute(
        "insert or ignore into node_keys (key, node_id, kind) values (?, ?, 'name')",
        (fold(name), node_id),
    )
    return _node(conn, node_id), True


def drop_unused_stubs(conn: Any, node_ids: Sequence[str]) -> int:
    """Delete those of `node_ids` that are still placeholders nothing points at (no relation, no note's link);
    their names go with them. Returns how many went."""
    gone = 0
    for node_id in node_ids:
        gone += conn.execute(
            "delete from nodes where id = ? and status = 'stub' "
            "and not exists (select 1 from edges where source = ? or target = ?) "
            "and not exists (select 1 from note_links where target = ?)",
            (node_id, node_id, node_id, node_id),
        ).rowcount
    return gone


# The placeholders this process's tool calls have made and not finished with (their note is not written yet):
# the clean-up of what a killed process left (`drop_stubs_left_over`, when this one takes the vault's lease)
# leaves them alone. Each id is added before its node is made (`ensure_target`'s `new_id`), so the clean-up,
# on the database thread, never sees such a node without its id here.
RUNNING_STUBS: set[str] = set()


def drop_stubs_left_over(conn: Any, running: Collection[str], before: str) -> int:
    """Delete the placeholders nothing points at (no relation, open or closed, and no note's link), last used
    before `before` (an ISO time), except those of `running` (made by calls still running in this process): a
    tool call makes its relation's target before it writes the note, and one killed in between (SIGKILL, power
    loss) never took it out again. A rebuild from the vault would not have them. `before` leaves a call of
    another process (a follower's, which takes milliseconds) the stub it has just made or found. Returns how
    many went."""
    stubs = [
        r[0]
        for r in conn.execute(
            "select id from nodes where status = 'stub' and updated_at < ? "
            "and not exists (select 1 from edges where source = nodes.id or target = nodes.id) "
            "and not exists (select 1 from note_links where target = nodes.id)",
            (before,),
        )
    ]
    gone = [(stub,) for stub in stubs if stub not in running]
    conn.executemany("delete from nodes where id = ?", gone)
    return len(gone)


def _node(conn: Any, node_id: str) -> Node:
    return row_to_node(conn.execute(f"select {_COLUMNS} from nodes n where n.id = ?", (node_id,)).fetchone())


def remember_in_graph(
    conn: Any,
    label: str,
    name: str,
    properties: dict[str, Any],
    observation: str | None,
    now: str,
    reason: str = "",
    remove: tuple[str, ...] = (),
) -> tuple[str, bool]:
    """MERGE an entity in the graph only; the observation joins the node's `observations` list, and the
    values it replaces are kept in the property history with `reason`.

    Used when no note can be written (no vault, or another process holds the vault's lease).
    Returns (id, created)."""
    target = find_merge_target(conn, label, name)
    name = target.name if target is not None else name
    before = target.properties if target is not None and target.status != "stub" else None
    node_id, created = merge_entity(conn, label, name, properties, now)
    if before is not None:
        after = {k: v for k, v in {**before, **properties}.items() if k not in remove}
        if remove:
            conn.execute(
                "update nodes set properties = ? where id = ?",
                (json.dumps(after, sort_keys=True, default=str), node_id),
            )
        history_sql.record_changes(conn, node_id, before, after, now, source="tool", reason=reason)
    if observation and observation.strip():
        (raw,) = conn.execute("select properties from nodes where id = ?", (node_id,)).fetchone()
        merged = json.loads(raw or "{}")
        notes = merged.get(OBSERVATIONS_KEY)
        notes = notes if isinstance(notes, list) else []
        entry = f"{now[:10]}: {observation.strip()}"
        if entry not in notes:
            merged[OBSERVATIONS_KEY] = [*notes, entry]
            conn.execute(
                "update nodes set properties = ? where id = ?",
                (json.dumps(merged, sort_keys=True, default=str), node_id),
            )
    if remove:
        refresh_note_days(conn, [node_id])  # a `date:` taken away
    return node_id, created


def fold_graph_only_node(conn: Any, duplicate: str, into: str, now: str) -> bool:
    """A node made in the graph only (a follower's write for an entity it could not see a note for yet) turned
    out to be the entity of an existing note `into`: its relations move there and it goes, so the graph holds
    one entity, as a rebuild from the vault would. A node that once had a note is archived instead of deleted.
    False (nothing done) unless `duplicate` is live and without a note."""
    row = conn.execute("select path, status, checksum from nodes where id = ?", (duplicate,)).fetchone()
    # Only a live node without a note: an archived one is the record of a deleted note, and stays.
    if row is None or row["path"] is not None or row["status"] != "active" or duplicate == into:
        return False
    conn.execute(
        "update or ignore edges set source = ? where source = ? and valid_to is null and target != ?",
        (into, duplicate, into),
    )
    conn.execute(
        "update or ignore edges set target = ? where target = ? and valid_to is null and source != ?",
        (into, duplicate, into),
    )
    if row["checksum"] is not None:
        # It had a note once (a sync recorded its bytes): the node of a note the person deleted, made current
        # again by a follower's write before it could see the new note. It stays, archived, as the record of
        # that note (its history, its closed relations), as every deleted note's node does.
        conn.execute("update nodes set status = 'archived', updated_at = ? where id = ?", (now, duplicate))
        reresolve_node_links(conn, duplicate, now)
        return True
    names = node_key_set(conn, duplicate)
    conn.execute("delete from nodes where id = ?", (duplicate,))  # its leftover edges and keys go with it
    reresolve_links(conn, names, now)
    return True


def add_tool_edge(conn: Any, source: str, rel_type: str, target: str, now: str) -> bool:
    """Open a `tool` edge unless an open edge of that type already joins the two nodes; True when added.

    Tool edges are the graph-only form of a relation; note-derived edges never replace them."""
    exists = conn.execute(
        "select 1 from edges where source = ? and type = ? and target = ? and valid_to is null limit 1",
        (source, rel_type, target),
    ).fetchone()
    if exists is not None:
        return False
    conn.execute(
        "insert into edges (source, type, target, origin, valid_from, created_at) "
        "values (?, ?, ?, 'tool', ?, ?)",
        (source, rel_type, target, now, now),
    )
    return True


def has_open_edge(conn: Any, source: str, rel_type: str, target: str) -> bool:
    """True when an open edge of `rel_type` goes from `source` to `target` (any origin)."""
    row = conn.execute(
        "select 1 from edges where source = ? and type = ? and target = ? and valid_to is null limit 1",
        (source, rel_type, target),
    ).fetchone()
    return row is not None


def _edge_filter(as_of: str | None) -> tuple[str, list[str], str, list[str]]:
    """(edge condition, its parameters, node condition, its parameters) for open edges now, or for the
    edges and nodes that held on `as_of` (`nodes_sql.edge_valid_on`, `nodes_sql.valid_on`)."""
    if as_of is None:
        return "e.valid_to is null", [], "n.status != 'archived'", []
    edge, edge_params = edge_valid_on("e", as_of)
    node, params = valid_on("n", as_of)
    return edge, edge_params, node, params


def neighbourhood(
    conn: Any, node_id: str, hops: int, limit: int, as_of: str | None = None
) -> tuple[list[tuple[Node, str, str, int, str]], bool]:
    """Every open edge (or every edge that held on `as_of`) leading out to the entities within `hops` of
    `node_id`, nearest first.

    A node joined by several relations (USES and a wikilink) is listed once per relation type and direction,
    since that is what the model needs to see. Rows are (node, rel_type, direction, hops, via id); at most
    `limit` are returned, and the flag says whether more existed."""
    edge, edge_params, node, node_params = _edge_filter(as_of)
    seen = {node_id}
    frontier = [node_id]
    found: list[tuple[Node, str, str, int, str]] = []
    listed: set[tuple[str, str, str]] = set()
    for hop in range(1, hops + 1):
        reached: dict[str, None] = {}
        for current in frontier:
            rows = conn.execute(
                f"""
                select e.type as type, 'out' as direction, {_COLUMNS} from edges e join nodes n on n.id = e.target
                where e.source = ? and {edge} and {node}
                union
                select e.type, 'in' as direction, {_COLUMNS} from edges e join nodes n on n.id = e.source
                where e.target = ? and {edge} and {node}
                """,
                (current, *edge_params, *node_params, current, *edge_params, *node_params),
            ).fetchall()
            # Typed relations first: a wikilink (LINKS_TO) says less than USES or WORKS_ON.
            for row in sorted(rows, key=lambda r: (r["type"] == "LINKS_TO", r["type"], r["direction"])):
                key = (row["id"], row["type"], row["direction"])
                if row["id"] in seen or key in listed:
                    continue  # nearer already, the entity itself, or met through another node of this hop
                listed.add(key)
                found.append((row_to_node(row), row["type"], row["direction"], hop, current))
                reached[row["id"]] = None
                if len(found) > limit:
                    return found[:limit], True
        seen.update(reached)
        frontier = list(reached)
    return found, False
