# pyright: reportAttributeAccessIssue=false
# (sqlean re-exports its names from a compiled module without type stubs, so pyright cannot see them.)
"""Where the passages' text lives: once per note, packed (synchronous; run on the DB thread).

A note's passages overlap (consecutive windows share trailing lines, `vault_sync.chunking`), so storing each
passage's text in its `chunks` row kept most of the body twice, and the FTS index a third time (issue 15:
the database was 3.7x the vault). Now:

- `chunks` keeps one small row per passage (id, node, ordinal, title, heading, embedding state): the ids the
  vectors and the full-text rows are keyed by;
- `note_passages` keeps the texts of a note's passages in one zlib-compressed JSON object {ordinal: text}.
  Compressing them together stores the overlapping lines once (they fall inside zlib's 32 KiB window) and
  the words at about half their size; one note's pack is a few KiB and unpacks in microseconds. The pack is
  stored in parts of at most `PART_BYTES`: a blob longer than a page goes to a chain of overflow pages whose
  last page is on average half empty, which on notes of a few KiB wasted more than the pack itself
  (measured with `dbstat`: 4.4 MiB unused for 3.1 MiB of packs on 2,000 small notes);
- `chunks_fts` is contentless: it holds the index only, fed with the text at insert time (`stage_passages`,
  then `sync_sql.index_new_chunks`). A passage leaves it through FTS5's 'delete' command given the text it
  was indexed with (`unindex_passages`), which is what keeps bm25's statistics exact: a `contentless_delete`
  table drops the row but never its tokens from the totals (row count and average length grow with every
  edit; measured on SQLite 3.50), so rankings would drift as notes are edited. bm25 reads only the index, so
  search ranks exactly as it did over the external-content table.
- `notes_fts`, the whole-note index (one row per note: name, body), is contentless too, and holds for a note
  what its stored passages say: each passage's text less the lines it repeats from the one before, under
  its headings (`note_text`). So a note's row leaves the index the same way, through 'delete' with the text
  rebuilt from what is stored (`unindex_notes`), and bm25's statistics stay exact here too. Until
  migration 10 it was `contentless_delete` over the raw body: every edit counted the note once more in the
  row count and total length, and whole-note rankings drifted as a vault was used (`bench/locomo.py
  --edits`). The rule that keeps it exact: a note's row is taken out *before* its stored passages change
  (`sync_sql.replace_chunks`, `drop_passages`); `note_docs.name` is null while a note has no row.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlean

from server.store.cjk import has_cjk, spaced
from vault_sync.chunking import HEADING_SEPARATOR, repeated_prefix

log = logging.getLogger(__name__)

# zlib level 6 (the default): levels 7-9 saved under 1% on notes and cost more time on a first sync.
LEVEL = 6
# Parts of a quarter page (4 KiB pages): rows this size fill a page to within ~1/8 on average, and a note of
# a few KiB needs only a few rows (each costs an index entry of ~50 bytes).
PART_BYTES = 1024


def pack(texts: Mapping[int, str]) -> bytes:
    """A note's passage texts {ordinal: text} as one compressed blob."""
    return pack_json(json.dumps({str(k): v for k, v in texts.items()}, ensure_ascii=False))


def pack_json(document: str) -> bytes:
    """Compress a JSON object {ordinal: text} (also the SQL function `engrama_pack` of migration 9)."""
    return zlib.compress(document.encode("utf-8"), LEVEL)


def unpack(blob: bytes | None) -> dict[int, str]:
    if not blob:
        return {}
    return {int(k): v for k, v in json.loads(zlib.decompress(blob).decode("utf-8")).items()}


# VACUUM when at least this share of the file is free pages: migration 9 frees ~60% of an old database
# (its passage texts); ordinary churn leaves a few percent, which SQLite reuses as the database grows.
COMPACT_FREE_SHARE = 0.25


def compact_after_upgrade(conn: Any) -> None:
    """Give the pages migration 9 freed back to the disk (VACUUM rewrites the file; outside any transaction).

    Only when a large share of the file is free, so it runs once after the upgrade and not on every open.
    Another process holding the file open makes it fail with SQLITE_BUSY: the space then stays free inside
    the file (reused as it grows) and the next open tries again."""
    free = conn.execute("pragma freelist_count").fetchone()[0]
    pages = conn.execute("pragma page_count").fetchone()[0]
    if pages == 0 or free < COMPACT_FREE_SHARE * pages:
        return
    try:
        conn.execute("vacuum")
    except sqlean.OperationalError as exc:
        log.info(
            "could not compact the database after its upgrade (%s); it will be tried at the next start", exc
        )


def register_functions(conn: Any) -> None:
    """SQL functions the migrations use (`engrama_pack(json_object_text)`)."""
    conn.create_function("engrama_pack", 1, pack_json, deterministic=True)


def store_passages(conn: Any, node_id: str, texts: Mapping[int, str]) -> None:
    """Replace the stored texts of `node_id`'s passages (none: its rows go)."""
    conn.execute("delete from note_passages where node_id = ?", (node_id,))
    if texts:
        blob = pack(texts)
        conn.executemany(
            "insert into note_passages (node_id, part, packed) values (?, ?, ?)",
            [
                (node_id, i, blob[at : at + PART_BYTES])
                for i, at in enumerate(range(0, len(blob), PART_BYTES))
            ],
        )


def passages_by_note(conn: Any, node_ids: Iterable[str]) -> dict[str, dict[int, str]]:
    """{node_id: {ordinal: text}} for the given notes (notes without passages are left out)."""
    unique = list(dict.fromkeys(node_ids))
    found: dict[str, dict[int, str]] = {}
    for start in range(0, len(unique), 500):  # stay under SQLite's host-parameter limit
        part = unique[start : start + 500]
        marks = ",".join("?" * len(part))
        parts: dict[str, list[bytes]] = {}
        for node_id, piece in conn.execute(
            f"select node_id, packed from note_passages where node_id in ({marks}) order by node_id, part",
            part,
        ):
            parts.setdefault(node_id, []).append(piece)
        found.update((node_id, unpack(b"".join(pieces))) for node_id, pieces in parts.items())
    return found


def chunk_texts(conn: Any, chunk_ids: Sequence[int]) -> dict[int, str]:
    """{chunk_id: text} for the given passages (ids no longer stored are left out); each note unpacked once."""
    places: list[tuple[int, str, int]] = []
    unique = list(dict.fromkeys(chunk_ids))
    for start in range(0, len(unique), 500):
        part = unique[start : start + 500]
        marks = ",".join("?" * len(part))
        places.extend(
            tuple(r)
            for r in conn.execute(f"select id, node_id, ordinal from chunks where id in ({marks})", part)
        )
    texts = passages_by_note(conn, {node_id for _, node_id, _ in places})
    return {
        chunk_id: texts[node_id][ordinal]
        for chunk_id, node_id, ordinal in places
        if ordinal in texts.get(node_id, {})
    }


def unindex_passages(conn: Any, passages: Sequence[tuple[int, str, str, str | None]]) -> None:
    """Take passages (id, title, heading, text) out of `chunks_fts`, before their `chunks` rows go. A passage
    whose text is unknown (None) cannot be taken out: its index row stays, unseen (searches join `chunks`)."""
    try:
        conn.executemany(
            "insert into chunks_fts (chunks_fts, rowid, title, heading, text) values ('delete', ?, ?, ?, ?)",
            [(p[0], spaced(p[1]), spaced(p[2]), spaced(p[3])) for p in passages if p[3] is not None],
        )
    except sqlean.OperationalError as exc:
        if "contentless_delete" not in str(exc):
            raise
        # A database upgraded by a development build of migration 9, whose index was `contentless_delete`.
        conn.executemany("delete from chunks_fts where rowid = ?", [(p[0],) for p in passages])


def drop_passages(conn: Any, node_id: str) -> None:
    """Remove a node's passages: their index rows, their `chunks` rows and their stored texts, and the node's
    whole-note row (a purge)."""
    unindex_notes(conn, [node_id])
    rows = conn.execute(
        "select id, ordinal, title, heading from chunks where node_id = ?", (node_id,)
    ).fetchall()
    texts = passages_by_note(conn, [node_id]).get(node_id, {})
    unindex_passages(conn, [(r[0], r[2], r[3], texts.get(r[1])) for r in rows])
    conn.execute("delete from chunks where node_id = ?", (node_id,))
    conn.execute("delete from note_passages where node_id = ?", (node_id,))


def stage_passages(conn: Any, rows: Sequence[tuple[int, str, str, str]]) -> None:
    """Hold new passages (id, title, heading, text) until `sync_sql.index_new_chunks` indexes them in one
    set-based statement (FTS5 indexes an INSERT ... SELECT of many rows about twice as fast as row by row)."""
    conn.execute(
        "create temp table if not exists passage_stage "
        "(id integer primary key, title text, heading text, text text)"
    )
    conn.executemany(
        "insert or replace into temp.passage_stage values (?, ?, ?, ?)",
        [(i, spaced(title), spaced(heading), spaced(text)) for i, title, heading, text in rows],
    )


def index_staged(conn: Any) -> None:
    """Add the staged passages to `chunks_fts` and empty the stage."""
    if conn.execute("select 1 from temp.sqlite_master where name = 'passage_stage'").fetchone() is None:
        return
    # Only passages still stored: one staged and deleted again in the same unit of work is not indexed.
    conn.execute(
        "insert into chunks_fts (rowid, title, heading, text) "
        "select s.id, s.title, s.heading, s.text from temp.passage_stage s join chunks c on c.id = s.id "
        "order by s.id"
    )
    conn.execute("delete from temp.passage_stage")


# --- the whole-note rows (`notes_fts`) ------------------------------------------------------------------------


def note_text(passages: Iterable[tuple[str, str, int]]) -> str:
    """The body a note's whole-note row holds, from its passages (heading path, text, repeats) in order: each
    heading once where its section begins, and what each passage adds to the one before (`Chunk.repeats`),
    so every line of the note counts once, as in the note itself. A pure function of what is stored, so the
    row can be taken out of the contentless index with exactly the words it went in with."""
    parts: list[str] = []
    previous: list[str] = []
    for heading, text, repeats in passages:
        path = heading.split(HEADING_SEPARATOR) if heading else []
        if path != previous:
            shared = 0
            while shared < min(len(path), len(previous)) and path[shared] == previous[shared]:
                shared += 1
            parts.extend(path[shared:])
            previous = path
        if added := text[repeats:]:
            parts.append(added)
    return "\n".join(parts)


def stored_note_texts(conn: Any, node_ids: Sequence[str]) -> dict[str, str]:
    """{node_id: note_text of its stored passages} ("" for a note without passages)."""
    texts = passages_by_note(conn, node_ids)
    found: dict[str, list[tuple[str, str, int]]] = {node_id: [] for node_id in node_ids}
    for start in range(0, len(node_ids), 500):
        part = list(node_ids[start : start + 500])
        marks = ",".join("?" * len(part))
        for node_id, ordinal, heading, repeats in conn.execute(
            f"select node_id, ordinal, heading, repeats from chunks where node_id in ({marks}) "
            "order by node_id, ordinal",
            part,
        ):
            if (text := texts.get(node_id, {}).get(ordinal)) is not None:
                found[node_id].append((heading, text, repeats))
    return {node_id: note_text(passages) for node_id, passages in found.items()}


def unindex_notes(conn: Any, node_ids: Sequence[str], bodies: Mapping[str, str] | None = None) -> None:
    """Take the whole-note rows of `node_ids` out of `notes_fts` with the words they were indexed with: the
    name recorded in `note_docs` and `note_text` of the passages stored now (given in `bodies` by a caller that
    holds them, else read). Call it before a note's stored passages change; a note without a row
    (`note_docs.name` null) is skipped."""
    if not node_ids:
        return
    rows: list[tuple[int, str, str]] = []
    for start in range(0, len(node_ids), 500):
        part = list(node_ids[start : start + 500])
        marks = ",".join("?" * len(part))
        rows.extend(
            tuple(r)
            for r in conn.execute(
                f"select doc, node_id, name from note_docs where node_id in ({marks}) and name is not null",
                part,
            )
        )
    if not rows:
        return
    known = bodies or {}
    texts = {**known, **stored_note_texts(conn, [n for _, n, _ in rows if n not in known])}
    conn.executemany(
        "insert into notes_fts (notes_fts, rowid, name, body) values ('delete', ?, ?, ?)",
        [(doc, spaced(name), spaced(texts[node_id])) for doc, node_id, name in rows],
    )
    conn.executemany("update note_docs set name = null where doc = ?", [(doc,) for doc, _, _ in rows])


def fill_note_rows(conn: Any) -> None:
    """Migration 10's step: record each stored passage's `repeats` (recovered from the texts,
    `vault_sync.chunking.repeated_prefix`) and index every note's whole-note row from its stored passages."""
    rows = conn.execute(
        "select d.doc, d.node_id, n.name from note_docs d join nodes n on n.id = d.node_id"
    ).fetchall()
    for start in range(0, len(rows), 500):
        part = rows[start : start + 500]
        texts = passages_by_note(conn, [r[1] for r in part])
        marks = ",".join("?" * len(part))
        passages: dict[str, list[tuple[str, str, int]]] = {r[1]: [] for r in part}
        repeats: list[tuple[int, int]] = []
        for chunk_id, node_id, ordinal, heading in conn.execute(
            f"select id, node_id, ordinal, heading from chunks where node_id in ({marks}) "
            "order by node_id, ordinal",
            [r[1] for r in part],
        ).fetchall():
            if (text := texts.get(node_id, {}).get(ordinal)) is None:
                continue  # as `stored_note_texts` reads them: a passage without a stored text adds nothing
            before = passages[node_id][-1] if passages[node_id] else None
            size = repeated_prefix(before[1], text) if before and before[0] == heading else 0
            if size:
                repeats.append((size, chunk_id))
            passages[node_id].append((heading, text, size))
        conn.executemany("update chunks set repeats = ? where id = ?", repeats)
        conn.executemany(
            "insert into notes_fts (rowid, name, body) values (?, ?, ?)",
            [(r[0], r[2], note_text(passages[r[1]])) for r in part],
        )
        conn.executemany("update note_docs set name = ? where doc = ?", [(r[2], r[0]) for r in part])


def respace_cjk_rows(conn: Any) -> None:
    """Migration 19's step: the index rows holding Chinese, Japanese or Korean text go out with the tokens they
    went in with (each run of such characters whole) and come back as the indexes now take them
    (`server.store.cjk.spaced`). Rows of other text are left as they are."""
    for part in _batches([r[0] for r in conn.execute("select node_id from note_docs order by node_id")]):
        texts = passages_by_note(conn, part)
        marks = ",".join("?" * len(part))
        passages = [
            (chunk_id, title, heading, text)
            for chunk_id, node_id, ordinal, title, heading in conn.execute(
                f"select id, node_id, ordinal, title, heading from chunks where node_id in ({marks})", part
            )
            if (text := texts.get(node_id, {}).get(ordinal)) is not None
            and (has_cjk(title) or has_cjk(heading) or has_cjk(text))
        ]
        conn.executemany(
            "insert into chunks_fts (chunks_fts, rowid, title, heading, text) values ('delete', ?, ?, ?, ?)",
            passages,
        )
        conn.executemany(
            "insert into chunks_fts (rowid, title, heading, text) values (?, ?, ?, ?)",
            [(i, spaced(title), spaced(heading), spaced(text)) for i, title, heading, text in passages],
        )
        rows = conn.execute(
            f"select doc, node_id, name from note_docs where node_id in ({marks}) and name is not null", part
        ).fetchall()
        bodies = stored_note_texts(conn, [r[1] for r in rows])
        notes = [(r[0], r[2], bodies[r[1]]) for r in rows if has_cjk(r[2]) or has_cjk(bodies[r[1]])]
        conn.executemany(
            "insert into notes_fts (notes_fts, rowid, name, body) values ('delete', ?, ?, ?)", notes
        )
        conn.executemany(
            "insert into notes_fts (rowid, name, body) values (?, ?, ?)",
            [(doc, spaced(name), spaced(body)) for doc, name, body in notes],
        )


def _batches(items: Sequence[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
