"""SQL of search: the note-level full-text rows, and the reads a query needs (synchronous; run on the DB thread).

Two FTS5 indexes answer a query: `chunks_fts` (one row per passage: title, heading, text) and `notes_fts` (one
row per note: name, whole body). Both are contentless: the passages' texts are stored once per note
(`passages_sql`), and a note's whole-note body is made from them (`passages_sql.note_text`). Both return their
best rows by bm25 with column weights; the search service fuses them with the vector ranking. Scores come back as *higher is better* (FTS5's bm25 is negative).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from server.store import passages_sql
from server.store.cjk import spaced
from server.store.nodes_sql import moment_width, valid_on

# bm25 column weights. The title repeats on every passage and carries the note's name and date, so a title
# hit says more than a body hit; x4 on passages and x3 on notes were the best on LoCoMo (docs/search.md),
# and anything from 3 to 20 gave the same ranking there, so the exact value is not critical.
PASSAGE_WEIGHTS = (4.0, 2.0, 1.0)  # title, heading, text
NOTE_WEIGHTS = (3.0, 1.0)  # name, body


@dataclass(frozen=True)
class NodeFilter:
    """Which nodes a search may return (DESIGN.md section 5)."""

    label: str | None = None
    include_archived: bool = False  # archived nodes and stubs are hidden unless asked for
    as_of: str | None = None  # ISO date (whole day) or UTC timestamp: valid_from <= as_of <= valid_to

    def sql(self, alias: str = "n") -> tuple[str, list[Any]]:
        """A boolean SQL expression over the nodes table aliased `alias`, and its parameters."""
        parts, params = [], []
        if not self.include_archived and self.as_of is not None:
            # Looking back, a node archived since still counts: an archived node's last update is its archiving.
            parts.append(
                f"(+{alias}.status = 'active' or ({alias}.status = 'archived' "
                f"and substr({alias}.updated_at, 1, {moment_width(self.as_of)}) > ?))"
            )
            params.append(self.as_of)
        elif not self.include_archived:
            # The unary + keeps SQLite from answering through the status index (a scan of every active
            # node) where the node ids at hand make primary-key lookups the cheap plan.
            parts.append(f"+{alias}.status = 'active'")
        if self.label is not None:
            parts.append(f"{alias}.label = ?")
            params.append(self.label)
        if self.as_of is not None:
            clause, values = valid_on(alias, self.as_of)
            parts.append(clause)
            params.extend(values)
        return (" and ".join(parts) or "1"), params


@dataclass(frozen=True)
class NodeRow:
    """What a search result shows of a node."""

    id: str
    label: str
    name: str
    path: str | None
    status: str
    confidence: float
    updated_at: str | None


# --- indexing (called by sync_sql.apply_notes inside its transaction) -------------------------------------


def index_note_docs(conn: Any, docs: Sequence[tuple[str, str, str]]) -> None:
    """(Re)index the whole-note rows of `docs` = [(node_id, name, body)] with set-wide statements; `body` is
    `passages_sql.note_text` of the passages the note has now (stored in this unit of work).

    A row still in the index is taken out first (`passages_sql.unindex_notes`): that is a note whose stored
    passages did not change (its name did), since a change of passages takes the row out before it happens.
    FTS5 indexes one INSERT ... SELECT of many rows about twice as fast as the same rows inserted one by one,
    so the bodies are staged in a temp table first."""
    if not docs:
        return
    passages_sql.unindex_notes(conn, [node_id for node_id, _, _ in docs])
    conn.executemany(
        "insert into note_docs (node_id, name) values (?, ?) "
        "on conflict (node_id) do update set name = excluded.name",
        [(d[0], d[1]) for d in docs],
    )
    conn.execute(
        "create temp table if not exists note_stage (node_id text primary key, name text, body text)"
    )
    conn.executemany(
        "insert or replace into temp.note_stage values (?, ?, ?)",
        [(node_id, spaced(name), spaced(body)) for node_id, name, body in docs],
    )
    conn.execute(
        "insert into notes_fts (rowid, name, body) "
        "select d.doc, s.name, s.body from temp.note_stage s join note_docs d on d.node_id = s.node_id"
    )
    conn.execute("delete from temp.note_stage")


# --- reads -------------------------------------------------------------------------------------------------


class PassageHit(NamedTuple):
    """A passage found by bm25; `ordinal` is its place in the note (windows two apart share no line)."""

    chunk_id: int
    node_id: str
    score: float
    ordinal: int


def passage_hits(
    conn: Any, match: str, limit: int, where: NodeFilter, newest: int | None = None
) -> list[PassageHit]:
    """The best `limit` passages for `match` among allowed nodes (among the `newest` rows it finds, when
    given: the passages written last)."""
    weights = ", ".join(map(str, PASSAGE_WEIGHTS))
    ranked = _scored("chunks_fts", weights, newest)
    join = "join chunks c on c.id = f.rowid join nodes n on n.id = c.node_id"
    rows = _top_allowed(conn, ranked, join, "c.node_id, c.ordinal", match, limit, where)
    return [PassageHit(r[0], r[1], r[3], r[2]) for r in rows]


def note_hits(
    conn: Any, match: str, limit: int, where: NodeFilter, newest: int | None = None
) -> list[tuple[str, float]]:
    """The best `limit` notes for `match` by whole-note bm25 among allowed nodes: (node_id, score); among the
    `newest` rows it finds, when given."""
    weights = ", ".join(map(str, NOTE_WEIGHTS))
    ranked = _scored("notes_fts", weights, newest)
    join = "join note_docs d on d.doc = f.rowid join nodes n on n.id = d.node_id"
    return [(r[1], r[2]) for r in _top_allowed(conn, ranked, join, "d.node_id", match, limit, where)]


def _scored(table: str, weights: str, newest: int | None) -> str:
    """The FTS query giving (rowid, score) for a `match` parameter; with `newest`, only that many of its rows,
    the last written first (FTS5 walks its row ids backwards and stops, so only those rows are scored)."""
    ranked = f"select rowid, -bm25({table}, {weights}) as score from {table} where {table} match ?"
    if newest is None:
        return ranked
    return f"select rowid, score from ({ranked} order by rowid desc limit {int(newest)})"


def note_frequencies(conn: Any, terms: Sequence[str], cap: int) -> tuple[list[int], int]:
    """How many notes match each FTS5 term of `terms` (counted up to `cap`), and how many notes there are.

    A term is matched as the search will match it (stemmed by FTS5), against the note-level rows; counting
    stops at `cap`, so a common word costs no more than a rare one."""
    notes = conn.execute("select count(*) from note_docs").fetchone()[0]
    sql = "select count(*) from (select rowid from notes_fts where notes_fts match ? limit ?)"
    return [conn.execute(sql, (term, cap)).fetchone()[0] for term in terms], notes


def _top_allowed(
    conn: Any, ranked: str, join: str, node_cols: str, match: str, limit: int, where: NodeFilter
) -> list[tuple[Any, ...]]:
    """The top `limit` rows of the FTS query `ranked` whose node passes `where`: (rowid, node_id, [more
    columns of `node_cols`,] score).

    Why two ways: joining every match to its node before sorting costs ~4x on a large vault (thousands of
    matches per query), so the top rows are taken first and filtered after. That is exact when the filter
    removed nothing; when it did (archived notes, a label, a date) and too few rows are left, the query runs
    again with the filter applied to every match.
    """
    clause, params = where.sql()
    rows = conn.execute(
        f"select f.rowid, {node_cols}, f.score from ({ranked} order by score desc limit ?) f {join} "
        f"where {clause} order by f.score desc",
        [match, limit, *params],
    ).fetchall()
    if len(rows) < limit and _had_more(conn, ranked, match, limit):
        rows = conn.execute(
            f"select f.rowid, {node_cols}, f.score from ({ranked}) f {join} where {clause} "
            f"order by f.score desc limit ?",
            [match, *params, limit],
        ).fetchall()
    return [tuple(r) for r in rows]


def _had_more(conn: Any, ranked: str, match: str, limit: int) -> bool:
    """Whether the unfiltered query has more than the `limit` rows already looked at."""
    return conn.execute(f"select count(*) from ({ranked} limit ?)", [match, limit + 1]).fetchone()[0] > limit


def notes_matching(conn: Any, match: str, node_ids: Sequence[str]) -> set[str]:
    """Which of `node_ids` have a note-level row matching `match` (e.g. every name the question holds)."""
    if not node_ids:
        return set()
    marks = ",".join("?" * len(node_ids))
    rows = conn.execute(
        f"select d.node_id from note_docs d where d.node_id in ({marks}) "
        f"and d.doc in (select rowid from notes_fts where notes_fts match ?)",
        [*node_ids, match],
    )
    return {r[0] for r in rows}


def passages_of(conn: Any, node_ids: Sequence[str]) -> list[tuple[int, str, str]]:
    """Every passage of `node_ids` in note order: (chunk_id, node_id, text). For nodes that reached the
    results without a passage among the top hits: a restricted FTS query would still scan every match."""
    if not node_ids:
        return []
    marks = ",".join("?" * len(node_ids))
    rows = conn.execute(
        f"select id, node_id, ordinal from chunks where node_id in ({marks}) order by node_id, ordinal",
        list(node_ids),
    ).fetchall()
    texts = passages_sql.passages_by_note(conn, node_ids)
    return [(r[0], r[1], texts[r[1]][r[2]]) for r in rows if r[2] in texts.get(r[1], {})]


def passage_texts(conn: Any, chunk_ids: Sequence[int]) -> dict[int, str]:
    """{chunk_id: text} of the given passages."""
    if not chunk_ids:
        return {}
    return passages_sql.chunk_texts(conn, chunk_ids)


def node_rows(conn: Any, node_ids: Sequence[str], where: NodeFilter) -> dict[str, NodeRow]:
    """The allowed ones among `node_ids`, with what a result shows."""
    if not node_ids:
        return {}
    clause, params = where.sql()
    marks = ",".join("?" * len(node_ids))
    rows = conn.execute(
        f"select id, label, name, path, status, confidence, updated_at from nodes n "
        f"where id in ({marks}) and {clause}",
        [*node_ids, *params],
    )
    return {r[0]: NodeRow(*r) for r in rows}
