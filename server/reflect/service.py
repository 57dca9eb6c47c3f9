"""Reflect and insights: the services the MCP tools and the CLI call (DESIGN.md section 6).

- `reflect` profiles the graph, runs the patterns it can, and keeps the result as *pending* insights, each with
  a stable key (pattern + the sorted ids of the entities it is about, see `keys.py`). Re-running never
  duplicates an insight, never revives a dismissed one and never resets an approved one; a pending one is
  refreshed in place (title, body, confidence, entities), and withdrawn when its evidence is gone.
- Only the person decides: `decide_insight` approves or dismisses, and only approved insights are ever written
  into notes (`write_insight_to_vault`). Decisions are also kept in the vault (`records.py`), so they survive
  a rebuild of the database.
- Proactive: tools report remembers through `note_remembered`; after ten since the last reflect,
  `proactive_hint` suggests running it. Search results carry `pending_insights_for` the nodes they found.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence

import anyio

from server.reflect.errors import (
    InsightAlreadyDecided,
    InsightError,
    InsightNotApproved,
    InsightNotFound,
    InsightWriteError,
    ReflectError,
)
from server.reflect.patterns import PATTERN_NAMES, select_patterns
from server.reflect.records import (
    record_approval,
    record_dismissal,
    record_missing_decisions,
    restore_decisions,
    writable_sync,
)
from server.reflect.values import (
    EntityRef,
    InsightDecision,
    InsightSummary,
    InsightView,
    ReflectResult,
)
from server.reflect.worker import find_insights
from server.reflect.writeback import WriteBack, queue_write_back, write_back
from server.runtime import Runtime
from server.store import insights_sql, outbox_sql
from server.store.clock import utc_now
from server.store.insights_sql import APPROVED, DISMISSED, PENDING, InsightRow
from vault_sync.errors import VaultError
from vault_sync.outbox import InsightWrite

__all__ = [
    "PATTERN_NAMES",
    "EntityRef",
    "InsightAlreadyDecided",
    "InsightDecision",
    "InsightError",
    "InsightNotApproved",
    "InsightNotFound",
    "InsightSummary",
    "InsightView",
    "InsightWriteError",
    "ReflectError",
    "ReflectResult",
    "decide_insight",
    "note_remembered",
    "pending_insights_for",
    "proactive_hint",
    "reflect",
    "surface_insights",
    "write_insight_to_vault",
]

log = logging.getLogger(__name__)

REMEMBERS_KEY = "reflect.remembers_since_last"
HINT_AFTER_REMEMBERS = 10
_ACTIONS = {"approve": APPROVED, "approved": APPROVED, "dismiss": DISMISSED, "dismissed": DISMISSED}
_WORD = re.compile(r"\w+")
QUEUED_RECORD = (
    "the decision holds now; its vault record is queued: another engrama-vault process (another MCP client's "
    "server) holds this vault's lease and writes it within about a second"
)


async def reflect(rt: Runtime, patterns: Sequence[str] | None = None) -> ReflectResult:
    """Look for patterns across the graph and keep what they find as pending insights.

    `patterns` names the patterns to run (all by default); unknown names raise `ReflectError`. Requested
    patterns whose preconditions the graph does not meet are listed in `skipped_patterns`. The graph is read
    and matched in a child process (`worker.py`); if it dies (killed, out of memory), `ReflectError` says so
    and nothing is written.
    """
    selected = select_patterns(patterns)
    await restore_decisions(rt)
    await record_missing_decisions(rt)
    known = await rt.store.read(insights_sql.statuses)
    # The graph is read, built and matched in a child process (worker.py): the server never holds it.
    found = await find_insights(rt.store, [p.name for p in selected], time.time(), known)
    outcome = await rt.store.write(
        insights_sql.save_proposals, found.ran, found.proposals, found.keys, utc_now()
    )
    await rt.store.write(insights_sql.reset_counter, REMEMBERS_KEY)
    if outcome.withdrawn:
        log.info("reflect withdrew %d pending insights whose evidence is gone", outcome.withdrawn)
    rows = await rt.store.read(insights_sql.insights_by_keys, [*outcome.created, *outcome.kept])
    rows.sort(key=lambda r: (-r.confidence, r.title, r.key))
    return ReflectResult(len(outcome.created), [_summary(r) for r in rows], found.skipped)


async def surface_insights(rt: Runtime, limit: int = 5, query: str | None = None) -> list[InsightView]:
    """Pending insights for the person to review, most confident first; with `query`, those that match it
    (in title, body or entity names) come first."""
    rows = await rt.store.read(insights_sql.pending_insights)
    nodes = await rt.store.read(insights_sql.entity_nodes, [i for r in rows for i in r.entities])
    views = [
        InsightView(
            r.id,
            r.title,
            r.body,
            r.pattern,
            r.confidence,
            [EntityRef(n.id, n.label, n.name) for n in (nodes.get(i) for i in r.entities) if n is not None],
        )
        for r in rows
    ]
    if query and query.strip():
        terms = _words(query)
        views.sort(key=lambda v: (-_relevance(terms, v), -v.confidence))
    return views[: max(1, limit)]


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if len(w) > 2}


def _relevance(terms: set[str], view: InsightView) -> float:
    """Share of the query's words found in the insight (a word also matches as a prefix: "course" ~ "courses")."""
    if not terms:
        return 0.0
    words = _words(" ".join([view.title, view.body, *(e.name for e in view.entities)]))
    hits = sum(1 for t in terms if t in words or any(w.startswith(t) for w in words))
    return hits / len(terms)


async def decide_insight(rt: Runtime, insight_id: str, action: str) -> InsightDecision:
    """Approve or dismiss a pending insight (`action` is "approve" or "dismiss"), and record the decision in
    the vault. Repeating the same decision is harmless; reversing one raises `InsightAlreadyDecided`."""
    wanted = _ACTIONS.get(str(action).strip().lower())
    if wanted is None:
        raise InsightError(f"unknown action {action!r}; use 'approve' or 'dismiss'")
    await restore_decisions(rt)  # the vault's record wins: an approval retracted in its note is dismissed
    row = await _get(rt, insight_id)
    queue = rt.sync is not None and writable_sync(rt) is None  # another process holds the vault's lease
    queued: int | None = None
    if (
        row.status == PENDING
        and wanted == APPROVED
        and not await rt.store.read(insights_sql.standing, row.id)
    ):
        raise InsightError(
            f"insight {row.id} is about a note that was deleted or archived since it was proposed, so it no "
            "longer holds; dismiss it, or run engrama_reflect to withdraw it"
        )
    if row.status == PENDING:
        if rt.sync is not None:
            # The decision and its queued vault record (what survives a rebuild) commit together: whatever
            # cuts the call short after this (a client cancelling it, a stop, a crash, a failed write), the
            # lease holder's drain of the outbox writes the record (when it is written already: nothing).
            queued = await rt.store.write(outbox_sql.decide_and_queue, row.id, wanted, utc_now())
        else:
            await rt.store.write(insights_sql.decide, row.id, wanted, utc_now())
        row = await _get(rt, insight_id)
        if row.status != wanted:  # another client decided it the other way in between: theirs stands
            raise InsightAlreadyDecided(_reversal_message(row))
    elif row.status != wanted:
        raise InsightAlreadyDecided(_reversal_message(row))
    elif await rt.store.read(outbox_sql.insight_recorded, row.id):
        # The same decision again, already on record: nothing to write (a record the person deleted, such as
        # an approved insight's note, is not brought back).
        return InsightDecision(
            row.id, row.status, f"{row.status} (already, on {(row.decided_at or '')[:10]})"
        )
    if queue:
        return InsightDecision(row.id, row.status, QUEUED_RECORD)
    try:
        where = await (record_approval(rt, row) if wanted == APPROVED else record_dismissal(rt, row))
    except VaultError as exc:
        # The decision holds in the database; its vault record is retried through the outbox.
        log.warning("insight %s is %s, but recording it in the vault failed: %s", row.id, row.status, exc)
        return InsightDecision(
            row.id,
            row.status,
            f"{row.status}; recording it in the vault failed ({exc}), "
            "and is tried again (engrama_status shows writes still waiting)",
        )
    if queued is not None:
        await rt.store.write(outbox_sql.applied, queued, None, utc_now())  # recorded: nothing left to drain
    recorded = f"; recorded in the vault in {where}" if where else ""
    return InsightDecision(row.id, row.status, f"{row.status}{recorded}")


def _reversal_message(row: InsightRow) -> str:
    when = (row.decided_at or "")[:10]
    if row.status == APPROVED:
        return (
            f"insight {row.id} was approved on {when}; to retract it, set `insight_status: dismissed` in its "
            "note in the Insights folder, and the next reflect will take that decision"
        )
    return f"insight {row.id} was dismissed on {when}; dismissed insights stay dismissed and are not proposed again"


async def write_insight_to_vault(rt: Runtime, insight_id: str, target_note: str | None = None) -> WriteBack:
    """Write an approved insight into the notes of its entities, or into `target_note` (vault-relative).

    Returns the notes that carry the insight's section (writing again changes no byte and returns the same
    list) and the entities' notes it could not go into, with why. Not approved -> `InsightNotApproved`.
    """
    # An approval retracted in its note (`insight_status: dismissed`) is not written.
    await restore_decisions(rt)
    row = await _get(rt, insight_id)
    if row.status != APPROVED:
        raise InsightNotApproved(
            f"insight {row.id} is pending: approve it first with engrama_approve_insight (only approved "
            "insights are written into notes)"
            if row.status == PENDING
            else f"insight {row.id} was dismissed; only approved insights are written into notes"
        )
    if rt.sync is not None and writable_sync(rt) is None:
        return await queue_write_back(rt, row, target_note)  # another process holds the vault: it writes
    if rt.sync is None:
        return await write_back(rt, row, target_note)
    # Written note by note: a server killed half-way left the insight in some of its notes, and nothing said
    # so or finished it (review 21b). The write is queued first, as a follower queues it, and dropped once done
    # or refused; killed, the row stays, and the next drain (this server's restart) writes the rest (a note
    # that has the section already is left as it is). One drain at a time: none applies it meanwhile.
    async with rt.outbox_lock:
        journal = await rt.store.write(outbox_sql.enqueue, InsightWrite(row.id, target_note), utc_now())
        try:
            done = await write_back(rt, row, target_note)
        except BaseException:
            # Refused, or cancelled by the client: nothing more is written later (review 23k: a cancelled call's
            # row was applied by the next drain, over a later call that chose another note). Only a process that
            # dies keeps the row, for the next start to finish.
            with anyio.CancelScope(shield=True):
                await rt.store.write(outbox_sql.applied, journal, None, utc_now())
            raise
        await rt.store.write(outbox_sql.applied, journal, None, utc_now())
    return done


async def pending_insights_for(rt: Runtime, node_ids: Sequence[str], limit: int = 3) -> list[InsightSummary]:
    """Pending insights about any of `node_ids` (e.g. the nodes a search found), most confident first."""
    rows = await rt.store.read(insights_sql.pending_about, list(node_ids), max(1, limit))
    return [_summary(r) for r in rows]


async def note_remembered(rt: Runtime) -> None:
    """Count one remember since the last reflect (the remember tool calls this)."""
    await rt.store.write(insights_sql.bump_counter, REMEMBERS_KEY)


async def proactive_hint(rt: Runtime) -> str | None:
    """A nudge to run reflect after enough new memories, else None."""
    count = await rt.store.read(insights_sql.read_counter, REMEMBERS_KEY)
    if count < HINT_AFTER_REMEMBERS:
        return None
    return (
        f"{count} things were remembered since the last reflect: call engrama_reflect to look for patterns "
        "across them, then show the person what it found with engrama_surface_insights."
    )


async def _get(rt: Runtime, insight_id: str) -> InsightRow:
    row = await rt.store.read(insights_sql.get_insight, str(insight_id).strip())
    if row is None:
        raise InsightNotFound(
            f"no insight has id {insight_id!r}; call engrama_surface_insights to list pending insights with "
            "their ids (they look like ins-1a2b3c4d5e6f), or engrama_reflect to look for new ones"
        )
    return row


def _summary(row: InsightRow) -> InsightSummary:
    return InsightSummary(row.id, row.title, row.pattern, row.confidence)
