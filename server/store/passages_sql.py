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
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlean

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
            [p for p in passages if p[3] is not None],
        )
    except sqlean.OperationalError as exc:
        if "contentless_delete" not in str(exc):
            raise
        # A database upgraded by a development build of migration 9, whose index was `contentless_delete`.
        conn.executemany("delete from chunks_fts where rowid = ?", [(p[0],) for p in passages])


def drop_passages(conn: Any, node_id: str) -> None:
    """Remove a node's passages: their index rows, their `chunks` rows and their stored texts (a purge)."""
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
    conn.executemany("insert or replace into temp.passage_stage values (?, ?, ?, ?)", rows)


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
