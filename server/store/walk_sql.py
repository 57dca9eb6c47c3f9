"""SQL of the anchor and graph-walk steps of search (synchronous; run on the DB thread)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from server.store.search_sql import NodeFilter

_CHUNK = 500  # parameters per statement, well under SQLite's limit


def named_nodes(conn: Any, phrases: Sequence[str], where: NodeFilter) -> list[tuple[str, str]]:
    """(phrase, node id) for every allowed node whose name, file name or alias is one of `phrases`
    (casefolded, as link keys are stored). A path key is not a name a person says, so it is left out."""
    found: list[tuple[str, str]] = []
    clause, params = where.sql()
    unique = list(dict.fromkeys(phrases))
    for start in range(0, len(unique), _CHUNK):
        part = unique[start : start + _CHUNK]
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"select distinct k.key, k.node_id from node_keys k cross join nodes n on n.id = k.node_id "
            f"where k.key in ({marks}) and k.kind != 'path' and {clause}",
            [*part, *params],
        )
        found.extend((r[0], r[1]) for r in rows)
    return found


def open_links(conn: Any, node_ids: Sequence[str], cap: int) -> list[tuple[str, str]]:
    """Up to `cap` open edges (source, target) touching `node_ids`, either direction, each pair once.
    Wikilinks, frontmatter links and relations made by tools all count: each says the two are related."""
    if not node_ids:
        return []
    pairs: dict[tuple[str, str], None] = {}
    ids = list(dict.fromkeys(node_ids))
    for start in range(0, len(ids), _CHUNK):
        part = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(part))
        for source, target in conn.execute(
            f"select source, target from edges where valid_to is null and source in ({marks}) "
            f"union select source, target from edges where valid_to is null and target in ({marks}) "
            f"limit ?",
            [*part, *part, cap - len(pairs)],
        ):
            if source != target:
                pairs[(source, target)] = None
        if len(pairs) >= cap:
            break
    return list(pairs)
