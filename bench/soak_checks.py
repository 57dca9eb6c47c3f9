"""The soak's invariants, checked after quiescence against the vault on disk, the database and the servers.

Each check returns a list of violations (empty: the invariant held), each a sentence naming the note, the id
and the operations involved, so it can be followed in the operation log.
"""

from __future__ import annotations

import calendar
import os
import re
import sqlite3
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.soak_assistant import Related, Server, ToolWrite
from bench.soak_person import ID_LINE, TRASH, Note, Person, frontmatter_end
from vault_sync.paths import is_engrama_temp

NAME_KEYS = re.compile(r"^(name|title):[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def vault_notes(vault: Path) -> dict[str, str]:
    """Every note outside dot-folders: vault-relative path -> text."""
    notes = {}
    for folder, dirs, files in os.walk(vault):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".md") and not name.startswith("."):
                full = Path(folder) / name
                notes[full.relative_to(vault).as_posix()] = full.read_text(encoding="utf-8", errors="replace")
    return notes


def trash_texts(vault: Path) -> dict[str, str]:
    trash = vault / TRASH
    if not trash.is_dir():
        return {}
    return {f"{TRASH}/{p.name}": p.read_text(encoding="utf-8", errors="replace") for p in trash.glob("*.md")}


def note_name(path: str, text: str) -> str:
    """The entity name a note gives: `name:`, else `title:`, else the file name (DESIGN §3)."""
    head = text[: frontmatter_end(text)]
    found = dict((k, v.strip("\"'")) for k, v in NAME_KEYS.findall(head))
    return found.get("name") or found.get("title") or Path(path).stem


def temp_files(vault: Path) -> list[str]:
    return [p.relative_to(vault).as_posix() for p in vault.rglob("*") if is_engrama_temp(p.name)]


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute(sql, params).fetchall()


def integrity(db: Path) -> list[str]:
    found = query(db, "PRAGMA integrity_check")
    return [] if found == [("ok",)] else [f"{db.name}: {found[:5]}"]


_TOKENIZE = "tokenize = 'porter unicode61 remove_diacritics 2'"
_INDEXES = {"notes_fts": "name, body", "chunks_fts": "title, heading, text"}


def indexes_exact(db: Path) -> list[str]:
    """The full-text indexes hold exactly what the stored texts give: both rebuilt in memory from the stored
    passages (`server.store.passages_sql`: a passage's title, heading and text; a note's name and `note_text`)
    have the same words in the same rows, the same row lengths and the same totals bm25 reads. A row taken out
    with other words than it went in with, or a deleted row still counted, breaks it (`contentless_delete` did:
    every edit of a note counted it once more)."""
    import sqlean

    from server.store import passages_sql

    conn = sqlean.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        conn.execute("attach database ':memory:' as fresh")
        for table, columns in _INDEXES.items():
            conn.execute(
                f"create virtual table fresh.{table} using fts5({columns}, content = '', {_TOKENIZE})"
            )
        notes = conn.execute(
            "select doc, node_id, name from main.note_docs where name is not null"
        ).fetchall()
        bodies = passages_sql.stored_note_texts(conn, [node_id for _, node_id, _ in notes])
        conn.executemany(
            "insert into fresh.notes_fts (rowid, name, body) values (?, ?, ?)",
            [(doc, name, bodies[node_id]) for doc, node_id, name in notes],
        )
        chunks = conn.execute("select id, node_id, ordinal, title, heading from main.chunks").fetchall()
        texts = passages_sql.passages_by_note(conn, sorted({row[1] for row in chunks}))
        conn.executemany(
            "insert into fresh.chunks_fts (rowid, title, heading, text) values (?, ?, ?, ?)",
            [(i, title, heading, texts.get(node, {}).get(o, "")) for i, node, o, title, heading in chunks],
        )
        problems = []
        for table in _INDEXES:
            for schema in ("main", "fresh"):
                conn.execute(
                    f"create virtual table temp.{schema}_{table}_words using fts5vocab({schema}, {table}, 'instance')"
                )
            differ = (
                conn.execute(
                    f"select count(*) from (select * from temp.main_{table}_words except "
                    f"select * from temp.fresh_{table}_words)"
                ).fetchone()[0]
                + conn.execute(
                    f"select count(*) from (select * from temp.fresh_{table}_words except "
                    f"select * from temp.main_{table}_words)"
                ).fetchone()[0]
            )
            if differ:
                problems.append(f"{table}: {differ} word positions differ from the stored texts'")
            sizes = [
                conn.execute(f"select id, sz from {schema}.{table}_docsize order by id").fetchall()
                for schema in ("main", "fresh")
            ]
            if sizes[0] != sizes[1]:
                problems.append(
                    f"{table}: row lengths differ ({len(sizes[0])} rows, {len(sizes[1])} expected)"
                )
            totals = [
                conn.execute(f"select block from {schema}.{table}_data where id = 1").fetchone()
                for schema in ("main", "fresh")
            ]
            if totals[0] != totals[1]:
                problems.append(f"{table}: bm25's totals (row count, lengths) differ from the rows'")
        return problems
    finally:
        conn.close()


def one_id_per_note(notes: dict[str, str]) -> list[str]:
    problems, owners = [], defaultdict(list)
    for path, text in notes.items():
        ids = ID_LINE.findall(text)
        if len(ids) != 1:
            problems.append(f"{path} has {len(ids)} engrama_id lines {ids}")
        for found in set(ids):
            owners[found].append(path)
    problems += [f"id {i} is on {len(paths)} notes: {paths}" for i, paths in owners.items() if len(paths) > 1]
    return problems


def ids_kept(person: Person, notes: dict[str, str]) -> list[str]:
    """A note the person still has kept the one id it ever had (tracked by its key across renames/moves)."""
    problems = [
        f.detail for f in person.record.findings if f.invariant == "no id changed on a note that still exists"
    ]
    for note in person.notes.values():
        if note.state != "live" or note.path not in notes:
            continue
        final = ID_LINE.findall(notes[note.path])[:1]
        seen = list(dict.fromkeys(note.ids + final))
        if len(seen) > 1 and not any(note.key in p.split()[0] for p in problems):
            problems.append(f"{note.key} {note.path} had ids {seen} (ops on it {note.ops[-8:]})")
    return problems


# Tools that write notes (approve and reflect write the records of insight decisions under Insights/).
WRITE_TOOLS = {
    "engrama_remember",
    "engrama_relate",
    "engrama_forget",
    "engrama_write_insight_to_vault",
    "engrama_approve_insight",
    "engrama_reflect",
}


def gap_races(person: Person, note: Note) -> list[str]:
    """Tool writes that ran while an in-place save of the note had truncated it (the likely cause of a loss).
    A follower's write is queued and written by the holder within about a second, so it counts from 2 s
    before the truncation."""
    found = []
    for since, until, path in note.gaps:
        for call in person.record.calls:
            queued = "queued" in str(call.result.get("message", ""))
            if call.tool not in WRITE_TOOLS or not since - (2.0 if queued else 0.5) <= call.started <= until:
                continue
            where = {call.result.get("path"), call.result.get("note_path"), *call.result.get("written", [])}
            named = Path(path).stem in (call.args.get("name"), call.args.get("source"))
            records = call.tool in ("engrama_approve_insight", "engrama_reflect") and path.startswith(
                "Insights/"
            )
            if path in where or named or records:
                args = {
                    k: v
                    for k, v in call.args.items()
                    if k in ("label", "name", "source", "rel_type", "target")
                }
                found.append(
                    f"{call.actor} {call.tool}({args}) at {call.started:.2f}s (op {call.seq}) while an in-place "
                    f"save had truncated {path} ({since:.2f}-{until:.2f}s)"
                )
    return found


def lines_kept(person: Person, notes: dict[str, str], trash: dict[str, str]) -> list[str]:
    problems = []
    for note in person.notes.values():
        races = gap_races(person, note) if note.lost else []
        if note.lost:
            problems.append(
                f"{note.key} {note.path} lost {len(note.lost)} lines {note.lost[:3]} (ops {note.ops[-8:]})"
                + (f"; {'; '.join(races[:3])}" if races else "")
            )
        if note.state == "deleted" or not note.lines:
            continue
        text = notes.get(note.path) if note.state == "live" else trash.get(note.path)
        if text is None:
            problems.append(
                f"{note.key}: {note.path} is not in the vault ({note.state}; ops {note.ops[-8:]})"
            )
            continue
        present = set(text.splitlines())
        missing = [line for line in note.lines if line not in present]
        if missing:
            races = gap_races(person, note)
            problems.append(
                f"{note.key} {note.path} misses {len(missing)} lines {missing[:3]} (ops {note.ops[-8:]})"
                + (f"; {'; '.join(races[:3])}" if races else "")
            )
    return problems


def duplicates(db: Path, person: Person, notes: dict[str, str]) -> list[str]:
    """Two active nodes of one label+name, unless the person made them as two notes (at most one by a tool)."""
    by_person = {n.path for n in person.live() if n.origin == "person"}
    groups: dict[tuple[str, str], list[tuple[str, str | None]]] = defaultdict(list)
    # Insights are left out: two insights may share a title (the same pattern about two same-named entities)
    # and are told apart by their insight_key, not their name.
    for node_id, label, name, path in query(
        db, "select id, label, name, path from nodes where status = 'active' and label != 'Insight'"
    ):
        groups[(label, name.casefold())].append((node_id, path))
    problems = []
    for (label, name), members in groups.items():
        if len(members) < 2:
            continue
        files = [p for _, p in members if p in notes]
        by_tool = [p for p in files if p not in by_person]
        if len(files) < len(members) or len(by_tool) > 1:
            problems.append(f"{label} {name!r}: {len(members)} active nodes {members}")
    return problems


def nodes_match_notes(db: Path, notes: dict[str, str]) -> list[str]:
    """Each note has a node at its path, with the id the note carries."""
    at_path = dict(query(db, "select path, id from nodes where path is not null and status != 'stub'"))
    problems = []
    for path, text in notes.items():
        ids = ID_LINE.findall(text)
        if path not in at_path:
            problems.append(f"{path}: no node at this path")
        elif ids and at_path[path] != ids[0]:
            problems.append(f"{path}: node {at_path[path]} but the note says {ids[0]}")
    return problems


def deleted_archived(db: Path, person: Person, notes: dict[str, str]) -> list[str]:
    live_ids = {i for text in notes.values() for i in ID_LINE.findall(text)}
    status = dict(query(db, "select id, status from nodes"))
    problems = []
    for note in person.notes.values():
        if note.state not in ("deleted", "trashed") or not note.ids or note.ids[-1] in live_ids:
            continue
        found = status.get(note.ids[-1])
        if found != "archived":
            problems.append(
                f"{note.key} ({note.state}, last at {note.path}) id {note.ids[-1]}: node is {found or 'gone'}"
            )
    return problems


def writes_reached_vault(writes: list[ToolWrite], person: Person, vault: Path) -> list[str]:
    """Each observation an assistant was told was remembered is in a note (or the note went with the person's
    own delete, or the person's editor saved over the note within a second of the write)."""
    everything = "\n".join([*vault_notes(vault).values(), *trash_texts(vault).values()])
    problems, excused = [], {"deleted by the person": 0, "saved over by the person": 0}
    for write in writes:
        if write.token in everything:
            continue
        if _deleted_by_person(person, write):
            excused["deleted by the person"] += 1
            continue
        if _saved_over(person, write):
            excused["saved over by the person"] += 1
            continue
        problems.append(
            f"{write.actor}@{write.server} op {write.seq} at {write.t:.1f}s: {write.token!r} "
            f"(node {write.node_id}, {write.path or 'no path'}) is in no note"
        )
    person.record.stats["tool observations"] = {"checked": len(writes), "missing but excused": excused}
    return problems


def _written_to(person: Person, write: ToolWrite) -> list[Note]:
    """The person's notes the write went to: by the id they carried, or by where they were at the time. A
    write a follower queued (no path yet) may land in a note the holder creates afterwards under a fresh id
    (the entity's earlier note was deleted for good), or in the note the person had just made under the
    entity's name (the holder folds the follower's node into that note's): such a note counts too."""
    return [
        n
        for n in person.notes.values()
        if write.node_id in n.ids
        or (write.path and n.path_at(write.t) == write.path)
        or (not write.path and _made_for(n, write))
    ]


def _made_for(note: Note, write: ToolWrite) -> bool:
    """`note` was created by a tool after `write` under the entity's name, or bore that name when the write
    was made (the person's own note of the entity, not yet read by the server that queued the write)."""
    if not write.name:
        return False
    first_seen = note.paths[0][0] if note.paths else 0.0
    named = Path(note.paths[0][1] if note.paths else note.path).stem.casefold() == write.name.casefold()
    if note.origin == "tool" and first_seen >= write.t and named:
        return True
    return first_seen <= write.t and Path(note.path_at(write.t)).stem.casefold() == write.name.casefold()


def _deleted_by_person(person: Person, write: ToolWrite) -> bool:
    return any(n.state == "deleted" for n in _written_to(person, write))


def _saved_over(person: Person, write: ToolWrite) -> bool:
    """The person's editor saved the note within a moment of the write (their bytes win, by design)."""
    times = person.record.times
    return any(-0.3 < times[seq] - write.t < 0.6 for n in _written_to(person, write) for seq in n.ops)


async def findable(server: Server, notes: dict[str, str]) -> list[str]:
    """engrama_search (or engrama_context) by the note's name returns the note's path."""
    problems = []
    for path, text in sorted(notes.items()):
        name = note_name(path, text)
        found, error = await server.call(
            "engrama_search", {"query": name, "limit": 50, "include_archived": True}
        )
        paths = {r.get("path") for r in (found or {}).get("results", [])}
        if path in paths:
            continue
        around, error2 = await server.call("engrama_context", {"name": name})
        if around is not None:
            paths |= {around["node"].get("path")} | {e.get("path") for e in around.get("also_named", [])}
        if path not in paths:
            problems.append(
                f"{path} ({name!r}) not found: search {error or sorted(map(str, paths))[:4]}, context {error2}"
            )
    return problems


def entities(db: Path, notes: dict[str, str]) -> dict[str, tuple[Any, ...]]:
    rows = query(db, "select id, label, name, path, status from nodes where path is not null")
    return {r[0]: r[1:] for r in rows if r[3] in notes}


def relations(db: Path, ids: set[str]) -> set[tuple[str, str, str]]:
    rows = query(
        db,
        "select e.source, e.type, lower(t.name) from edges e join nodes t on t.id = e.target "
        "where e.valid_to is null and e.type != 'LINKS_TO'",
    )
    return {r for r in rows if r[0] in ids}


def relations_made_kept(
    related: list[Related], person: Person, live: Path, rebuilt: Path, notes: dict[str, str]
) -> list[str]:
    """Each relation an assistant made, between two entities that still have notes, is in the rebuilt graph
    between the same two entities (a stub target, which has no note, is matched by name) -- unless the person
    renamed or moved the target afterwards (without Obsidian's link update the link then means another note),
    or a note of the target's name appeared after the relation was made and the link by name now means that
    one (the vault's resolution; whether the live graph agrees with a rebuild is "the rebuild gives the same
    graph"). A relation written so that it led elsewhere from the start is still a violation."""
    times = person.record.times
    moves = {(i, t) for n in person.notes.values() for i in n.ids for t, _ in n.paths[1:]}
    paths = {r[0]: r[1] for r in query(rebuilt, "select id, path from nodes where path is not null")}
    with_notes = {i for i, p in paths.items() if p in notes}
    targets = dict(query(live, "select id, path from nodes where path is not null"))
    appeared = {  # when engrama first saw each node (UTC seconds), from the live graph
        i: calendar.timegm(time.strptime(c, "%Y-%m-%dT%H:%M:%SZ"))
        for i, c in query(live, "select id, created_at from nodes")
    }

    def wall(seq: int) -> float:
        return person.record.started_wall + times[seq] - 1.0  # created_at has whole seconds

    stubs = dict(query(live, "select id, lower(name) from nodes where status = 'stub'"))
    edges = query(
        rebuilt,
        "select e.source, e.type, e.target, lower(t.name) from edges e join nodes t on t.id = e.target "
        "where e.valid_to is null",
    )
    by_id = {(s, r, t) for s, r, t, _ in edges}
    by_name = {(s, r, n) for s, r, _, n in edges}
    problems = []
    for made in related:
        if made.source_id not in with_notes or (
            made.target_id not in with_notes and made.target_id not in stubs
        ):
            continue  # the person deleted one end (or the stub got a note and an id of its own)
        if any(i == made.target_id and t > times[made.seq] - 1.0 for i, t in moves):
            continue  # the person renamed or moved the target since
        if (made.source_id, made.rel_type, made.target_id) in by_id:
            continue
        if made.target_id in stubs and (made.source_id, made.rel_type, stubs[made.target_id]) in by_name:
            continue
        if any(
            appeared.get(t, 0.0) > wall(made.seq)
            for s, r, t, n in edges
            if (s, r) == (made.source_id, made.rel_type) and n == made.target_name.casefold()
        ):
            continue  # a note of the target's name appeared since, and the link by name now means it
        if not _states_link(notes[paths[made.source_id]], made.target_name, targets.get(made.target_id)):
            continue  # the person's editor saved over the note (its buffer predates the write), or removed it
        instead = sorted(n for s, r, _, n in edges if (s, r) == (made.source_id, made.rel_type))
        problems.append(
            f"{made.actor} op {made.seq}: {made.source_id} -{made.rel_type}-> {made.target_id} is not in the rebuilt "
            f"graph; the source's {made.rel_type} there: {instead[:6]}"
        )
    return problems


def _states_link(text: str, name: str, path: str | None) -> bool:
    """True when the note still links the target, by name or by path (the relation is in the vault)."""
    folded = text.casefold()
    forms = [name] + ([path[:-3] if path.lower().endswith(".md") else path] if path else [])
    return any(f"[[{form.casefold()}" in folded for form in forms if form)


def decisions(db: Path) -> dict[str, str]:
    return dict(query(db, "select key, status from insights where status != 'pending'"))


def compare_rebuild(before: Path, after: Path, notes: dict[str, str]) -> list[str]:
    """Deleting the database and syncing again gives the same entities, relations and insight decisions."""
    old, new = entities(before, notes), entities(after, notes)
    problems = [f"{i} {old[i]} is gone after the rebuild" for i in old.keys() - new.keys()]
    problems += [f"{i} {new[i]} is new after the rebuild" for i in new.keys() - old.keys()]
    problems += [
        f"{i} was {old[i]}, is {new[i]} after the rebuild"
        for i in old.keys() & new.keys()
        if old[i] != new[i]
    ]
    graph_only = query(before, "select id, label, name from nodes where status = 'active' and path is null")
    problems += [f"{r} lived in the graph only (no note), so a rebuild loses it" for r in graph_only]
    was, now = relations(before, set(old)), relations(after, set(new))
    for source, rel, target in sorted(was - now):
        instead = sorted(t for s, r, t in now - was if (s, r) == (source, rel))
        problems.append(
            f"relation {old[source][2]} -{rel}-> {target!r} ({source}) is gone after the rebuild"
            + (f"; it has -{rel}-> {instead} instead" if instead else "")
        )
    return problems


def decisions_kept(before: Path, after: Path) -> list[str]:
    """Approved and dismissed insights come back from their records in the vault (after a reflect)."""
    old, new = decisions(before), decisions(after)
    return [
        f"insight {k} was {v}, is {new.get(k, 'gone')} after the rebuild"
        for k, v in old.items()
        if new.get(k) != v
    ]


def untouched(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changed = [p for p in before.keys() | after.keys() if before.get(p) != after.get(p)]
    return [f"the rebuild changed {p}" for p in sorted(changed)]
