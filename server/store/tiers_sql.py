"""How many rows a full-text query would score, counted up to a cap (synchronous; run on the DB thread).

Counting reads only the index's lists of row ids (no bm25, no row lengths), and stops at `cap`: a query
whose words are in every note costs no more to count than one whose words are rare."""

from __future__ import annotations

from typing import Any

_TABLES = {"passages": "chunks_fts", "notes": "notes_fts"}


def match_count(conn: Any, index: str, match: str, cap: int) -> int:
    """Rows of the `index` ("passages" or "notes") matching `match`, counted up to `cap`."""
    table = _TABLES[index]
    sql = f"select count(*) from (select rowid from {table} where {table} match ? limit ?)"
    return int(conn.execute(sql, (match, cap)).fetchone()[0])
