"""No query can break search: FTS5 syntax, huge or odd text gives results or an empty list, never an error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.runtime import Runtime, open_runtime
from server.search.fts_query import query_tokens, quote_token
from server.search.names import all_names_match, query_names, weighted_match
from server.search.service import search
from server.settings import Settings

HOSTILE = [
    '"',
    '""',
    '"unterminated',
    "*",
    "sqlite*",
    "NEAR(sqlite fts5, 2)",
    "NEAR",
    "sqlite NEAR fts5",
    "-sqlite",
    "full-text",
    "title:sqlite",
    "text : sqlite",
    "AND OR NOT",
    "sqlite AND",
    "^sqlite",
    "(sqlite",
    "sqlite)",
    "{title text}: sqlite",
    'C++ "NEAR" -v: (2023)?',
    "'; drop table nodes; --",
    "🔥🧠 sqlite 🚀",
    "🔥🧠🚀",
    "\x00sqlite\x00",
    "S\u0301QLite",
    "SQLITE FTS5 BM25",
    "Qu'est-ce que SQLite ? Über Straße",
    "数据库 SQLite 全文搜索",
    "x" * 10_000,
    "sqlite " * 2_000,
    " ".join(f"Word{i}" for i in range(3_000)),
]


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    (vault / "SQLite.md").write_text(
        "SQLite: full-text search (FTS5) with bm25. C++ bindings too.\n", "utf-8"
    )
    (vault / "Other.md").write_text(
        "Nothing about databases here; a note about C and NEAR misses.\n", "utf-8"
    )
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        await runtime.require_sync().sync_vault()
        yield runtime


@pytest.mark.parametrize("query", HOSTILE)
async def test_hostile_queries_return_results_or_nothing(rt: Runtime, query: str) -> None:
    response = await search(rt, query, explain=True)
    assert isinstance(response.results, list)
    assert all(hit.name in ("SQLite", "Other") for hit in response.results)


async def test_fts_operators_in_a_question_are_searched_as_words(rt: Runtime) -> None:
    hits = (await search(rt, "NEAR misses")).results
    assert hits[0].name == "Other"


async def test_a_ten_thousand_character_query_still_finds_its_words(rt: Runtime) -> None:
    query = "sqlite bm25 " + "zz " * 4_000
    assert len(query) > 10_000
    assert (await search(rt, query)).results[0].name == "SQLite"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=300))
async def test_any_text_is_a_safe_query(rt: Runtime, query: str) -> None:
    response = await search(rt, query)
    assert isinstance(response.results, list)


@given(query=st.text(max_size=300))
def test_the_names_of_any_text_are_its_own_query_words(query: str) -> None:
    names = query_names(query)
    assert set(names) <= set(query_tokens(query))
    match = weighted_match(query, names, prefix_min=5)
    assert (match is None) == (not query_tokens(query))
    for name in names:
        assert match is not None and match.split(" OR ").count(quote_token(name)) == 2
    both = all_names_match(names)
    assert (both is None) == (not names)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did Caroline research?", ["caroline"]),
        ("When did Melanie's friend adopt a child? Caroline knows.", ["melanie"]),
        ("what did caroline research", []),
        ("Caroline", []),  # the first word of a sentence may be capitalised only by grammar
        ("Ask Ann, Bob, Cid, Dee and Eve", []),  # five capitals: a title, not a list of names
        ("Did LGBTQ groups meet in June?", ["lgbtq", "june"]),
    ],
)
def test_names_are_capitalised_words_inside_a_sentence(question: str, expected: list[str]) -> None:
    assert query_names(question) == expected
