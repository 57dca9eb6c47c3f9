"""Helpers for the reflect tests: write real notes into a temporary vault and sync it into a real SQLite file.

Notes carry their `engrama_id` from the start, so the tests know every node's id without reading it back.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from server.reflect.service import reflect, surface_insights
from server.runtime import Runtime, open_runtime
from server.settings import build_settings

DAY = 86_400


class VaultBuilder:
    """Writes typed notes; `ids[name]` is the engrama_id of the note called `name`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ids: dict[str, str] = {}
        self.paths: dict[str, str] = {}

    def note(
        self,
        folder: str,
        name: str,
        label: str | None = None,
        *,
        status: str | None = None,
        relations: Mapping[str, Sequence[str]] | None = None,
        body: str = "",
        extra: Mapping[str, str] | None = None,
        age_days: float | None = None,
    ) -> str:
        node_id = str(uuid.uuid4())
        lines = ["---", f"engrama_id: {node_id}"]
        if label:
            lines.append(f"type: {label}")
        if status:
            lines.append(f"status: {status}")
        lines += [f"{key}: {value}" for key, value in (extra or {}).items()]
        if relations:
            lines.append("relations:")
            for rel, targets in relations.items():
                lines.append(f"  {rel}: [{', '.join(repr(f'[[{t}]]') for t in targets)}]")
        lines += ["---", body or f"Notes about {name}."]
        rel_path = f"{folder}/{name}.md"
        path = self.root / rel_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        if age_days is not None:
            then = time.time() - age_days * DAY
            os.utime(path, (then, then))
        self.ids[name] = node_id
        self.paths[name] = rel_path
        return node_id

    def read(self, name: str) -> bytes:
        return (self.root / self.paths[name]).read_bytes()


def projects_sharing(b: VaultBuilder, techs: Sequence[str]) -> None:
    """Notes for `techs` and two projects, Alpha and Beta, that both use every one: one shared-technology
    insight per technology."""
    for tech in techs:
        b.note("Technologies", tech, "Technology")
    b.note("Projects", "Alpha", "Project", relations={"USES": list(techs)})
    b.note("Projects", "Beta", "Project", relations={"USES": list(techs)})


@asynccontextmanager
async def synced(vault: Path, db_path: Path, modules: Sequence[str] = ()) -> AsyncIterator[Runtime]:
    """A runtime on `vault` whose graph has just been synced from the notes."""
    settings = build_settings(
        {"vault": str(vault), "db": str(db_path), "modules": list(modules), "watch": False},
        env={"EMBEDDING_PROVIDER": "none"},  # whatever is installed: reflect's tests need no model
    )
    async with open_runtime(settings) as rt:
        report = await rt.require_sync().sync_vault()
        assert not report.errors, report.errors
        yield rt


async def found(rt: Runtime, pattern: str) -> list:
    """Run one pattern and return the pending insights of that pattern (as InsightViews)."""
    result = await reflect(rt, [pattern])
    assert pattern not in result.skipped_patterns, f"{pattern} was skipped"
    return [v for v in await surface_insights(rt, limit=1000) if v.pattern == pattern]


def entity_ids(view) -> set[str]:
    return {e.id for e in view.entities}
