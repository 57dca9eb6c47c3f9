"""The status object shared by the `engrama_status` tool and `engrama-vault status --json` (DESIGN.md §5).

A key is absent, not null, when its subsystem is off.
"""

from __future__ import annotations

from typing import Any

from server import __version__
from server.embeddings.worker import current_search_status
from server.runtime import Runtime
from server.store import outbox_sql
from server.store.outbox_sql import OutboxSummary
from vault_sync.attention import ATTENTION_KEY, Attention


async def build_status(rt: Runtime) -> dict[str, Any]:
    counts = await rt.store.counts()
    node_count = sum(v for k, v in counts.items() if k.startswith("nodes_") and k != "nodes_archived")
    status: dict[str, Any] = {
        "version": __version__,
        "backend": {"name": "sqlite", "ok": True, "node_count": node_count, "db_path": str(rt.store.path)},
        "vault": _vault_status(rt, counts, await rt.store.read(outbox_sql.summary)),
        "search": current_search_status(rt),
        "profile": {"name": rt.profile.name, "modules": list(rt.profile.modules)},
    }
    if rt.settings.vault is not None and (attention := await _vault_attention(rt)):
        status["vault"]["attention"] = attention  # what the syncs found for the person to look at
    embedder = rt.state.get("embedder_status")
    if isinstance(embedder, dict):
        status["embedder"] = embedder
    elif rt.settings.embedding_choice:  # no embedder running: say which provider was chosen and why
        status["search"] = {**status["search"], "embedding": rt.settings.embedding_choice}
    return status


def _vault_status(rt: Runtime, counts: dict[str, int], outbox: OutboxSummary) -> dict[str, Any]:
    if rt.settings.vault is None:
        return {"configured": False}
    vault: dict[str, Any] = {
        "configured": True,
        "path": str(rt.settings.vault),
        "note_count": counts.get("files", 0),
        "watching": bool(rt.state.get("watching", False)),
        "pending": int(rt.state.get("pending", 0) or 0),  # type: ignore[arg-type]
    }
    polling = rt.state.get("polling_seconds")
    if polling:
        vault["polling_seconds"] = polling
    last = rt.state.get("last_reconcile_at")
    if last:
        vault["last_reconcile_at"] = last
    vault["outbox"] = _outbox_status(outbox)
    return vault


def _outbox_status(outbox: OutboxSummary) -> dict[str, Any]:
    """Writes accepted by a process without the vault's lease that the lease holder has not written yet."""
    status: dict[str, Any] = {"waiting": outbox.waiting}
    if outbox.oldest_queued_at is not None:
        status["oldest_age_seconds"] = round(outbox_sql.age_seconds(outbox.oldest_queued_at))
    if outbox.error is not None:
        status["failing"] = outbox.failing
        status["error"] = outbox.error
    return status


async def _vault_attention(rt: Runtime) -> dict[str, Any]:
    """Archiving held back, conflict copies, notes not downloaded: kept by the last syncs (any process)."""
    return Attention.from_json(await rt.store.get_meta(ATTENTION_KEY)).as_status()
