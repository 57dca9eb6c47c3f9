"""Each reflect pattern on a small real vault: the vault holds the pattern and near misses that must not
trigger it; the tests check which insights come out, the entities they name and their confidence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_reflect_support import VaultBuilder, entity_ids, found, projects_sharing, synced

from server.reflect.confidence import support
from server.reflect.service import PATTERN_NAMES, ReflectError, reflect


@pytest.fixture
def b(vault: Path) -> VaultBuilder:
    return VaultBuilder(vault)


async def test_cross_project_solution_proposes_the_decision_of_another_project(b, vault, db_path) -> None:
    b.note("Concepts", "Caching", "Concept")
    b.note("Concepts", "Logging", "Concept")
    b.note("Decisions", "Add Redis cache", "Decision")
    b.note("Decisions", "Pin the driver", "Decision")
    b.note("Problems", "Slow API", "Problem", status="open", relations={"APPLIES": ["Caching"]})
    b.note(
        "Problems",
        "Slow reports",
        "Problem",
        status="resolved",
        relations={"APPLIES": ["Caching"], "SOLVED_BY": ["Add Redis cache"]},
    )
    # Near misses: an open problem in the same project as the solved one; a solution with no decision;
    # a problem marked open even though a decision is linked to it.
    b.note("Problems", "Slow search", "Problem", status="open", relations={"APPLIES": ["Caching"]})
    b.note("Problems", "Log noise", "Problem", status="open", relations={"APPLIES": ["Logging"]})
    b.note("Problems", "Log loss", "Problem", status="resolved", relations={"APPLIES": ["Logging"]})
    b.note(
        "Problems",
        "Driver crash",
        "Problem",
        status="open",
        relations={"APPLIES": ["Logging"], "SOLVED_BY": ["Pin the driver"]},
    )
    b.note("Projects", "Alpha", "Project", relations={"HAS_PROBLEM": ["Slow API", "Log noise"]})
    b.note("Projects", "Beta", "Project", relations={"HAS_PROBLEM": ["Slow reports", "Slow search"]})
    b.note("Projects", "Gamma", "Project", relations={"HAS_PROBLEM": ["Log loss", "Driver crash"]})
    async with synced(vault, db_path) as rt:
        [insight] = await found(rt, "cross_project_solution")
    assert insight.title == "Cross-project solution: Add Redis cache may solve Slow API"
    ids = b.ids
    assert entity_ids(insight) == {
        ids["Slow API"],
        ids["Add Redis cache"],
        ids["Caching"],
        ids["Slow reports"],
        ids["Alpha"],
        ids["Beta"],
    }
    assert insight.confidence == round(0.9 * 1.0 * support(2, 2), 2) == 0.54


async def test_shared_technology_gives_one_insight_per_technology(b, vault, db_path) -> None:
    b.note(
        "Projects",
        "Alpha",
        "Project",
        relations={"USES": ["SQLite", "Redis"]},
        body="We looked at [[Kafka]].",
    )
    b.note("Projects", "Beta", "Project", relations={"USES": ["SQLite"]}, body="Maybe [[Kafka]] later.")
    b.note("People", "Ana", "Person", relations={"TEACHES": ["SQLite"]})
    for tech in ("SQLite", "Redis", "Kafka"):
        b.note("Technologies", tech, "Technology")
    async with synced(vault, db_path) as rt:
        insights = await found(rt, "shared_technology")
    [insight] = insights  # Redis has one user; Kafka is only mentioned, never used
    assert insight.title == "Shared technology: 3 entities build on SQLite"
    assert entity_ids(insight) == {b.ids[n] for n in ("SQLite", "Alpha", "Beta", "Ana")}
    assert insight.confidence == round(0.8 * support(3, 2), 2) == 0.64


async def test_training_opportunity_links_open_problems_to_covering_courses(b, vault, db_path) -> None:
    b.note("Concepts", "Caching", "Concept")
    b.note("Concepts", "Logging", "Concept")
    b.note("Concepts", "Input validation", "Concept")
    b.note("Courses", "Performance 101", "Course", relations={"COVERS": ["Caching"], "TEACHES": ["Logging"]})
    b.note("Courses", "Secure coding", "Course", relations={"COVERS": ["Input validation"]})
    b.note("Problems", "Slow API", "Problem", status="open", relations={"APPLIES": ["Caching"]})
    b.note(
        "Vulnerabilities",
        "SQLi in login",
        "Vulnerability",
        status="open",
        relations={"APPLIES": ["Input validation"]},
    )
    # Near misses: resolved problem on a covered concept; open problem on a concept only *taught*.
    b.note("Problems", "Slow reports", "Problem", status="resolved", relations={"APPLIES": ["Caching"]})
    b.note("Problems", "Log noise", "Problem", status="open", relations={"APPLIES": ["Logging"]})
    async with synced(vault, db_path, modules=("teaching", "hacking")) as rt:
        insights = await found(rt, "training_opportunity")
    by_title = {i.title: i for i in insights}
    assert set(by_title) == {
        "Training opportunity: Performance 101 covers what Slow API needs",
        "Training opportunity: Secure coding covers what SQLi in login needs",
    }
    slow = by_title["Training opportunity: Performance 101 covers what Slow API needs"]
    assert entity_ids(slow) == {b.ids["Slow API"], b.ids["Performance 101"], b.ids["Caching"]}
    assert slow.confidence == round(0.8 * support(1, 1), 2) == 0.48


async def test_technique_transfer_needs_two_domains(b, vault, db_path) -> None:
    for domain in ("Security", "Teaching"):
        b.note("Domains", domain, "Domain")
    b.note("Projects", "Alpha", "Project")
    b.note("Techniques", "Fuzzing", "Technique", relations={"USED_IN": ["Security", "Teaching"]})
    b.note("Techniques", "Bisecting", "Technique", relations={"USED_IN": ["Security"]})
    b.note("Techniques", "Pairing", "Technique", relations={"USED_IN": ["Security", "Alpha"]})
    async with synced(vault, db_path, modules=("hacking",)) as rt:
        [insight] = await found(rt, "technique_transfer")
    assert insight.title == "Technique transfer: Fuzzing is used in 2 domains"
    assert entity_ids(insight) == {b.ids["Fuzzing"], b.ids["Security"], b.ids["Teaching"]}
    assert insight.confidence == 0.48


async def test_concept_clustering_needs_three_entities_and_weighs_mentions_less(b, vault, db_path) -> None:
    for concept in ("Caching", "Logging", "Sharding"):
        b.note("Concepts", concept, "Concept")
    b.note("Projects", "Alpha", "Project", relations={"APPLIES": ["Caching", "Logging", "Sharding"]})
    b.note("Problems", "Slow API", "Problem", relations={"APPLIES": ["Caching", "Logging", "Sharding"]})
    b.note("Decisions", "Add Redis", "Decision", relations={"APPLIES": ["Caching"]})
    b.note("Notes", "Reading list", body="Read about [[Sharding]] this week.")
    async with synced(vault, db_path) as rt:
        insights = {i.title: i for i in await found(rt, "concept_clustering")}
    assert set(insights) == {
        "Concept cluster: 3 entities share Caching",
        "Concept cluster: 3 entities share Sharding",
    }
    caching = insights["Concept cluster: 3 entities share Caching"]
    assert entity_ids(caching) == {b.ids[n] for n in ("Caching", "Alpha", "Slow API", "Add Redis")}
    assert caching.confidence == round(0.7 * support(3, 3), 2) == 0.42
    # Two typed relations and one body wikilink: strength (1 + 1 + 0.6) / 3.
    assert insights["Concept cluster: 3 entities share Sharding"].confidence == round(
        0.7 * (2.6 / 3) * 0.6, 2
    )


async def test_stale_knowledge_flags_old_or_doubted_nodes_of_active_work(b, vault, db_path) -> None:
    b.note(
        "Projects",
        "Alpha",
        "Project",
        status="active",
        relations={"USES": ["Flask", "Django", "Tornado"]},
        body="A [[Hunch]] about users.",
    )
    b.note("Projects", "Legacy", "Project", status="done", relations={"USES": ["Falcon"]})
    b.note("Technologies", "Flask", "Technology", age_days=200)
    b.note("Technologies", "Django", "Technology", age_days=10)
    b.note("Technologies", "Tornado", "Technology", extra={"updated": "2020-01-01"})
    b.note("Technologies", "Falcon", "Technology", age_days=200)  # old, but only a finished project uses it
    b.note("Concepts", "Hunch", "Concept", extra={"confidence": "0.2"})
    async with synced(vault, db_path) as rt:
        insights = {i.entities[0].name: i for i in await found(rt, "stale_knowledge")}
    assert set(insights) == {"Flask", "Tornado", "Hunch"}
    assert insights["Flask"].title.startswith("Stale knowledge: Flask (not updated for 2")
    assert entity_ids(insights["Flask"]) == {b.ids["Flask"], b.ids["Alpha"]}
    assert insights["Flask"].confidence == round(0.8 * support(1, 1), 2)  # 200 days: full severity
    # Linked by a body wikilink (0.6), confidence 0.2 gives severity 0.8.
    assert insights["Hunch"].confidence == round(0.8 * 0.6 * 0.6 * 0.8, 2)
    assert insights["Hunch"].title == "Stale knowledge: Hunch (confidence 0.20)"


async def test_under_connected_waits_for_a_big_enough_graph(b, vault, db_path) -> None:
    ring = [f"Idea {i}" for i in range(18)]
    for i, name in enumerate(ring):  # every idea relates to the next: two neighbours each
        b.note("Concepts", name, "Concept", relations={"RELATED_TO": [ring[(i + 1) % len(ring)]]})
    b.note("Notes", "Orphan")
    async with synced(vault, db_path) as rt:
        result = await reflect(rt, ["under_connected"])
        assert result.skipped_patterns == ["under_connected"]  # 19 notes: not yet
    b.note("Notes", "Leaf", body="Only about [[Idea 0]] and [[Nowhere]].")
    b.note("Notes", "Twig", body="Only about [[Idea 3]].")
    async with synced(vault, db_path) as rt:
        insights = {i.entities[0].name: i for i in await found(rt, "under_connected")}
    # Leaf has two neighbours (Idea 0 and a stub); the stub itself is never flagged.
    assert set(insights) == {"Orphan", "Twig"}
    assert insights["Orphan"].title == "Under-connected: Orphan has no relations"
    assert insights["Orphan"].confidence == round(0.6 * 0.6, 2)
    assert insights["Twig"].confidence == round(0.6 * 0.6 * 0.5, 2)
    assert entity_ids(insights["Twig"]) == {b.ids["Twig"], b.ids["Idea 3"]}


async def test_patterns_without_data_are_skipped(b, vault, db_path) -> None:
    b.note("Notes", "Groceries")
    async with synced(vault, db_path) as rt:
        result = await reflect(rt)
    assert result.created == 0 and result.insights == []
    assert result.skipped_patterns == list(PATTERN_NAMES)


async def test_unknown_pattern_names_the_valid_ones(b, vault, db_path) -> None:
    async with synced(vault, db_path) as rt:
        with pytest.raises(ReflectError, match="use any of: cross_project_solution, shared_technology"):
            await reflect(rt, ["shared_tech"])


async def test_insight_notes_are_not_entities_of_patterns(b, vault, db_path) -> None:
    b.note("Technologies", "SQLite", "Technology")
    b.note("Projects", "Alpha", "Project", relations={"USES": ["SQLite"]})
    b.note("Insights", "Old idea", "Insight", relations={"ABOUT": ["SQLite"]}, body="[[SQLite]]")
    b.note("Insights", "Other idea", "Insight", relations={"ABOUT": ["SQLite"]})
    async with synced(vault, db_path) as rt:
        result = await reflect(rt, ["shared_technology", "concept_clustering"])
    assert result.insights == []


async def test_each_run_keeps_at_most_25_insights_per_pattern(b, vault, db_path) -> None:
    projects_sharing(b, [f"Tool {i:02d}" for i in range(30)])
    async with synced(vault, db_path) as rt:
        first = await reflect(rt, ["shared_technology"])
        second = await reflect(rt, ["shared_technology"])
    assert first.created == 25 and len(first.insights) == 25
    assert second.created == 0 and [i.id for i in second.insights] == [i.id for i in first.insights]


async def test_a_note_adopted_without_its_id_line_is_as_old_as_the_persons_last_change(
    b, vault, db_path
) -> None:
    """Writing the id line into a note the person last changed 200 days ago moved its file's time to now, and
    reflect took that for the person's change: no adopted note was stale for 90 days."""
    b.note("Projects", "Alpha", "Project", status="active", relations={"USES": ["Flask", "Django"]})
    b.note("Technologies", "Flask", "Technology", age_days=200)
    b.note("Technologies", "Django", "Technology", age_days=10)
    for name in ("Flask", "Django"):
        path = vault / "Technologies" / f"{name}.md"
        then = path.stat().st_mtime
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(x for x in lines if not x.startswith("engrama_id:")), encoding="utf-8")
        os.utime(path, (then, then))  # as the person left it: no id line yet
    async with synced(vault, db_path) as rt:
        assert b"engrama_id: " in (vault / "Technologies" / "Flask.md").read_bytes()  # adopted just now
        insights = {i.entities[0].name: i for i in await found(rt, "stale_knowledge")}
    assert set(insights) == {"Flask"}
    assert insights["Flask"].title.startswith("Stale knowledge: Flask (not updated for 2")
