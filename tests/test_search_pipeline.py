"""The search pipeline's steps on generated vaults (issue 13, issue 15): anchors and exact titles, the graph
walk, and distill. Real temporary vaults synced into real SQLite files."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from server.runtime import Runtime, open_runtime
from server.search import anchors, distill, walk
from server.search.service import search
from server.settings import Settings


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
async def runtime(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
        yield rt


async def top_names(rt: Runtime, query: str, **kw) -> list[str]:
    return [h.name for h in (await search(rt, query, **kw)).results]


# --- anchors ---------------------------------------------------------------------------------------------


def test_phrases_hold_every_run_of_words_and_the_whole_question() -> None:
    found = anchors.phrases("What is blocking Harbor Analytics?")
    assert found.whole == "what is blocking harbor analytics"
    assert {"harbor analytics", "harbor", "analytics", "blocking harbor analytics"} <= found.runs.keys()
    assert found.runs["harbor"] is True and found.runs["blocking"] is False  # capitalised mid-sentence
    assert "what is" not in found.runs  # stopwords only never anchor
    assert anchors.phrases("  [[Q3 - plan]]  ").whole == "q3 - plan"
    assert "q3 - plan" in anchors.phrases("notes on the Q3 - plan").runs


def test_a_titles_own_brackets_stay_and_only_what_wraps_the_question_goes() -> None:
    """Review 22d: "Dune (1965)" lost its ")" with the question's edges and was never the exact title."""
    assert anchors.phrases("Dune (1965)").whole == "dune (1965)"
    assert anchors.phrases("[[Dune (1965)]]").whole == "dune (1965)"
    assert anchors.phrases('"Budget (draft)"?').whole == "budget (draft)"
    assert anchors.phrases("(Harbor Analytics)").whole == "harbor analytics"
    assert "dune (1965)" in anchors.phrases("why was Dune (1965) banned?").runs
    assert "dune (1965)" in anchors.phrases("what did I note about [[Dune (1965)]]?").runs
    assert anchors.phrases("#harbor").bare == "harbor"  # looked up when the question as typed is no title


def test_a_one_word_name_counts_fully_only_when_capitalised() -> None:
    assert anchors.strength("harbor analytics", False) == 1.0
    assert anchors.strength("research", True) == 1.0
    assert anchors.strength("research", False) == anchors.WEAK


async def test_the_exact_title_comes_first_whatever_shares_its_words(runtime: Runtime, vault: Path) -> None:
    write(vault, "Notes/Sync conflicts.md", "Short note.\n")
    for i in range(12):
        write(
            vault,
            f"Notes/Other {i}.md",
            "Sync conflicts sync conflicts: mobile sync conflicts again, conflicts in every sync.\n" * 3,
        )
    await runtime.require_sync().sync_vault()
    assert (await top_names(runtime, "sync conflicts"))[0] == "Sync conflicts"
    assert (await top_names(runtime, "SYNC CONFLICTS?"))[0] == "Sync conflicts"
    assert (await top_names(runtime, "[[Sync conflicts]]"))[0] == "Sync conflicts"


async def test_a_title_with_brackets_is_the_exact_title(runtime: Runtime, vault: Path) -> None:
    write(vault, "Books/Dune.md", "Dune is a 1965 novel. Dune, 1965: the first edition of Dune.\n")
    write(vault, "Books/Dune (1965).md", "Read in the summer. Loved the ecology.\n")
    write(vault, "Ideas/Budget.md", "Budget draft: the draft budget is a budget draft.\n")
    write(vault, "Ideas/Budget (draft).md", "Rough numbers for next year.\n")
    await runtime.require_sync().sync_vault()
    for asked in ("Dune (1965)", "[[Dune (1965)]]", "dune (1965)?"):
        hits = (await search(runtime, asked, explain=True)).results
        assert (hits[0].name, hits[0].step) == ("Dune (1965)", "exact title"), asked
    assert (await top_names(runtime, '"Budget (draft)"'))[0] == "Budget (draft)"
    assert (await top_names(runtime, "what does Budget (draft) say"))[0] == "Budget (draft)"


async def test_an_alias_is_a_title_too(runtime: Runtime, vault: Path) -> None:
    write(vault, "People/Maya Lindqvist.md", "---\naliases: [ML, Maya L]\n---\nWorks on the import.\n")
    for i in range(6):
        write(vault, f"Notes/Maya {i}.md", "Maya said Maya L was the name on the Maya import ticket.\n")
    await runtime.require_sync().sync_vault()
    assert (await top_names(runtime, "maya l"))[0] == "Maya Lindqvist"


async def test_a_title_longer_than_the_runs_looked_up_still_comes_first(
    runtime: Runtime, vault: Path
) -> None:
    # Soak seed 4711: the whole question was the title of a note (nine words), but only the notes its words
    # found were candidates, and none of its words was in the index for it (an alias here; there, a note whose
    # whole-note row was missing).
    title = "Under-connected - Juniper 2 2 2 has no relations"
    write(vault, "Concepts/Kestrel.md", f"---\naliases: [{title}]\n---\nAbout birds.\n")
    for i in range(8):
        write(vault, f"Notes/Juniper {i}.md", "Juniper has no relations yet; under-connected notes.\n")
    await runtime.require_sync().sync_vault()
    assert (await top_names(runtime, title))[0] == "Kestrel"
    assert (await top_names(runtime, title, include_archived=True))[0] == "Kestrel"


async def test_a_question_holding_a_full_name_ranks_that_note_near_the_top(
    runtime: Runtime, vault: Path
) -> None:
    write(vault, "Projects/Harbor Analytics.md", "Dashboards for the port authority.\n")
    for i in range(10):
        write(
            vault, f"Log/Day {i}.md", f"Blocking issue {i}: the blocking migration is blocking the release.\n"
        )
    await runtime.require_sync().sync_vault()
    hits = (await search(runtime, "what is blocking Harbor Analytics?", explain=True)).results
    assert "Harbor Analytics" in [h.name for h in hits[:3]]
    named = next(h for h in hits if h.name == "Harbor Analytics")
    assert named.signals is not None and named.signals.get("anchor", 0) > 0


# --- exact titles at scale (issue 15: 10,000 notes whose names share words) --------------------------------

VOCAB = (
    "amber basin cedar delta ember fjord granite harbor iris juniper kestrel lumen meadow nectar orchard pine "
    "quartz raven sierra tundra umber valley willow yarrow zephyr"
).split()


@pytest.fixture(scope="module")
def big_vault(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """10,000 notes titled by three words of a 25-word vocabulary, bodies drawn from the same words and
    linking five others: every word of every title is in thousands of notes."""
    rng = random.Random(1513)
    root = tmp_path_factory.mktemp("big") / "vault"
    titles: list[str] = []
    seen: set[str] = set()
    while len(titles) < 10_000:
        title = " ".join(rng.sample(VOCAB, 3)).capitalize()
        if title.casefold() not in seen:
            seen.add(title.casefold())
            titles.append(title)
    for i, title in enumerate(titles):
        words = " ".join(rng.choice(VOCAB) for _ in range(40))
        links = " ".join(f"[[{titles[rng.randrange(len(titles))]}]]" for _ in range(5))
        write(root, f"n{i // 1000}/{title}.md", f"{words}\n{links}\n")
    return root, titles


async def test_every_exact_title_is_first_among_ten_thousand_notes_sharing_its_words(
    big_vault: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, titles = big_vault
    async with open_runtime(Settings(vault=root, db_path=tmp_path / "big.db", watch=False)) as rt:
        await rt.require_sync().sync_vault()
        rng = random.Random(7)
        for title in rng.sample(titles, 10):
            for asked in (title, title.lower(), title.upper()):
                assert (await top_names(rt, asked, limit=5))[0] == title, asked


# --- the graph walk ------------------------------------------------------------------------------------------


def test_the_walk_favours_a_note_linked_from_several_seeds() -> None:
    inflow = walk.personalized_pagerank([("a", "x"), ("b", "x"), ("b", "y")], {"a": 1, "b": 1})
    assert inflow["x"] > inflow["y"] > 0
    assert walk.personalized_pagerank([], {"a": 1}) == {}
    assert walk.personalized_pagerank([("a", "b")], {}) == {}


def test_a_hub_spreads_its_mass_thin() -> None:
    links = [("seed", "hub"), ("seed", "direct")] + [("hub", f"leaf{i}") for i in range(50)]
    inflow = walk.personalized_pagerank(links, {"seed": 1})
    assert inflow["direct"] > 10 * inflow["leaf0"]


async def test_a_note_linked_to_the_named_entity_ranks_though_it_shares_no_word(
    runtime: Runtime, vault: Path
) -> None:
    """The only way to the answer is the graph: the person notes share no word with the question, and ten
    notes do share its words."""
    write(vault, "Projects/Zephyr.md", "An internal tool. Team: [[Ingrid Solberg]], [[Tomas Berg]].\n")
    write(vault, "People/Ingrid Solberg.md", "Backend engineer.\n")
    write(vault, "People/Tomas Berg.md", "Designer, likes sketching.\n")
    write(vault, "People/Unrelated.md", "Accountant, lunch on fridays.\n")
    for i in range(10):
        write(vault, f"Log/Team {i}.md", f"Who works on what: team rota {i}, works every week on the rota.\n")
    await runtime.require_sync().sync_vault()
    hits = (await search(runtime, "who works on Zephyr?", explain=True)).results
    names = [h.name for h in hits[:5]]
    assert {"Ingrid Solberg", "Tomas Berg"} <= set(names)
    assert "Unrelated" not in names
    person = next(h for h in hits if h.name == "Ingrid Solberg")
    assert person.signals is not None and person.signals.get("graph", 0) > 0
    assert not {"note", "passage"} & {k for k, v in person.signals.items() if v > 0}


async def test_two_links_away_is_reached_through_the_named_entity(runtime: Runtime, vault: Path) -> None:
    write(vault, "Projects/Zephyr.md", "Tool. Owned by [[Platform team]].\n")
    write(vault, "Teams/Platform team.md", "Group note.\n")
    write(vault, "People/Ingrid Solberg.md", "Lead of [[Platform team]].\n")
    for i in range(10):
        write(vault, f"Log/Lead {i}.md", f"Who leads the standup {i}? The standup lead changes.\n")
    await runtime.require_sync().sync_vault()
    names = await top_names(runtime, "who leads Zephyr?")
    assert "Ingrid Solberg" in names[:5]


# --- distill -------------------------------------------------------------------------------------------------


def test_a_copy_of_a_shown_passage_gives_way_to_a_different_note() -> None:
    texts = {
        "a": "visited doctor smith about the knee pain on monday",
        "a2": "visited doctor smith about the knee pain on monday again",
        "b": "the dermatologist doctor jones checked the rash",
    }
    scores = {"a": 1.0, "a2": 0.95, "b": 0.3}
    assert distill.diversify(["a", "a2", "b"], scores.__getitem__, str, texts) == ["a", "b", "a2"]
    # Different notes on one topic share words, not runs of words: relevance decides.
    texts2 = {
        "a": "visited doctor smith about the knee pain",
        "a2": "the knee doctor said pain would pass",
        "b": "doctor jones checked the rash",
    }
    assert distill.diversify(["a", "a2", "b"], scores.__getitem__, str, texts2) == ["a", "a2", "b"]
    assert distill.resemblance(distill.shingles("a b c d"), distill.shingles("a b c d")) == 1.0


async def test_evidence_spread_over_three_notes_fills_the_top_five_before_copies(
    runtime: Runtime, vault: Path
) -> None:
    strong = (
        "Doctor visit: Dr. Okafor checked my knee, the knee doctor said rest the knee, knee doctor again.\n"
    )
    for i in range(4):  # the same strong log pasted into four notes
        write(vault, f"Chats/Copy {i}.md", strong)
    write(vault, "Chats/Dentist.md", "Saw the dentist, Dr. Haas, about a cracked molar. Another doctor.\n")
    write(vault, "Chats/Skin.md", "The dermatologist, a doctor named Lee, looked at the rash on my arm.\n")
    for i in range(8):
        write(vault, f"Chats/Filler {i}.md", f"Cooking pasta and a walk in the park, day {i}.\n")
    await runtime.require_sync().sync_vault()
    names = await top_names(runtime, "which doctors did I visit?", limit=5)
    assert {"Dentist", "Skin"} <= set(names)
    assert len([n for n in names if n.startswith("Copy")]) <= 3


# --- time routing -----------------------------------------------------------------------------------------


async def test_time_words_favour_the_note_dated_in_their_window(runtime: Runtime, vault: Path) -> None:
    """Against a fixed reference time, "last Saturday" is 2023-05-27: of notes matching the question alike,
    the one dated that day (by frontmatter, by a daily-note name) comes first; asked days earlier, another."""
    write(vault, "Daily/2023-05-27.md", "Hiked the ridge trail with Rachel, then a picnic.\n")
    write(
        vault,
        "Log/Ridge walk.md",
        "---\ndate: 2023-05-20\n---\nHiked the coast path with Tom, then a swim.\n",
    )
    write(vault, "Log/Lake day.md", "---\ndate: 2023-03-02\n---\nHiked the lake loop with Ana, then a nap.\n")
    filler = "The club meets on Sundays to plan the season, the budget, the new maps and the kit list"
    for i in range(6):  # weaker matches, so the text scores have a scale
        write(vault, f"Notes/Club {i}.md", f"{filler}; a hike is planned for autumn, note {i}.\n")
    await runtime.require_sync().sync_vault()
    question = "where did I hike last Saturday?"
    hits = (await search(runtime, question, reference_time="2023-05-30T23:42:00", explain=True)).results
    assert hits[0].name == "2023-05-27"
    assert hits[0].signals is not None and hits[0].signals["time"] > 0
    assert (await top_names(runtime, question, reference_time="2023-05-24"))[0] == "Ridge walk"


async def test_a_capitalised_date_word_says_when_and_is_not_taken_for_a_name(
    runtime: Runtime, vault: Path
) -> None:
    """ "in March" is a window of dates the notes' dates answer, not a name the notes must hold: the note of a
    March appointment that never says "March" comes before notes that say it about something else (as a name,
    "march" weighed double and a note holding it got the all-names bonus)."""
    write(
        vault,
        "Log/Checkup.md",
        "---\ndate: 2023-03-14\n---\nDoctor's appointment: the yearly checkup, blood test booked.\n",
    )
    for i in range(3):
        write(
            vault,
            f"Notes/Rally {i}.md",
            f"---\ndate: 2023-0{i + 5}-02\n---\nThe March for Science rally; the doctor from the clinic spoke, "
            f"note {i}.\n",
        )
    filler = (
        "Plans for the garden, the shed roof and the new fence; asked the doctor next door about the hedge"
    )
    for i in range(10):  # weaker matches, so the text scores have a scale
        write(vault, f"Notes/Garden {i}.md", f"---\ndate: 2023-01-1{i}\n---\n{filler}, note {i}.\n")
    await runtime.require_sync().sync_vault()
    question = "How many doctor's appointments did I go to in March?"
    hits = (await search(runtime, question, reference_time="2023-05-30T23:42:00", explain=True)).results
    assert hits[0].name == "Checkup"
    assert hits[0].signals is not None and hits[0].signals["time"] > 0
    assert all((h.signals or {}).get("names", 0.0) == 0.0 for h in hits)
    # Without a date phrase the capital still makes a name: "the March" rally notes hold it.
    hits = (await search(runtime, "Who spoke at the March rally?", explain=True)).results
    assert hits[0].name.startswith("Rally") and (hits[0].signals or {}).get("names", 0.0) > 0


DAYS = [
    "Groceries and laundry.",
    "Long run by the river, twelve kilometres.",
    "Team standup; wrote the quarterly report.",
    "Dinner with Ana at the Thai place.",
    "Fixed the bike chain, cleaned the garage.",
]


def write_daily_notes(vault: Path, first: date, count: int) -> None:
    for i in range(count):
        day = first + timedelta(days=i)
        write(vault, f"Daily/{day.isoformat()}.md", f"{DAYS[i % len(DAYS)]}\nSlept well.\n")


async def test_the_notes_dated_in_the_window_are_found_whatever_their_words(
    runtime: Runtime, vault: Path
) -> None:
    """ "What did I do last Saturday?": that day's daily note never says "Saturday", and no word of it is in
    the question; it is found by its date (step "time"), beside the note that only shares the word. Another
    reference time finds another day; the same words with no date phrase do not bring the daily notes."""
    write_daily_notes(vault, date(2023, 5, 1), 30)
    write(vault, "Saturday ideas.md", "Ideas for a Saturday: hike, museum, market.\n")
    await runtime.require_sync().sync_vault()
    hits = (
        await search(runtime, "What did I do last Saturday?", reference_time="2023-05-24", explain=True)
    ).results
    steps = {h.name: h.step for h in hits}
    assert "2023-05-20" in steps and steps["2023-05-20"] == "time"
    assert not {name for name in steps if name.startswith("2023-")} - {"2023-05-20"}
    assert "2023-05-13" in await top_names(
        runtime, "What did I do last Saturday?", reference_time="2023-05-16"
    )
    assert await top_names(runtime, "What did I do on Saturday mornings?") == ["Saturday ideas"]


async def test_a_window_holding_more_notes_than_the_candidates_adds_none(
    runtime: Runtime, vault: Path
) -> None:
    """A window that holds more notes than the candidates kept does not single any out: "this year" over 60
    daily notes brings none of those sharing no word with the question, while "last Saturday" still does."""
    write_daily_notes(vault, date(2023, 3, 31), 60)
    await runtime.require_sync().sync_vault()
    assert await top_names(runtime, "What did I do this year?", reference_time="2023-05-30") == []
    assert await top_names(runtime, "What did I do last Saturday?", reference_time="2023-05-30") == [
        "2023-05-27"
    ]


async def test_an_order_question_brings_every_event_into_the_first_places(
    runtime: Runtime, vault: Path
) -> None:
    write(vault, "Log/Blender.md", "Bought the blender at the market.\n")
    write(vault, "Log/Espresso.md", "The espresso machine arrived; bought it online.\n")
    for i in range(8):
        write(
            vault,
            f"Log/Market {i}.md",
            f"Which stall first? Market day {i}: bought bread, bought cheese first.\n",
        )
    await runtime.require_sync().sync_vault()
    question = "Which did I buy first, the blender or the espresso machine?"
    hits = (await search(runtime, question, limit=5, explain=True)).results
    assert {"Blender", "Espresso"} <= {h.name for h in hits[:3]}


async def test_a_bad_reference_time_says_which_format_is_expected(runtime: Runtime) -> None:
    with pytest.raises(ValueError, match="reference_time must be an ISO date"):
        await search(runtime, "anything", reference_time="last tuesday")
    with pytest.raises(ValueError, match="reference_time must be an ISO date"):  # review 22d: "year 0 ..."
        await search(runtime, "anything", reference_time="0001-01-01")


async def test_a_month_in_a_date_phrase_names_no_one(runtime: Runtime, vault: Path) -> None:
    """Review 22d: "in May" anchored May Chen (alias May), and the walk from her brought her projects."""
    write(vault, "People/May Chen.md", "---\naliases: [May]\n---\nRuns finance. See [[Harbor]].\n")
    write(vault, "Projects/Harbor.md", "Dashboards for the port.\n")
    write_daily_notes(vault, date(2025, 5, 1), 3)
    await runtime.require_sync().sync_vault()
    hits = (await search(runtime, "What did I do in May?", reference_time="2025-06-20", explain=True)).results
    assert all(h.signals is not None and "anchor" not in h.signals for h in hits), hits
    names = [h.name for h in hits]
    days = [names.index(f"2025-05-0{d}") for d in (1, 2, 3)]
    assert "Harbor" not in names or max(days) < names.index("Harbor"), names  # no longer reached through her
    named = await search(runtime, "What did May Chen do in May?", reference_time="2025-06-20", explain=True)
    assert named.results[0].name == "May Chen" and named.results[0].signals is not None
    assert named.results[0].signals["anchor"] > 0


# --- bounded cost on common words (issue 15) -----------------------------------------------------------------


async def test_when_the_words_are_everywhere_the_rows_holding_all_of_them_are_scored(
    runtime: Runtime, vault: Path
) -> None:
    """Past the row budget, bm25 scores only the rows holding every word: the same first results as scoring
    them all, because those rows rank first anyway."""
    from dataclasses import replace

    from server.search import service
    from server.search.service import DEFAULT_TUNING, run_search
    from server.store import tiers_sql
    from server.store.search_sql import NodeFilter

    rng = random.Random(3)
    for i in range(70):
        write(vault, f"Both/B{i}.md", f"granite meadow {' '.join(rng.sample(VOCAB, 6))} {i}\n")
    for i in range(120):
        word = "granite" if i % 2 else "meadow"
        write(vault, f"One/O{i}.md", f"{word} {' '.join(rng.sample(VOCAB[8:], 6))} {i}\n")
    await runtime.require_sync().sync_vault()
    match = '"granite" OR "meadow"'
    assert await runtime.store.read(tiers_sql.match_count, "passages", match, 1000) == 190
    bounded_match = await runtime.store.read(
        service._bounded, "passages", match, replace(DEFAULT_TUNING, row_budget=100)
    )
    # 190 rows would be scored: only the 70 with both are
    assert bounded_match == service.Scored('"granite" AND "meadow"')
    assert await runtime.store.read(service._bounded, "passages", match, DEFAULT_TUNING) == service.Scored(
        match
    )
    bounded = replace(DEFAULT_TUNING, row_budget=100, distill=False)
    unbounded = replace(DEFAULT_TUNING, row_budget=None, distill=False)
    fast = await run_search(runtime, "granite meadow", NodeFilter(), 10, False, bounded)
    full = await run_search(runtime, "granite meadow", NodeFilter(), 10, False, unbounded)
    assert all((h.path or "").startswith("Both/") for h in fast.results)
    assert [h.path for h in fast.results] == [h.path for h in full.results]


async def test_when_the_words_seldom_meet_the_most_common_is_left_out_and_the_rare_word_decides(
    runtime: Runtime, vault: Path
) -> None:
    """Index elimination: a word in nearly every note adds nothing to bm25 (its idf is nil), so past the budget
    it is left out of what is scored, and the notes holding the rare word come first exactly as before."""
    from dataclasses import replace

    from server.search import service
    from server.search.service import DEFAULT_TUNING, run_search
    from server.store.search_sql import NodeFilter

    rng = random.Random(4)
    for i in range(150):
        write(vault, f"Common/C{i}.md", f"granite {' '.join(rng.sample(VOCAB[8:], 6))} {i}\n")
    for i in range(5):
        extra = "granite " if i < 2 else ""
        write(vault, f"Rare/R{i}.md", f"{extra}quartzite {' '.join(rng.sample(VOCAB[8:], 6))} {i}\n")
    await runtime.require_sync().sync_vault()
    match = '"granite" OR "quartzite"'
    budget = replace(DEFAULT_TUNING, row_budget=100, distill=False)
    scored = await runtime.store.read(service._bounded, "passages", match, budget)
    assert scored == service.Scored('"quartzite"')  # 152 rows, 2 holding both: the common word is left out
    fast = await run_search(runtime, "granite quartzite", NodeFilter(), 5, False, budget)
    full = await run_search(
        runtime, "granite quartzite", NodeFilter(), 5, False, replace(budget, row_budget=None)
    )
    assert {h.path for h in fast.results} == {f"Rare/R{i}.md" for i in range(5)}
    assert [h.path for h in fast.results] == [h.path for h in full.results]


async def test_when_a_word_is_everywhere_the_newest_rows_are_scored_and_a_fresh_edit_is_among_them(
    runtime: Runtime, vault: Path
) -> None:
    """A single word in more rows than the budget tells no row apart: bm25 scores the rows written last, so
    the cost stays bounded and what the person just wrote is among them."""
    from dataclasses import replace

    from server.search import service
    from server.search.service import DEFAULT_TUNING, run_search
    from server.store.search_sql import NodeFilter, passage_hits

    rng = random.Random(5)
    for i in range(160):
        write(vault, f"Common/C{i:03d}.md", f"granite {' '.join(rng.sample(VOCAB[8:], 6))} {i}\n")
    await runtime.require_sync().sync_vault()
    budget = replace(DEFAULT_TUNING, row_budget=100, distill=False)
    scored = await runtime.store.read(service._bounded, "passages", '"granite"', budget)
    assert scored == service.Scored('"granite"', 100)

    def newest_ids(conn: object) -> list[int]:
        sql = "select rowid from chunks_fts where chunks_fts match ? order by rowid desc limit 100"
        return [r[0] for r in conn.execute(sql, ['"granite"'])]  # type: ignore[attr-defined]

    newest = set(await runtime.store.read(newest_ids))
    hits = await runtime.store.read(passage_hits, '"granite"', 300, NodeFilter(), 100)
    assert len(hits) == 100 and {h.chunk_id for h in hits} == newest

    # A note left out of the scored rows, edited now, is re-indexed last: the bounded search scores it.
    def path_of(conn: object, chunk_ids: list[int]) -> set[str]:
        marks = ",".join("?" * len(chunk_ids))
        sql = f"select n.path from chunks c join nodes n on n.id = c.node_id where c.id in ({marks})"
        return {r[0] for r in conn.execute(sql, chunk_ids)}  # type: ignore[attr-defined]

    scored_paths = await runtime.store.read(path_of, sorted(newest))
    left_out = sorted({f"Common/C{i:03d}.md" for i in range(160)} - scored_paths)
    assert left_out, "with 160 notes and a budget of 100 rows, some notes are not scored"
    write(vault, left_out[0], "granite, written just now\n")
    await runtime.require_sync().sync_vault()
    hits = await runtime.store.read(passage_hits, '"granite"', 300, NodeFilter(), 100)
    assert left_out[0] in await runtime.store.read(path_of, [h.chunk_id for h in hits])
    found = await run_search(runtime, "granite", NodeFilter(), 10, False, budget)
    assert len(found.results) == 10


# --- explain -------------------------------------------------------------------------------------------------


async def test_explain_names_the_step_that_placed_each_result(runtime: Runtime, vault: Path) -> None:
    write(vault, "Projects/Zephyr.md", "An internal tool. Team: [[Ingrid Solberg]].\n")
    write(vault, "People/Ingrid Solberg.md", "Backend engineer.\n")
    strong = "The zephyr wind report: zephyr gusts, zephyr calm, a zephyr again over the bay.\n"
    for i in range(3):
        write(vault, f"Weather/Copy {i}.md", strong)
    write(vault, "Weather/Breeze.md", "A light breeze; the zephyr came late.\n")
    await runtime.require_sync().sync_vault()
    hits = (await search(runtime, "zephyr", explain=True)).results
    steps = {h.name: h.step for h in hits}
    assert hits[0].name == "Zephyr" and steps["Zephyr"] == "exact title"
    assert steps["Copy 0"] == "text"
    # The person note is found by the walk from Zephyr, and comes before the copies of Copy 0 by distill.
    assert steps["Ingrid Solberg"] == "graph; distill moved it up from 5 to 3", steps
    for hit in hits:
        assert hit.signals is not None and hit.score == pytest.approx(sum(hit.signals.values()), abs=1e-3)
    assert all(h.step is None and h.signals is None for h in (await search(runtime, "zephyr")).results)


# --- results do not depend on how many are asked for ---------------------------------------------------------


async def test_the_first_results_are_the_same_whatever_the_limit(runtime: Runtime, vault: Path) -> None:
    """Review 22d: the pool the graph and time steps work on is sized by the limit; a note left out of it and
    brought back by the walk came back without what its words scored, so asking for 10 results showed other
    notes than the first 10 of 50. Target mentions the name once in a long note (its words rank it past the
    pool of a 10-result search) and is the one note the named person links to."""
    write(vault, "People/Zianja Sabafo.md", "Works on the port. See [[Target]].\n")
    rng = random.Random(3)
    words = "harbor crane berth cargo manifest pilot tug quay dredge ballast".split()
    for i in range(5):
        write(vault, f"F/Strong {i}.md", "Zianja Sabafo met Zianja Sabafo. " * 3 + "\n")
    for i in range(70):
        filler = " ".join(rng.choice(words) for _ in range(rng.randrange(10, 40)))
        write(vault, f"F/Medium {i}.md", f"{filler} Zianja and Sabafo. {filler}\n")
    filler = " ".join(rng.choice(words) for _ in range(110))
    write(vault, "T/Target.md", f"{filler} Zianja Sabafo once. {filler}\n")
    await runtime.require_sync().sync_vault()
    question = "what did Zianja Sabafo decide"
    most = await top_names(runtime, question, limit=50)
    assert most.index("Target") < 5, most
    for limit in (3, 5, 10, 20):
        assert await top_names(runtime, question, limit=limit) == most[:limit], limit


def test_explain_gives_the_step_that_found_a_note_not_recency() -> None:
    """Review 22d: the weakest text hit scales to 0, and recency (every candidate has it) was given as the
    reason its words found it."""
    from server.search.fusion import Candidate, main_step

    assert main_step(Candidate("a", {"note": 0.0, "passage": 0.0, "recency": 0.05})) == "text"
    assert main_step(Candidate("a", {"graph": 0.0, "recency": 0.05})) == "graph"
    assert main_step(Candidate("a", {"note": 0.1, "time": 0.2, "recency": 0.05})) == "time"
    assert main_step(Candidate("a", {"recency": 0.05})) == "recency"
    # A trace of fit to a date window (every note has some) is no reason: the words found it.
    assert main_step(Candidate("a", {"note": 0.0, "passage": 0.0, "time": 0.0003, "recency": 0.04})) == "text"
