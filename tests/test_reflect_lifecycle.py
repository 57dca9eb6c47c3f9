"""An insight's life: stable identity across runs, decisions from the chat, decisions that survive a rebuild,
and the proactive hints."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_reflect_support import VaultBuilder, projects_sharing, synced

from server.reflect.service import (
    InsightAlreadyDecided,
    InsightError,
    InsightNotApproved,
    InsightNotFound,
    decide_insight,
    note_remembered,
    pending_insights_for,
    proactive_hint,
    reflect,
    surface_insights,
    write_insight_to_vault,
)
from server.store import insights_sql


def two_projects_on_sqlite(vault: Path) -> VaultBuilder:
    b = VaultBuilder(vault)
    b.note("Technologies", "SQLite", "Technology")
    b.note("Technologies", "Redis", "Technology")
    b.note("Projects", "Alpha", "Project", relations={"USES": ["SQLite", "Redis"]})
    b.note("Projects", "Beta", "Project", relations={"USES": ["SQLite", "Redis"]})
    return b


async def status_of(rt, insight_id: str) -> str:
    row = await rt.store.read(insights_sql.get_insight, insight_id)
    return row.status


async def test_reflect_twice_keeps_one_insight_per_key(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        first = await reflect(rt)
        second = await reflect(rt)
        pending = await surface_insights(rt, limit=50)
    assert first.created == 2 and second.created == 0
    assert [i.id for i in first.insights] == [i.id for i in second.insights]
    assert len(pending) == 2


async def test_a_pending_insight_follows_its_counts_under_the_same_id(vault, db_path) -> None:
    b = two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        [before] = [i for i in (await reflect(rt)).insights if "SQLite" in i.title]
    b.note("Projects", "Gamma", "Project", relations={"USES": ["SQLite"]})
    async with synced(vault, db_path) as rt:
        result = await reflect(rt)
        [after] = [i for i in result.insights if "SQLite" in i.title]
    assert result.created == 0
    assert after.id == before.id
    assert (before.title, after.title) == (
        "Shared technology: 2 entities build on SQLite",
        "Shared technology: 3 entities build on SQLite",
    )
    assert after.confidence > before.confidence


async def test_approved_and_dismissed_insights_are_never_reset_or_revived(vault, db_path) -> None:
    b = two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insights = {i.title.split()[-1]: i for i in (await reflect(rt)).insights}
        await decide_insight(rt, insights["SQLite"].id, "approve")
        await decide_insight(rt, insights["Redis"].id, "dismiss")
    b.note("Projects", "Gamma", "Project", relations={"USES": ["SQLite", "Redis"]})
    async with synced(vault, db_path) as rt:
        result = await reflect(rt)
        assert result.created == 0 and result.insights == []
        assert await surface_insights(rt) == []
        approved = await rt.store.read(insights_sql.get_insight, insights["SQLite"].id)
        assert approved.status == "approved"
        assert approved.title == "Shared technology: 2 entities build on SQLite"  # as the person approved it
        assert await status_of(rt, insights["Redis"].id) == "dismissed"


async def test_a_pending_insight_whose_evidence_is_gone_is_withdrawn(vault, db_path) -> None:
    b = two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        assert (await reflect(rt)).created == 2
    beta = vault / b.paths["Beta"]
    beta.write_text(beta.read_text(encoding="utf-8").replace(", '[[Redis]]'", ""), encoding="utf-8")
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        titles = [v.title for v in await surface_insights(rt, limit=10)]
    assert titles == ["Shared technology: 2 entities build on SQLite"]


async def test_deciding_needs_a_known_id_and_a_known_action(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        [one, _] = (await reflect(rt)).insights
        with pytest.raises(InsightNotFound, match="engrama_surface_insights"):
            await decide_insight(rt, "ins-000000000000", "approve")
        with pytest.raises(InsightError, match="'approve' or 'dismiss'"):
            await decide_insight(rt, one.id, "maybe")
        assert (await decide_insight(rt, one.id, "approve")).status == "approved"
        assert (await decide_insight(rt, one.id, "approve")).status == "approved"  # harmless again
        with pytest.raises(InsightAlreadyDecided, match="insight_status: dismissed"):
            await decide_insight(rt, one.id, "dismiss")


async def test_decisions_survive_deleting_and_rebuilding_the_database(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insights = {i.title.split()[-1]: i for i in (await reflect(rt)).insights}
        await decide_insight(rt, insights["SQLite"].id, "approve")
        await decide_insight(rt, insights["Redis"].id, "dismiss")
    own_note = vault / "Insights" / "Shared technology - 2 entities build on SQLite.md"
    text = own_note.read_text(encoding="utf-8")
    assert "insight_status: approved" in text and "insight_key: shared_technology/" in text
    dismissed = (vault / "Insights" / "Dismissed insights.md").read_text(encoding="utf-8")
    assert "Shared technology: 2 entities build on Redis" in dismissed
    for side in db_path.parent.glob(db_path.name + "*"):
        side.unlink()
    async with synced(vault, db_path) as rt:
        result = await reflect(rt)
        assert result.created == 0 and await surface_insights(rt) == []
        approved = await rt.store.read(insights_sql.get_insight, insights["SQLite"].id)
        assert approved.status == "approved"
        assert approved.body.startswith("Alpha and Beta use, teach or are built from SQLite.")
        assert set(approved.entities) == {n.id for n in await rt.store.find_nodes("Alpha")} | {
            n.id for n in await rt.store.find_nodes("Beta")
        } | {n.id for n in await rt.store.find_nodes("SQLite")}
        assert await status_of(rt, insights["Redis"].id) == "dismissed"


async def test_editing_insight_status_in_the_note_retracts_an_approval(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        one = (await reflect(rt)).insights[0]
        await decide_insight(rt, one.id, "approve")
    [note] = [p for p in (vault / "Insights").glob("*.md") if "Dismissed" not in p.name]
    note.write_text(
        note.read_text(encoding="utf-8").replace("insight_status: approved", "insight_status: dismissed"),
        encoding="utf-8",
    )
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        assert await status_of(rt, one.id) == "dismissed"


async def test_surface_ranks_insights_matching_the_query_first(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        by_query = await surface_insights(rt, limit=5, query="what about redis?")
        limited = await surface_insights(rt, limit=1)
    assert by_query[0].title.endswith("Redis") and len(by_query) == 2
    assert len(limited) == 1
    assert {e.name for e in by_query[0].entities} == {"Redis", "Alpha", "Beta"}


async def test_search_results_get_the_pending_insights_about_their_nodes(vault, db_path) -> None:
    b = two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        about_redis = await pending_insights_for(rt, [b.ids["Redis"]])
        about_alpha = await pending_insights_for(rt, [b.ids["Alpha"]], limit=3)
        about_nothing = await pending_insights_for(rt, ["no-such-node"])
    assert [i.title for i in about_redis] == ["Shared technology: 2 entities build on Redis"]
    assert len(about_alpha) == 2 and about_nothing == []


async def test_proactive_hint_after_ten_remembers_until_reflect(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        for _ in range(9):
            await note_remembered(rt)
        assert await proactive_hint(rt) is None
        await note_remembered(rt)
        hint = await proactive_hint(rt)
        assert hint is not None and "engrama_reflect" in hint and "10 things" in hint
        await reflect(rt)
        assert await proactive_hint(rt) is None


async def test_a_decision_taken_without_the_vault_lease_is_recorded_by_the_next_reflect(
    vault, db_path
) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insights = {i.title.split()[-1]: i for i in (await reflect(rt)).insights}
        rt.require_sync().writable = False  # another process holds the vault: the database only
        await decide_insight(rt, insights["SQLite"].id, "approve")
        await decide_insight(rt, insights["Redis"].id, "dismiss")
        assert not (vault / "Insights").exists()
        rt.require_sync().writable = True  # the lease comes to this process
        await reflect(rt)
    assert (vault / "Insights" / "Shared technology - 2 entities build on SQLite.md").exists()
    dismissed = (vault / "Insights" / "Dismissed insights.md").read_text(encoding="utf-8")
    assert "Shared technology: 2 entities build on Redis" in dismissed


async def test_a_deleted_insight_note_is_not_written_again(vault, db_path) -> None:
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        one = (await reflect(rt)).insights[0]
        await decide_insight(rt, one.id, "approve")
    [note] = [p for p in (vault / "Insights").glob("*.md")]
    note.unlink()
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        assert await status_of(rt, one.id) == "approved"
    assert not note.exists()


async def test_a_decision_cut_short_is_still_recorded_in_the_vault_and_survives_a_rebuild(
    vault, db_path
) -> None:
    """Found by review: an approve or dismiss the client cancelled (or a stop, or a crash) between the decision
    and its record in the vault kept the decision in the database alone, so a rebuild lost it. The decision
    and its queued record now commit together, and the lease holder's drain writes what a call left undone."""
    import anyio

    from server.services.outbox import drain

    techs = [f"Tech{i:02d}" for i in range(12)]
    projects_sharing(VaultBuilder(vault), techs)
    async with synced(vault, db_path) as rt:
        insights = (await reflect(rt)).insights
        assert len(insights) == len(techs)
        decided = {}
        for n, insight in enumerate(insights):
            action = "approve" if n % 3 else "dismiss"
            with anyio.move_on_after(n * 0.0015):  # cancelled anywhere from before the decision to after it
                await decide_insight(rt, insight.id, action)
            decided[insight.id] = await status_of(rt, insight.id)
        await drain(rt)
        left = await rt.store.read(insights_sql.unrecorded_decisions)
        summary = await rt.store.read(lambda c: c.execute("select count(*) from outbox").fetchone()[0])
    assert left == [] and summary == 0
    assert any(s != "pending" for s in decided.values())
    for side in db_path.parent.glob(db_path.name + "*"):
        side.unlink()
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        rebuilt = {i: await status_of(rt, i) for i in decided}
    assert rebuilt == decided


# --- found by review (session 18): decisions the person took are kept, and only about notes that stand -------


async def test_deciding_or_writing_again_never_brings_back_a_record_the_person_deleted(
    vault, db_path
) -> None:
    """Once on record, an approval's note deleted by the person stays deleted: approving again and writing the
    insight into its notes again (both "harmless to repeat") leave it gone."""
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        one = next(i for i in (await reflect(rt)).insights if "SQLite" in i.title)
        await decide_insight(rt, one.id, "approve")
        [note] = list((vault / "Insights").glob("*.md"))
        note.unlink()
        await rt.require_sync().sync_vault()
        assert (await decide_insight(rt, one.id, "approve")).status == "approved"
        written = await write_insight_to_vault(rt, one.id)
        assert written.written and not note.exists()
        assert list((vault / "Insights").glob("*.md")) == []


async def test_an_approval_retracted_in_its_note_is_not_written_into_the_notes(vault, db_path) -> None:
    """The approve tool says to retract by setting `insight_status: dismissed` in the insight's note: writing
    the insight afterwards, without a reflect in between, refuses, and no entity note gets its section."""
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        one = next(i for i in (await reflect(rt)).insights if "SQLite" in i.title)
        await decide_insight(rt, one.id, "approve")
        [note] = list((vault / "Insights").glob("*.md"))
        note.write_text(
            note.read_text(encoding="utf-8").replace("insight_status: approved", "insight_status: dismissed"),
            encoding="utf-8",
        )
        await rt.require_sync().sync_vault()
        with pytest.raises(InsightNotApproved, match="dismissed"):
            await write_insight_to_vault(rt, one.id)
        with pytest.raises(InsightAlreadyDecided, match="dismissed"):
            await decide_insight(rt, one.id, "approve")
    assert "engrama:insight" not in (vault / "Projects" / "Alpha.md").read_text(encoding="utf-8")


async def test_of_two_opposite_decisions_taken_at_once_the_first_stands_and_the_second_is_refused(
    vault, db_path
) -> None:
    """Two clients deciding one insight at the same moment: one of them is told it was already decided the
    other way; the database and the vault agree on the decision that stands."""
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        ids = [i.id for i in (await reflect(rt)).insights]
        for insight_id in ids:
            outcomes = await asyncio.gather(
                decide_insight(rt, insight_id, "approve"),
                decide_insight(rt, insight_id, "dismiss"),
                return_exceptions=True,
            )
            told = [o.status for o in outcomes if not isinstance(o, BaseException)]
            refused = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(told) == 1 and len(refused) == 1, outcomes
            assert isinstance(refused[0], InsightAlreadyDecided)
            assert await status_of(rt, insight_id) == told[0]
        await reflect(rt)
        statuses = {i: await status_of(rt, i) for i in ids}
    dismissed = vault / "Insights" / "Dismissed insights.md"
    listed = dismissed.read_text(encoding="utf-8") if dismissed.exists() else ""
    notes = [p for p in (vault / "Insights").glob("*.md") if p != dismissed]
    assert len(notes) == sum(1 for s in statuses.values() if s == "approved")
    assert listed.count("shared_technology/") == sum(1 for s in statuses.values() if s == "dismissed")


async def test_a_pending_insight_about_a_deleted_note_is_neither_offered_nor_approved(vault, db_path) -> None:
    """The note an insight is about is deleted: the insight is no longer offered (surface, search hints), cannot
    be approved, and the next reflect withdraws it even when its pattern does not run."""
    b = two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        one = next(i for i in (await reflect(rt)).insights if "SQLite" in i.title)
        (vault / b.paths["Beta"]).unlink()
        await rt.require_sync().sync_vault()
        assert one.id not in [v.id for v in await surface_insights(rt, limit=10)]
        alpha = [n.id for n in await rt.store.find_nodes("Alpha")]
        assert one.id not in [s.id for s in await pending_insights_for(rt, alpha)]
        with pytest.raises(InsightError, match="deleted or archived"):
            await decide_insight(rt, one.id, "approve")
        await reflect(rt, ["stale_knowledge"])  # another pattern: this one's did not run
        assert await rt.store.read(insights_sql.get_insight, one.id) is None
    assert "engrama:insight" not in (vault / "Projects" / "Alpha.md").read_text(encoding="utf-8")


async def test_a_dismissed_list_that_is_not_utf8_is_reported_and_left_as_it_is(vault, db_path) -> None:
    """Dismissing adds a line to `Insights/Dismissed insights.md`; when that file is not UTF-8 (re-saved in
    Latin-1 by some editor) the decision holds, the vault record is said to have failed, and the file keeps
    its bytes (before, UTF-8 was appended to it: a file of two encodings)."""
    two_projects_on_sqlite(vault)
    listed = vault / "Insights" / "Dismissed insights.md"
    original = "# Dismissed insights\n\n- 2025-01-01 · Caf\u00e9 ideas · `x/1`\n".encode("latin-1")
    async with synced(vault, db_path) as rt:
        one, two = (await reflect(rt)).insights
        await decide_insight(rt, one.id, "dismiss")  # the list is made
        listed.write_bytes(original)
        decision = await decide_insight(rt, two.id, "dismiss")
    assert decision.status == "dismissed" and "not UTF-8" in decision.message
    assert listed.read_bytes() == original


async def test_the_dismissed_list_is_read_and_added_to_wherever_the_person_moved_it(vault, db_path) -> None:
    """Review 18a: the list of dismissed insights moved into `Archive/` was not read back after a rebuild (the
    dismissed insight came back pending) and a new list was started at the old place. It is found by its name,
    which its frontmatter keeps through a move or a rename of the file."""
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        one, two = (await reflect(rt)).insights
        await decide_insight(rt, one.id, "dismiss")
    (vault / "Archive").mkdir()
    moved = vault / "Archive" / "Old dismissals.md"
    (vault / "Insights" / "Dismissed insights.md").rename(moved)
    for side in db_path.parent.glob(db_path.name + "*"):
        side.unlink()
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        assert await status_of(rt, one.id) == "dismissed"
        await decide_insight(rt, two.id, "dismiss")
    assert not (vault / "Insights" / "Dismissed insights.md").exists()
    text = moved.read_text(encoding="utf-8")
    assert text.count("shared_technology/") == 2


async def test_reflect_does_not_feed_on_the_links_of_its_own_write_back(vault, db_path) -> None:
    """Review 18a: the wikilinks engrama writes in an approved insight's section ("About: [[Caching]], ...")
    became graph edges, and the next reflect proposed "Concept cluster: 3 entities share Memoization", which
    only those links supported. A section's links are engrama's, not the person's: not read into the graph."""
    b = VaultBuilder(vault)
    b.note("Concepts", "Caching", "Concept", body="Keep results close.\n")
    b.note("Concepts", "Memoization", "Concept", body="Caching function results: see [[Caching]].\n")
    b.note("Projects", "Alpha", "Project", body="Alpha relies on [[Caching]].\n")
    b.note("Projects", "Beta", "Project", body="Beta relies on [[Caching]] too.\n")
    async with synced(vault, db_path) as rt:
        [one] = (await reflect(rt, ["concept_clustering"])).insights
        await decide_insight(rt, one.id, "approve")
        assert len((await write_insight_to_vault(rt, one.id)).written) == 4
        await rt.require_sync().sync_vault()
        again = await reflect(rt, ["concept_clustering"])
        links = await rt.store.read(
            lambda c: c.execute(
                "select count(*) from edges e join nodes s on s.id = e.source join nodes t on t.id = e.target "
                "where e.valid_to is null and s.name = 'Alpha' and t.name = 'Memoization'"
            ).fetchone()[0]
        )
    assert again.created == 0 and links == 0
    assert "Memoization]]" in (vault / "Projects" / "Alpha.md").read_text(encoding="utf-8")  # written, though


async def test_an_approval_written_into_notes_survives_a_rebuild_without_its_own_note(vault, db_path) -> None:
    """Review 21b: the person deleted an approved insight's own note, keeping the sections written into the
    notes of its entities; after a rebuild, reflect proposed it again as pending."""
    two_projects_on_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insights = {i.title.split()[-1]: i for i in (await reflect(rt)).insights}
        await decide_insight(rt, insights["SQLite"].id, "approve")
        written = (await write_insight_to_vault(rt, insights["SQLite"].id)).written
    assert written
    (vault / "Insights" / "Shared technology - 2 entities build on SQLite.md").unlink()
    for side in db_path.parent.glob(db_path.name + "*"):
        side.unlink()
    async with synced(vault, db_path) as rt:
        await reflect(rt)
        assert await status_of(rt, insights["SQLite"].id) == "approved"
        assert all(s.id != insights["SQLite"].id for s in await surface_insights(rt))
        row = await rt.store.read(insights_sql.get_insight, insights["SQLite"].id)
        assert sorted(row.written_paths) == sorted(written)
    assert not (
        vault / "Insights" / "Shared technology - 2 entities build on SQLite.md"
    ).exists()  # not again
