"""Search on a real temporary vault synced into a real SQLite file: ranking, filters, explain, limits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import Future
from pathlib import Path

import pytest
import sqlean

from server.runtime import Runtime, open_runtime
from server.search.fts_query import query_tokens
from server.search.fusion import FULLTEXT, passage_evidence
from server.search.names import all_names_match, query_names, weighted_match
from server.search.service import DEFAULT_TUNING, AsideHits, _aside_hits, _Plan, _rank, search
from server.settings import Settings
from server.store.search_sql import NodeFilter, PassageHit

CORPUS = {
    "Projects/Engrama.md": (
        "---\ntype: Project\n---\nEngrama keeps long-term memory for assistants in an Obsidian vault.\n"
        "The graph lives in one SQLite file; see [[SQLite]].\n"
    ),
    "Technologies/SQLite.md": (
        "---\ntype: Technology\n---\nAn embedded database engine.\nFTS5 gives full-text search ranked by bm25.\n"
    ),
    "Garden/Tomatoes.md": "Tomatoes want full sun, deep watering twice a week and a stake by June.\n",
    "Garden/Basil.md": "Basil grows next to the tomatoes; pinch the flowers so the leaves stay sweet.\n",
    "People/Caroline research.md": "Caroline spent the spring on research into adoption agencies.\n",
    "People/Team research.md": "The team did research on adoption statistics for the quarterly report.\n",
    "Travel/Lisbon trip.md": "# Day one\nTrams, pastéis de nata and the castle.\n# Day two\nSintra by train.\n",
    "Cooking/Bread.md": "Sourdough starter: feed it flour and water daily; bake at 250 degrees.\n",
}


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    for rel, text in CORPUS.items():
        write(vault, rel, text)
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


async def names(rt: Runtime, query: str, **kw) -> list[str]:
    return [hit.name for hit in (await search(rt, query, **kw)).results]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("which database engine ranks full-text search?", "SQLite"),
        ("when should tomatoes be staked?", "Tomatoes"),
        ("how do I keep basil leaves sweet", "Basil"),
        ("what did Caroline research?", "Caroline research"),
        ("how often to feed a sourdough starter", "Bread"),
        ("train to Sintra", "Lisbon trip"),
        ("where does engrama keep its memory", "Engrama"),
    ],
)
async def test_search_ranks_the_note_that_answers_first(rt: Runtime, question: str, expected: str) -> None:
    assert (await names(rt, question))[0] == expected


async def test_results_are_notes_with_their_best_passage_as_snippet(rt: Runtime) -> None:
    response = await search(rt, "Sintra by train")
    top = response.results[0]
    assert (top.name, top.label, top.path) == ("Lisbon trip", "Note", "Travel/Lisbon trip.md")
    assert top.snippet == "Sintra by train."
    assert top.confidence == 1.0 and top.updated_at
    assert top.signals is None  # only when explain is asked
    assert response.search_mode == "fulltext" and response.degraded_reason is None


async def test_explain_gives_the_score_of_each_signal(rt: Runtime) -> None:
    [top, *_] = (await search(rt, "what did Caroline research?", explain=True)).results
    assert top.signals is not None
    assert {"note", "passage", "names", "recency"} <= top.signals.keys()
    assert top.score == pytest.approx(sum(top.signals.values()), abs=1e-3)


async def test_a_linked_note_is_boosted_by_its_strong_neighbour(rt: Runtime) -> None:
    hits = (await search(rt, "engrama memory in one database file", explain=True)).results
    by_name = {h.name: h for h in hits}
    assert hits[0].name == "Engrama"
    assert by_name["SQLite"].signals and by_name["SQLite"].signals.get("graph", 0) > 0


async def test_a_fresh_confident_memory_wins_a_tie(rt: Runtime, vault: Path) -> None:
    write(vault, "Notes/Kettle a.md", "The kettle descaler is under the sink.\n")
    write(vault, "Notes/Kettle b.md", "The kettle descaler is under the sink.\n")
    await rt.require_sync().sync_vault()
    await rt.store.write(
        lambda conn: conn.execute("update nodes set confidence = 0.2 where name = 'Kettle a'")
    )
    assert (await names(rt, "kettle descaler"))[:2] == ["Kettle b", "Kettle a"]


async def test_label_filter_keeps_only_that_label(rt: Runtime) -> None:
    assert await names(rt, "sqlite database engrama", label="Technology") == ["SQLite"]
    assert await names(rt, "tomatoes", label="Project") == []


async def test_archived_notes_are_hidden_unless_asked_for(rt: Runtime, vault: Path) -> None:
    (vault / "Cooking/Bread.md").unlink()
    await rt.require_sync().sync_vault()
    assert "Bread" not in await names(rt, "sourdough starter")
    assert await names(rt, "sourdough starter", include_archived=True) == ["Bread"]


async def test_as_of_finds_a_note_deleted_since_but_not_one_deleted_before(rt: Runtime, vault: Path) -> None:
    write(vault, "Cooking/Bread.md", "---\ndate: 2024-01-10\n---\n" + CORPUS["Cooking/Bread.md"])
    await rt.require_sync().sync_path("Cooking/Bread.md")
    (vault / "Cooking/Bread.md").unlink()
    await rt.require_sync().sync_vault()
    assert "Bread" not in await names(rt, "sourdough starter")
    assert await names(rt, "sourdough starter", as_of="2024-03-01") == ["Bread"]  # it was there then
    assert "Bread" not in await names(rt, "sourdough starter", as_of="2023-12-31")  # not yet written
    assert "Bread" not in await names(rt, "sourdough starter", as_of="2999-01-01")


async def test_as_of_keeps_the_nodes_valid_on_that_day(rt: Runtime) -> None:
    await rt.store.write(
        lambda conn: conn.execute(
            "update nodes set valid_from = '2024-01-01T09:00:00Z', valid_to = '2024-06-30T18:00:00Z' "
            "where name = 'Bread'"
        )
    )
    assert await names(rt, "sourdough", as_of="2024-03-01") == ["Bread"]
    assert await names(rt, "sourdough", as_of="2024-06-30") == ["Bread"]  # a date covers its whole day
    assert await names(rt, "sourdough", as_of="2024-07-01") == []
    assert await names(rt, "sourdough", as_of="2023-12-31T23:59:59Z") == []
    assert await names(rt, "sourdough", as_of="2024-01-01T09:59:00+01:00") == []  # 08:59Z: not yet


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "01/03/2024", "2024-02-30"])
async def test_a_bad_as_of_says_which_format_is_expected(rt: Runtime, bad: str) -> None:
    with pytest.raises(ValueError, match="ISO date such as 2025-03-01"):
        await search(rt, "sourdough", as_of=bad)


async def test_limit_is_clamped_to_one_through_fifty(rt: Runtime, vault: Path) -> None:
    for i in range(60):
        write(vault, f"Bulk/Note {i}.md", f"Shared marker word zebrafish number {i}.\n")
    await rt.require_sync().sync_vault()
    assert len(await names(rt, "zebrafish", limit=0)) == 1
    assert len(await names(rt, "zebrafish", limit=3)) == 3
    assert len(await names(rt, "zebrafish", limit=500)) == 50


@pytest.mark.parametrize("query", ["", "   ", "the of and", "what is it?", "?!"])
async def test_an_empty_or_stopword_only_query_finds_nothing(rt: Runtime, query: str) -> None:
    response = await search(rt, query)
    assert response.results == [] and response.search_mode == "fulltext"


async def test_an_edited_note_is_found_by_its_new_words_only(rt: Runtime, vault: Path) -> None:
    write(vault, "Cooking/Bread.md", "Focaccia with rosemary and olive oil.\n")
    await rt.require_sync().sync_vault()
    assert await names(rt, "sourdough starter flour") == []
    assert await names(rt, "focaccia rosemary") == ["Bread"]


async def test_a_note_with_an_empty_body_is_found_by_its_name(rt: Runtime, vault: Path) -> None:
    write(vault, "People/Margarethe Okonkwo.md", "---\ntype: Person\n---\n")
    await rt.require_sync().sync_vault()
    hits = (await search(rt, "Margarethe Okonkwo")).results
    assert [h.name for h in hits] == ["Margarethe Okonkwo"] and hits[0].snippet == ""


_CHAT = [
    "Maya: The weather turned cold again and the bus was late this morning.",
    "Leo: I spent the evening sorting old photos from the attic into albums.",
    "Maya: My sister called about the birthday dinner plans for next month.",
    "Leo: The neighbours finally finished painting their fence a bright green.",
    "Maya: I tried the new bakery on the corner, the bread was very good.",
    "Leo: Work was quiet, mostly meetings about the budget for next year.",
]


async def test_a_note_that_answers_in_two_separate_places_has_the_stronger_passage_signal(
    vault: Path, db_path: Path
) -> None:
    # Same best line in both chat logs; one of them comes back to the subject twelve turns later (the
    # multi-hop case: the evidence is spread out). Its passage signal must count that second place.
    write(
        vault,
        "Two places.md",
        "\n".join(
            [
                "Maya: We went kayaking on the lake last weekend.",
                *_CHAT,
                *_CHAT,
                "Maya: We go kayaking on the river in June.",
            ]
        ),
    )
    write(
        vault,
        "One place.md",
        "\n".join(
            [
                "Maya: We went kayaking on the lake last week.",
                *_CHAT,
                *_CHAT,
                "Maya: We go to the river in June, it is lovely.",
            ]
        ),
    )
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        await rt.require_sync().sync_vault()
        hits = {h.name: h for h in (await search(rt, "kayaking", explain=True)).results}
    two, one = hits["Two places"].signals, hits["One place"].signals
    assert two is not None and one is not None
    assert two["passage"] > one["passage"] + 0.1
    assert two["passage"] == pytest.approx(FULLTEXT.passage)


def test_passage_evidence_counts_a_separate_passage_but_not_an_overlapping_neighbour() -> None:
    hits = [
        PassageHit(1, "neighbours", 5.0, 0),
        PassageHit(2, "neighbours", 4.9, 1),  # shares lines with ordinal 0: the same evidence again
        PassageHit(3, "apart", 4.5, 0),
        PassageHit(4, "apart", 4.0, 3),
        PassageHit(5, "single", 6.0, 2),
    ]
    evidence = passage_evidence(hits, 0.3)
    assert evidence == pytest.approx({"neighbours": 5.0, "apart": 4.5 + 0.3 * 4.0, "single": 6.0})
    assert passage_evidence(hits, 0.0) == {"neighbours": 5.0, "apart": 4.5, "single": 6.0}


async def test_the_part_read_aside_gives_the_same_ranking_as_reading_it_all_on_one_connection(
    rt: Runtime,
) -> None:
    """Search scores whole notes on the store's second connection while passages are scored on the main one;
    the ranking must be exactly what one connection gives, and a failed aside read must not fail the search."""

    def view(
        ranked,
    ) -> list[tuple]:  # the recency signal moves with the clock between calls; the rest must not
        return [
            (c.node_id, c.chunk_id, snippet, {k: v for k, v in c.signals.items() if k != "recency"})
            for c, _, snippet in ranked
        ]

    broken: Future[AsideHits] = Future()
    broken.set_exception(sqlean.OperationalError("unable to open database file"))
    for question in (
        "what did Caroline research?",
        "tomatoes basil",
        "engrama sqlite memory",
        "Sintra train",
    ):
        names_ = query_names(question)
        match = weighted_match(question, names_, name_weight=2, prefix_min=5)
        assert match is not None
        plan = _Plan(
            question,
            match,
            all_names_match(names_),
            query_tokens(question),
            None,
            NodeFilter(),
            10,
            DEFAULT_TUNING,
        )
        aside = rt.store.read_aside(_aside_hits, match, None, NodeFilter(), DEFAULT_TUNING)
        parallel = view(await rt.store.read(_rank, plan, aside))
        alone = view(await rt.store.read(_rank, plan, None))
        failed = view(await rt.store.read(_rank, plan, broken))
        assert parallel == alone == failed and alone
        assert aside.result().notes  # the aside part really ran and found notes
    found = await search(rt, "what did Caroline research?")
    assert [h.name for h in found.results][0] == "Caroline research"


async def test_a_note_with_a_placeholder_date_is_synced_and_found(rt: Runtime, vault: Path) -> None:
    """A template's `due: 0000-00-00` (or a typo such as 2024-02-30) made the note "invalid YAML": it was
    neither indexed nor searchable (session 20)."""
    write(
        vault,
        "Tasks/Renew passport.md",
        "---\ndue: 0000-00-00\nasked: 2024-02-30\n---\nBook the consulate slot.\n",
    )
    report = await rt.require_sync().sync_vault()
    assert not report.errors and report.created == 1
    assert "Renew passport" in await names(rt, "consulate slot")
