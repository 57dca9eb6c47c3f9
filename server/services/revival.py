"""How a write makes a superseded or archived entity current again; shared by remember and relate.

The README promises that remembering something about an archived entity makes it current again, and relating
it to another entity counts as remembering something about it. The revival is a write into the entity's note
like any other (the keys below), so it survives a rebuild from the vault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from server.runtime import Runtime
from server.store import Node, history_sql


@dataclass(frozen=True)
class Revival:
    set: dict[str, Any]  # frontmatter keys that make the entity current again
    remove: tuple[str, ...]  # and those to take out
    was: str  # what it was, for the message ("archived", "superseded since 2025-01-02")


async def plan_revival(rt: Runtime, target: Node, write: Mapping[str, Any]) -> Revival | None:
    """How a write makes a superseded or archived entity current again, or None when it is current.

    A superseded entity loses its `valid_to`; an entity archived by `engrama_forget` (its note says
    `status: archived`) gets back the status it had before, or none. A write that sets these keys itself
    decides instead."""
    set_: dict[str, Any] = {}
    remove: list[str] = []
    was: list[str] = []
    if target.valid_to is not None and "valid_to" not in write:
        remove.append("valid_to")
        was.append(f"superseded since {target.valid_to[:10]}")
    if target.status == "archived":
        was.append("archived")
        status = target.properties.get("status")
        if isinstance(status, str) and status.strip().casefold() == "archived" and "status" not in write:
            had, before = await rt.store.read(history_sql.previous_value, target.id, "status", "archived")
            if not had:
                remove.append("status")
            else:
                set_["status"] = before
    if not was:
        return None
    return Revival(set_, tuple(remove), " and ".join(was))
