"""The optional link from the memory tools to reflect: counting remembers, proactive hints and pending
insights attached to results. When `server.reflect.service` is not installed these answer "nothing"."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from server.runtime import Runtime

log = logging.getLogger(__name__)


def _load() -> ModuleType | None:
    try:
        from server.reflect import service
    except ModuleNotFoundError as exc:
        # Only the absence of the reflect service itself means "no reflect"; a missing dependency *inside*
        # it is a bug that must surface.
        if exc.name not in ("server.reflect", "server.reflect.service"):
            raise
        return None
    return service


reflect_service: ModuleType | None = _load()


def available() -> bool:
    """True when reflect is installed (its four tools are then registered)."""
    return reflect_service is not None


async def note_remembered(rt: Runtime) -> None:
    """Count one remember towards the next proactive reflect hint."""
    if reflect_service is not None:
        await reflect_service.note_remembered(rt)


async def proactive_hint(rt: Runtime) -> str | None:
    """A hint to run engrama_reflect, when enough has been remembered since the last reflect."""
    if reflect_service is None:
        return None
    return await reflect_service.proactive_hint(rt)


async def pending_insights_for(rt: Runtime, node_ids: Sequence[str], limit: int = 3) -> list[Any]:
    """Pending insights about any of `node_ids` (shown beside search results; never approved here)."""
    if reflect_service is None or not node_ids:
        return []
    return list(await reflect_service.pending_insights_for(rt, list(node_ids), limit))
