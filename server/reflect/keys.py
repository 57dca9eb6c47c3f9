"""The stable identity of an insight: its pattern plus the sorted ids of the entities it is about.

The key is `<pattern>/<16 hex digits>`, the digits being a sha256 of the pattern and the sorted anchor ids.
Node ids are the notes' `engrama_id`s, so the key survives deleting and rebuilding the database, and it stays
short enough to sit in a note's HTML comment and in one line of the dismissed list. The chat-facing id is
derived from the key alone (`ins-` + 12 hex digits), so an insight keeps its id across rebuilds too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

KEY_PATTERN = re.compile(r"^[a-z_]+/[0-9a-f]{16}$")


def insight_key(pattern: str, anchors: Iterable[str]) -> str:
    """The identity of an insight of `pattern` about `anchors` (order and duplicates do not matter)."""
    material = "\n".join([pattern, *sorted(set(anchors))])
    return f"{pattern}/{hashlib.sha256(material.encode('utf-8')).hexdigest()[:16]}"


def insight_id(key: str) -> str:
    """The short id the person and the assistant use for the insight with `key`."""
    return "ins-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]
