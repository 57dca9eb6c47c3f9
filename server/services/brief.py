"""The session brief (`engrama_brief`, the `brief` prompt, `engrama-vault brief`): what the assistant should
know at the start of a conversation, in compact Markdown within a token budget.

Sections, most important first (the budget cuts from the bottom, see `brief_render.fit`):
1. related to the cues/project the person gave (search, as `engrama_search` ranks it);
2. what changed since this client's previous brief: facts with old -> new, new, archived and edited notes;
3. what waits for the person: open clarifications and pending insights;
4. active work (the profile's labels people WORK_ON, not closed) with its open problems (HAS_PROBLEM targets);
5. recent decisions; 6. people recently involved.

"Since" is kept per client (the MCP `clientInfo.name`; the CLI's `--client`) in the database (m008); it moves
only when a brief is handed over (`record_brief`), never by rendering one. A client's first brief covers the
last `FIRST_BRIEF_DAYS` days.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from profiles.schema import Profile
from server.runtime import Runtime
from server.search.service import search
from server.services import brief_sections
from server.services.brief_render import Section, estimate_tokens, fit
from server.services.brief_sections import Gathered, roles
from server.status import first_catch_up
from server.store import brief_sql, insights_sql
from server.store.brief_sql import Entry, Mark

DEFAULT_BUDGET = 1500
FIRST_BRIEF_DAYS = 7
# How far before a brief's read its mark is set. A write stamps `updated_at` before it commits, and may wait
# for the database lock up to its busy timeout (10 s); a change stamped inside the margin and already visible
# is remembered as covered (`brief_seen`), one visible only later is reported by the next brief.
MARK_MARGIN = timedelta(seconds=15)
CHANGES_FETCHED = 60
SETTLE_WAIT = 1.0  # seconds a brief waits for changes the watcher holds (its quiet window is 0.15 s)
WALK_WAIT = 2.0  # seconds a brief waits for a first catch-up to know how much of the vault it has to read
RELATED_LIMIT = 6


@dataclass(frozen=True)
class Brief:
    """A rendered brief. `markdown` is what the assistant reads; `to_json()` the same as data; `mark` is where
    the client's next brief starts once this one is handed over (`record_brief`)."""

    client: str | None
    since: str | None  # when this client's previous brief was read; None for a first brief
    generated_at: str
    budget_tokens: int
    tokens: int
    empty: bool
    sections: tuple[Section, ...]
    markdown: str
    mark: Mark | None

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "since": self.since,
            "generated_at": self.generated_at,
            "budget_tokens": self.budget_tokens,
            "tokens": self.tokens,
            "empty": self.empty,
            "sections": [
                {
                    "key": s.key,
                    "title": s.title,
                    "total": s.total,
                    "items": [{"text": i.text, "name": i.name, "path": i.path} for i in s.items],
                }
                for s in self.sections
            ],
            "markdown": self.markdown,
        }


async def render_brief(
    rt: Runtime,
    *,
    client: str | None,
    cues: str | None = None,
    project: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET,
) -> Brief:
    """The brief for `client` (None: no per-client "since", the last days instead), focused on `cues` (what
    the person is about to do) and `project` (an entity name), within `budget_tokens` as `estimate_tokens`
    counts them. Read-only: the client's mark moves only with `record_brief`."""
    now = datetime.now(UTC).replace(microsecond=0)
    focus_nodes = await rt.store.find_nodes(project) if project and project.strip() else []
    focus_id = focus_nodes[0].id if focus_nodes else None

    async def walked() -> bool:  # a first catch-up knows how much it has to read once its walk is done
        return await first_catch_up(rt) != -1

    async def settled() -> bool:  # changes the watcher has seen are in the graph (only a holder counts them)
        return rt.state.get("lease") != "holder" or not rt.state.get("unsettled", 0)

    await _until(walked, WALK_WAIT)
    await _until(settled, SETTLE_WAIT)
    catching_up = await first_catch_up(rt)
    got = await rt.store.read(_gather, rt.profile, client, now, focus_id)
    # Notes are still being taken in when the first catch-up has some left to read (or, into an empty graph,
    # may have: still walking). A restart that finds every note as it was, or an empty vault, takes nothing in.
    taking_in = (
        max(catching_up, 0)
        if catching_up is not None and (catching_up > 0 or (catching_up == -1 and got.entities == 0))
        else None
    )
    if taking_in is not None:
        # The graph holds only part of the vault yet: what changed cannot be told, and a mark set now would
        # make the next brief report every note the catch-up takes in as changed (review 19b).
        got = replace(got, mark=None)
    query = " ".join(part.strip() for part in (cues or "", project or "") if part and part.strip())
    hits = (await search(rt, query, limit=RELATED_LIMIT)).results if query else []
    ambiguous = await rt.store.read(brief_sql.ambiguous_stems, _stems(got, [h.path for h in hits]))
    header, sections = brief_sections.build(
        got,
        hits,
        ambiguous,
        client=client,
        query=query,
        project=project,
        vault=rt.settings.vault is not None,
        taking_in=taking_in,
    )
    markdown, shown = fit(header, sections, budget_tokens)
    return Brief(
        client=client,
        since=got.since,
        generated_at=_stamp(now),
        budget_tokens=budget_tokens,
        tokens=estimate_tokens(markdown),
        empty=got.entities == 0,
        sections=tuple(shown),
        markdown=markdown,
        mark=got.mark,
    )


async def _until(done: Callable[[], Awaitable[bool]], seconds: float) -> None:
    """Wait until `done()` says so, looking every 50 ms, at most `seconds`."""
    waited = 0.0
    while not await done() and waited < seconds:
        await asyncio.sleep(0.05)
        waited += 0.05


async def record_brief(rt: Runtime, brief: Brief) -> None:
    """The brief was handed to its client: its next brief reports what changes from here on."""
    if brief.mark is not None:
        await rt.store.write(brief_sql.set_mark, brief.mark)


async def deliver_brief(
    rt: Runtime,
    *,
    client: str | None,
    cues: str | None = None,
    project: str | None = None,
    budget_tokens: int = DEFAULT_BUDGET,
) -> Brief:
    """`render_brief` then `record_brief`: for a caller that returns the brief right away."""
    brief = await render_brief(rt, client=client, cues=cues, project=project, budget_tokens=budget_tokens)
    await record_brief(rt, brief)
    return brief


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _stems(got: Gathered, extra: Sequence[str | None]) -> list[str]:
    # Only what a section may show: the recent decisions come first by date (the rest cannot be shown).
    recent = sorted(got.decisions, key=lambda e: e.valid_from or e.active_at, reverse=True)[:50]
    paths = [e.path for e in got.changed + got.work[:50] + recent + got.people] + list(extra)
    paths += [f.node.path for f in got.facts] + [c.node.path for c in got.clarifications]
    paths += [e.path for _, e in got.links] + [e.path for _, ents in got.insights for e in ents]
    stems = {p.rsplit("/", 1)[-1].removesuffix(".md").casefold() for p in paths if p}
    return sorted(stems)[:900]  # under SQLite's parameter limit; a brief never names more


def _gather(conn: Any, profile: Profile, client: str | None, now: datetime, focus_id: str | None) -> Gathered:
    """Read what the brief needs in one read unit on the database thread."""
    mark = brief_sql.get_mark(conn, client) if client else None
    if mark is not None:
        since, after_id, history_since = mark.briefed_at, mark.history_id, None
    else:
        since = _stamp(now - timedelta(days=FIRST_BRIEF_DAYS))
        after_id, history_since = 0, since
    changed, counts = brief_sql.changed_nodes(
        conn,
        since,
        client if mark else None,
        CHANGES_FETCHED,
        first=mark is None,
        after_seq=mark.change_seq if mark else None,
    )
    facts = brief_sql.fact_changes(conn, after_id, history_since, CHANGES_FETCHED * 5)
    parts = roles(profile)
    work = [e for e in brief_sql.live_of_labels(conn, parts.work, 500) if not brief_sections.closed(e.state)]
    focus = brief_sql.entries(conn, [focus_id]).get(focus_id) if focus_id else None
    anchors = ([focus.id] if focus else []) + [e.id for e in work[:10]]
    wanted = parts.problems + parts.decisions + parts.people
    notes, entities = brief_sql.live_counts(conn)
    return Gathered(
        roles=parts,
        notes=notes,
        entities=entities,
        since=_stamp(datetime.fromisoformat(mark.briefed_at.replace("Z", "+00:00")) + MARK_MARGIN)
        if mark
        else None,
        window=since,
        changed=changed,
        counts=counts,
        facts=facts,
        clarifications=brief_sql.open_clarifications(conn, 5),
        insights=_insights(conn),
        work=work,
        decisions=brief_sql.live_of_labels(conn, parts.decisions, 1000),
        people=brief_sql.live_of_labels(conn, parts.people, 10),
        links=brief_sql.linked(conn, anchors, wanted) if wanted else [],
        focus=focus,
        mark=brief_sql.next_mark(conn, client, _stamp(now - MARK_MARGIN)) if client else None,
    )


def _insights(conn: Any) -> list[tuple[insights_sql.InsightRow, list[Entry]]]:
    pending = insights_sql.pending_insights(conn)[:5]
    about = brief_sql.entries(conn, [i for row in pending for i in row.entities])
    return [(row, [about[i] for i in row.entities if i in about]) for row in pending]
