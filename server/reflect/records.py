"""Decisions about insights, kept in the vault so they survive deleting and rebuilding the database.

The database is derived from the vault, so a decision that lived only in the `insights` table would be lost
on a rebuild, and a dismissed insight would come back. Each decision is therefore also written as something
a person can read in Obsidian:

- an **approved** insight becomes a note of its own, `Insights/<title>.md` (the profile's folder for the
  `Insight` label), type Insight, with `insight_key`, `insight_status: approved`, `pattern`, `confidence` and
  `decided_at` in its frontmatter and `relations: ABOUT: [[entity]]...` to the entities, so it joins the graph;
- a **dismissed** insight becomes one line of `Insights/Dismissed insights.md`:
  `- 2025-06-01 · <title> · `<key>``.

Every reflect first restores decisions from these records: an insight note (found in the graph by its
`insight_key`, wherever it was moved) gives its `insight_status`, and each key in the dismissed list is
dismissed. The vault record wins over the database, so setting `insight_status: dismissed` in an insight's
note retracts an approval. A decision taken by a process that may not write the vault (another process holds
its lease) is kept in the database with `recorded_at` unset and, in the same transaction, queued in the outbox:
the process holding the vault writes its record within about a second (`server.services.outbox`), and any
decision still unrecorded at a reflect is recorded then (`record_missing_decisions`). Once recorded, a record the person deletes is not
written again: deleting an insight's note does not bring it back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from server.reflect import render
from server.reflect.keys import KEY_PATTERN, insight_id
from server.runtime import Runtime
from server.store import insights_sql
from server.store.clock import utc_now
from server.store.insights_sql import APPROVED, DISMISSED, InsightRow, VaultDecision
from vault_sync import identify
from vault_sync.errors import VaultError
from vault_sync.frontmatter import decode_note, read_frontmatter
from vault_sync.insight_section import append_list_item, listed_keys
from vault_sync.reconcile import VaultSync
from vault_sync.writer import NoteExists, Quiet, create_note, edit_note, read_note

log = logging.getLogger(__name__)

INSIGHT_LABEL = "Insight"
_MAX_NAME_TRIES = 50


def writable_sync(rt: Runtime) -> VaultSync | None:
    """The vault sync when this process may write the vault; None without a vault or without the lease."""
    return rt.sync if rt.sync is not None and rt.sync.writable else None


def insight_folder(rt: Runtime) -> str:
    return rt.profile.folder_for(INSIGHT_LABEL) or "Insights"


def dismissed_path(rt: Runtime) -> str:
    """Where a new list of dismissed insights is made."""
    return f"{insight_folder(rt)}/{render.DISMISSED_NOTE_NAME}.md"


async def dismissed_list(rt: Runtime) -> str:
    """The list of dismissed insights: the note named so (its frontmatter `name:`, which a move or a rename of
    the file keeps) wherever the person moved it, else where a new one is made."""
    found = await rt.store.read(insights_sql.note_path_named, render.DISMISSED_NOTE_NAME)
    return found or dismissed_path(rt)


async def entity_links(rt: Runtime, ids: Sequence[str]) -> list[render.EntityLink]:
    """The insight's entities that still exist (archived ones have no note to link), in the insight's order."""
    nodes = await rt.store.read(insights_sql.entity_nodes, list(ids))
    return [
        render.EntityLink(n.id, n.name, n.path)
        for n in (nodes.get(i) for i in ids)
        if n is not None and n.status != "archived"
    ]


# --- writing the records ---------------------------------------------------------------------------------


async def record_approval(rt: Runtime, row: InsightRow) -> str | None:
    """Make sure the approved insight has its own note; returns its path (None when the vault is not ours)."""
    sync = writable_sync(rt)
    if sync is None:
        return None
    rel = await rt.store.read(insights_sql.insight_note_path, row.key)
    if rel is None:
        links = await entity_links(rt, row.entities)
        data = render.insight_note(row, links, identify.new_engrama_id(), INSIGHT_LABEL)
        stem = f"{insight_folder(rt)}/{render.note_file_stem(row.title)}"
        rel = await asyncio.to_thread(_create_own_note, sync.root, stem, row.key, data)
        await sync.sync_path(rel)
    await rt.store.write(insights_sql.mark_recorded, row.id, utc_now())
    return rel


def _create_own_note(root: Path, stem: str, key: str, data: bytes) -> str:
    """Create `<stem>.md`, or `<stem> 2.md` ... when the name is taken by another note.

    A file already holding this insight's key (written before a crash, not synced yet) is reused."""
    for n in range(1, _MAX_NAME_TRIES + 1):
        rel = f"{stem}.md" if n == 1 else f"{stem} {n}.md"
        try:
            return create_note(root, rel, data).path
        except NoteExists:
            if _holds_key(root, rel, key):
                return rel
    raise VaultError(f"too many notes are named like {stem}.md; rename some of them")


def _holds_key(root: Path, rel: str, key: str) -> bool:
    try:
        data, _ = read_note(root, rel)
        _, meta = read_frontmatter(data, source=rel)
    except (OSError, VaultError):
        return False
    return meta.get("insight_key") == key


async def record_dismissal(rt: Runtime, row: InsightRow) -> str | None:
    """Add the insight to the dismissed list (creating the note on first use); returns the list's path."""
    sync = writable_sync(rt)
    if sync is None:
        return None
    rel = await dismissed_list(rt)
    fresh = render.dismissed_note(identify.new_engrama_id(), INSIGHT_LABEL)
    item = render.dismissed_item(row)
    quiet = await rt.quiet_rule(rel)  # the person may be editing the list: never race their editor
    await asyncio.to_thread(_append_dismissed, sync.root, rel, fresh, row.key, item, quiet)
    await sync.sync_path(rel)
    await rt.store.write(insights_sql.mark_recorded, row.id, utc_now())
    return rel


async def record_missing_decisions(rt: Runtime) -> int:
    """Write the vault records of decisions that only the database holds; returns how many were written."""
    if writable_sync(rt) is None:
        return 0
    written = 0
    for row in await rt.store.read(insights_sql.unrecorded_decisions):
        try:
            await (record_approval(rt, row) if row.status == APPROVED else record_dismissal(rt, row))
            written += 1
        except VaultError as exc:
            log.warning("cannot record the decision on insight %s in the vault yet: %s", row.id, exc)
    return written


def _append_dismissed(root: Path, rel: str, fresh: bytes, key: str, item: str, quiet: Quiet | None) -> None:
    try:
        create_note(root, rel, append_list_item(fresh, key, item))
        return
    except NoteExists:
        pass  # the list exists: add a line to it

    def edit(data: bytes) -> bytes:
        decode_note(data, source=rel)
        read_frontmatter(data, source=rel)  # a list that does not parse is reported, never edited
        return append_list_item(data, key, item)

    edit_note(root, rel, edit, quiet=quiet)


# --- reading them back -----------------------------------------------------------------------------------


async def restore_decisions(rt: Runtime) -> int:
    """Give the database the decisions the vault records (see the module docstring); returns rows changed."""
    if rt.sync is None:
        return 0
    known = await rt.store.read(insights_sql.statuses)
    decisions = await _approved_notes(rt, known)
    noted = {d.key for d in decisions}
    listed = await asyncio.to_thread(_read_dismissed, rt.sync.root, await dismissed_list(rt))
    for key, (day, title) in listed.items():
        if key not in noted:
            decisions.append(
                VaultDecision(key, insight_id(key), key.split("/")[0], DISMISSED, title, "", 0.0, (), day)
            )
    changed = [d for d in decisions if known.get(d.key) != d.status]
    if not changed:
        return 0
    return await rt.store.write(insights_sql.apply_vault_decisions, changed, utc_now())


async def _approved_notes(rt: Runtime, known: dict[str, str]) -> list[VaultDecision]:
    """Decisions stated by insight notes in the graph (bodies are read only for insights the db lacks)."""
    assert rt.sync is not None
    decisions = []
    for note in await rt.store.read(insights_sql.insight_notes):
        props = note.properties
        key, status = str(props.get("insight_key", "")), str(props.get("insight_status", APPROVED)).lower()
        if not KEY_PATTERN.match(key) or status not in (APPROVED, DISMISSED):
            continue
        body = ""
        if key not in known and note.path:
            body = await asyncio.to_thread(_read_body, rt.sync.root, note.path)
        decisions.append(
            VaultDecision(
                key=key,
                id=insight_id(key),
                pattern=str(props.get("pattern") or key.split("/")[0]),
                status=status,
                title=note.name,
                body=body,
                confidence=_confidence(props.get("confidence")),
                entities=note.about,
                decided_at=str(props["decided_at"]) if props.get("decided_at") else None,
            )
        )
    return decisions


def _confidence(value: object) -> float:
    try:
        return min(max(float(value), 0.0), 1.0)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _read_body(root: Path, rel: str) -> str:
    try:
        data, _ = read_note(root, rel)
        span, _ = read_frontmatter(data, source=rel)
        text = decode_note(data[span.end :] if span else data, source=rel)
    except (OSError, VaultError) as exc:
        log.warning("cannot read the insight note %s: %s", rel, exc)
        return ""
    return render.insight_body(text)


def _read_dismissed(root: Path, rel: str) -> dict[str, tuple[str | None, str]]:
    """key -> (day, title) of every insight in the dismissed list ({} when there is no list)."""
    try:
        data, _ = read_note(root, rel)
    except FileNotFoundError:
        return {}
    except (OSError, VaultError) as exc:
        log.warning("cannot read the list of dismissed insights %s: %s", rel, exc)
        return {}
    found = {}
    for line in data.decode("utf-8", errors="replace").splitlines():
        keys = listed_keys(line.encode("utf-8"))
        for key in (k for k in keys if KEY_PATTERN.match(k)):
            parts = [part.strip() for part in line.strip().lstrip("-* ").split(" · ")]
            # "<day> · <title> · `key`", as written; a line the person reworded still dismisses its key
            found[key] = (parts[0], parts[1]) if len(parts) >= 3 else (None, key)
    return found
