"""A long query is a query (issue 12, item 9): an assistant pasting a paragraph gets the notes it relates to.

A query of more distinct words than a short query is searched by (`fts_query.MAX_TOKENS`) is searched by
its most telling words (`server/search/telling.py`); a short query is searched exactly as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.runtime import Runtime, open_runtime
from server.search import telling
from server.search.fts_query import MAX_TOKENS, query_tokens, query_word_counts
from server.search.service import _query_words, search
from server.settings import Settings
from tests.test_e2e_stdio import COMMAND, call, error_of, synced_session

NOTES = {
    "Garden/Allotment.md": (
        "The allotment plan for the season: raised beds, compost, watering in the evening, the shed and "
        "the tools, seedlings on the windowsill, a path of wood chips, weeds after the rain.\n"
    ),
    "Garden/Orchard.md": (
        "Apple and pear trees along the fence; pruning in winter, grafting in spring, netting against birds "
        "and a ladder for picking in the autumn.\n"
    ),
    "Hobbies/Beekeeping.md": (
        "# Beekeeping\nTwo hives behind the orchard. Check the brood frames weekly, treat varroa mites in "
        "August with oxalic acid, keep the smoker lit, and mark the queen. Honey harvest in July.\n"
    ),
    "Kitchen/Granola.md": "Oats, honey and hazelnuts, baked slowly; a jar lasts a week.\n",
    "Hobbies/Cycling.md": "Sunday rides along the river path; the bike needs new brake pads and a chain.\n",
    "Work/Quarterly report.md": (
        "The quarterly report: revenue, hiring, the office move, and the budget for next year's laptops.\n"
    ),
}

# Garden chatter first: more than MAX_TOKENS distinct words, so the first 64 words of the paragraph (all a
# short query is searched by) never reach what it is about. Then the subject, among sentences of words no
# note holds, as a long message pasted by an assistant would read.
OPENING = (
    "This season the allotment needs raised beds, more compost and watering in the evening; the shed "
    "holds the tools, seedlings wait on the windowsill, a path of wood chips keeps the weeds down after "
    "rain. Apple and pear trees stand along the fence, with pruning in winter, grafting in spring, "
    "netting against birds and a ladder for picking in autumn. Neighbours talk about tomatoes, marrows, "
    "slugs, frost, greenhouses, fleece, rhubarb, strawberries, runner beans, onions, garlic and leeks. "
    "Someone suggested cloches, mulch, gravel, trellis, twine, canes, buckets, barrows, sieves, labels, "
    "dibbers, gloves, kneelers and a water butt beside the gate. "
)
SUBJECT = [
    "The varroa count in both hives was high again, so the mites need treating soon. ",
    "Oxalic acid works best on varroa when the colony has no capped brood. ",
    "The queen was marked last spring and the brood frames looked healthy. ",
    "Keep the smoker lit while checking frames, and never treat during the honey harvest. ",
]
FILLER = [
    "Colleagues mentioned this yesterday over lunch. ",
    "Somebody forwarded three articles, mostly opinion pieces. ",
    "Meanwhile the newsletter arrived late, unfortunately. ",
    "Opinions differ wildly, apparently, depending whom you ask. ",
]


def paragraph(size: int = 5_000) -> str:
    text, turn = OPENING, 0
    while len(text) < size:
        text += SUBJECT[turn % len(SUBJECT)] + FILLER[turn % len(FILLER)]
        turn += 1
    return text[:size]


@pytest.fixture
def seeded(vault: Path) -> Path:
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    return vault


@pytest.fixture
async def rt(seeded: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=seeded, db_path=db_path, watch=False)) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_a_pasted_paragraph_finds_the_note_it_is_about_over_stdio(
    seeded: Path, db_path: Path, tmp_path: Path
) -> None:
    query = paragraph()
    assert len(query) == 5_000 and len(query_word_counts(query)) > MAX_TOKENS
    assert "varroa" not in query_tokens(query)  # the first words of the paragraph are not what it is about
    async with synced_session(seeded, db_path, tmp_path) as session:
        found = await call(session, "engrama_search", {"query": query, "limit": 3})
        assert "Beekeeping" in [hit["name"] for hit in found["results"]]
        error = await error_of(session, "engrama_search", {"query": "hive " * 20_001})
        assert "100,005 characters" in error and "100,000" in error and "keywords" in error


async def test_the_telling_words_are_what_the_paragraph_repeats_and_the_vault_holds(rt: Runtime) -> None:
    words, repeats = await _query_words(rt, paragraph())
    assert len(words) <= telling.TELLING_WORDS and repeats is not None
    assert repeats["varroa"] == telling.MAX_REPEAT and repeats["allotment"] == 1
    assert {"varroa", "oxalic", "brood", "queen", "smoker"} <= set(words)
    assert not {"tomatoes", "marrows", "slugs"} & set(words)  # no note holds them: they can match nothing


async def test_a_long_query_ranks_the_note_it_is_about_first(rt: Runtime) -> None:
    hits = (await search(rt, paragraph(20_000))).results
    assert hits[0].name == "Beekeeping"
    assert "varroa" in hits[0].snippet  # the snippet is picked by the telling words too


async def test_a_long_query_of_words_no_note_holds_finds_nothing(rt: Runtime) -> None:
    query = " ".join(f"zq{i}x" for i in range(3_000))
    assert (await search(rt, query)).results == []


def test_the_work_is_capped_not_the_input() -> None:
    counts = query_word_counts(" ".join(f"w{i} " * (i % 7 + 1) for i in range(5_000)))
    assert len(counts) == 5_000
    lookups = telling.lookup_words(counts)
    assert len(lookups) == telling.MAX_LOOKUPS and all(counts[w] == 7 for w in lookups)  # most repeated
    chosen = telling.telling_words(counts, dict.fromkeys(lookups, 3), notes=10)
    assert len(chosen) == telling.TELLING_WORDS
    assert chosen == [w for w in counts if w in chosen]  # in the order the query has them


def test_a_word_the_paragraph_repeats_beats_rarer_words_it_mentions_once() -> None:
    counts = {f"stray{i}": 1 for i in range(40)} | {"hive": 3}
    frequencies = dict.fromkeys(counts, 1) | {"hive": 2}  # every stray word is in one note only
    chosen = telling.telling_words(counts, frequencies, notes=1_000)
    assert len(chosen) == telling.TELLING_WORDS and "hive" in chosen  # rarity alone would have dropped it


@given(st.text(max_size=400))
def test_a_short_query_is_searched_by_exactly_the_words_it_always_was(text: str) -> None:
    counts = query_word_counts(text)
    assert list(counts)[:MAX_TOKENS] == query_tokens(text)
    assert telling.is_long(counts) == (len(counts) > MAX_TOKENS)
