"""build_match against a real FTS5 table (sqlean): nothing a person types is ever read as FTS5 syntax."""

from __future__ import annotations

import re

import pytest
import sqlean
from hypothesis import given, settings
from hypothesis import strategies as st

from server.search.fts_query import MAX_TOKENS, build_match, query_tokens, quote_token

ROWS = [
    "Caroline went to the LGBTQ support group on 7 May",
    "Melanie painted a sunrise by the lake near her house",
    "the e-mail about C++ templates: see section -v",
    "photography classes start next week",
    "a café in São Paulo serves açaí",
    "NEAR and NOT and OR are ordinary words here",
    "東京 タワー の 写真",
]


@pytest.fixture(scope="module")
def db():
    conn = sqlean.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    conn.executemany("INSERT INTO t(body) VALUES (?)", [(r,) for r in ROWS])
    yield conn
    conn.close()


def search(db, question: str, *, prefix: bool = False) -> list[str]:
    expression = build_match(question, prefix=prefix)
    if expression is None:
        return []
    return [row[0] for row in db.execute("SELECT body FROM t WHERE t MATCH ? ORDER BY rank", (expression,))]


def test_a_question_becomes_quoted_content_words_or_ed_together():
    assert build_match("When did Caroline go to the LGBTQ support group?") == (
        '"caroline" OR "go" OR "lgbtq" OR "support" OR "group"'
    )


def test_a_question_finds_the_row_that_holds_its_words(db):
    assert search(db, "When did Caroline go to the support group?")[0] == ROWS[0]
    assert search(db, "Who painted the sunrise?") == [ROWS[1]]


def test_questions_of_only_stopwords_punctuation_or_emoji_give_none():
    for question in ("", "   ", "what is it?", "?!*:-()^\"'", "😀🎉", "and or not", "a b c"):
        assert build_match(question) is None, question


@pytest.mark.parametrize(
    "question",
    [
        'he said "NEAR" twice',
        "NEAR(lake house, 2)",
        "body:lake",
        "-v C++ e-mail",
        "^sunrise*",
        "lake AND NOT house OR (",
        '"unbalanced quote',
        "col:* NEAR/3 ^ + - ( ) { } [ ]",
    ],
)
def test_fts_syntax_in_a_question_is_data(db, question):
    expression = build_match(question)
    assert expression is not None
    db.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()


def test_the_words_near_and_or_not_are_searchable_as_words(db):
    assert set(search(db, "NEAR")) == {ROWS[1], ROWS[5]}
    assert search(db, "ordinary NOT words") == [ROWS[5]]


def test_accents_and_non_latin_scripts_match(db):
    assert search(db, "cafe in sao paulo") == [ROWS[4]]
    assert search(db, "São Paulo açaí") == [ROWS[4]]
    assert search(db, "東京") == [ROWS[6]]


def test_porter_stemming_meets_the_question_half_way(db):
    assert search(db, "which classes did she attend for photographs?")[0] == ROWS[3]


def test_prefix_variant_matches_word_beginnings_but_not_for_short_tokens(db):
    assert search(db, "photo", prefix=False) == []
    assert search(db, "photo", prefix=True) == [ROWS[3]]
    assert build_match("go photo", prefix=True) == '"go" OR "photo"*'


def test_tokens_are_distinct_lower_case_and_capped():
    assert query_tokens("Lake lake LAKE house") == ["lake", "house"]
    huge = " ".join(f"word{i}" for i in range(5000))  # ~45,000 characters
    assert len(query_tokens(huge)) == MAX_TOKENS
    expression = build_match(huge)
    assert expression is not None and expression.count(" OR ") == MAX_TOKENS - 1


def test_single_letters_drop_but_single_digits_stay():
    assert query_tokens("Caroline's 3 kids, x and y") == ["caroline", "3", "kids"]


def test_quote_token_doubles_inner_quotes():
    assert quote_token('say "hi"') == '"say ""hi"""'


_SHAPE = re.compile(r'^"[^"]+"\*?( OR "[^"]+"\*?)*$')
_FRAGMENT = st.one_of(
    st.sampled_from(list("\"*^:-+(){}[]\\/'`.,;!?~@#$%&|<>=_ \t\n\r\x00")),
    st.sampled_from(
        ["NEAR", "AND", "OR", "NOT", "near", "body", "😀", "\u0301", "\u200b", "ß", "İ", "NEAR/2"]
    ),
    st.characters(),
    st.text(max_size=8),
)
_HOSTILE = st.lists(_FRAGMENT, max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(question=_HOSTILE, prefix=st.booleans())
def test_match_never_raises_on_hostile_input(db, question, prefix):
    expression = build_match(question, prefix=prefix)
    if expression is None:
        return
    assert _SHAPE.match(expression), expression
    db.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()


@settings(max_examples=30, deadline=None)
@given(seed=st.text(min_size=1, max_size=300))
def test_long_input_stays_capped_and_safe(db, seed):
    question = (seed * (10_000 // len(seed) + 1))[:10_000]
    expression = build_match(question)
    if expression is not None:
        assert expression.count(" OR ") < MAX_TOKENS
        db.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()
