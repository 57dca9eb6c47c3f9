"""The status object shared by the `engrama_status` tool and `engrama-vault status --json` (DESIGN.md §5).

A key is absent, not null, when its subsystem is off.
"""

from __future__ import annotations

from typing import Any

from server import __version__
from server.embeddings.worker import current_search_status
from server.runtime import Runtime


async def build_status(rt: Runtime) -> dict[str, Any]:
    counts = await rt.store.counts()
    node_count = sum(v for k, v in counts.items() if k.startswith("nodes_") and k != "nodes_archived")
    status: dict[str, Any] = {
        "version": __version__,
        "backend": {"name": "sqlite", "ok": True, "node_count": node_count, "db_path": str(rt.store.path)},
        "vault": _vault_status(rt, counts),
        "search": current_search_status(rt),
        "profile": {"name": rt.profile.name, "modules": list(rt.profile.modules)},
    }
    embedder = rt.state.get("embedder_status")
    if isinstance(embedder, dict):
        status["embedder"] = embedder
    return status


def _vault_status(rt: Runtime, counts: dict[str, int]) -> dict[str, Any]:
    if rt.settings.vault is None:
        return {"configured": False}
    vault: dict[str, Any] = {
        "configured": True,
        "path": str(rt.settings.vault),
        "note_count": counts.get("files", 0),
        "watching": bool(rt.state.get("watching", False)),
        "pending": int(rt.state.get("pending", 0) or 0),  # type: ignore[arg-type]
    }
    last = rt.state.get("last_reconcile_at")
    if last:
        vault["last_reconcile_at"] = last
    return vault
