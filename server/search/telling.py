"""A long query is a query: a pasted paragraph is searched by its most telling words (issue 12, item 9).

An assistant asked "what do I have that relates to this?" pastes a paragraph: hundreds of distinct words,
most of them common. OR-ing them all would make bm25 walk hundreds of posting lists, and keeping the first
`fts_query.MAX_TOKENS` words (what a short query gets) would search whatever the paragraph happens to start
with. So a query with more distinct search words than that is searched by its `TELLING_WORDS` best ones,
weighted as "more like this" search weighs a document's terms:

    weight = (1 + ln tf) * ln(1 + N / df)

`tf` is how often the paragraph uses the word (what it is about, it repeats), `df` how many of the N notes
hold it (a rare word tells more than a common one). Rarity alone would let one stray name or typo that
a single note shares decide the search; the repetition keeps the paragraph's subject in front. A word no
note holds is dropped: it can match nothing. In the bm25 query a chosen word counts as often as the
paragraph uses it, up to `MAX_REPEAT` (BM25's query-term frequency), so the notes about the paragraph's
subject outrank those that share its passing words.

The work is capped, not the input: df is looked up for at most `MAX_LOOKUPS` words (the most repeated, then
the first), and each lookup counts at most `COMMON_AT` notes. A query of up to `MAX_TOKENS` words never gets
here, so its ranking is exactly what it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from server.search.fts_query import MAX_TOKENS

TELLING_WORDS = 32  # enough for a paragraph's subject and its names; bm25 cost grows with every term
MAX_LOOKUPS = 256  # distinct words whose document frequency is looked up (one index probe each)
COMMON_AT = 1000  # notes counted per word at most: past this, a word is common whatever its exact count
MAX_REPEAT = 3  # times a chosen word counts in bm25 at most: a word used ten times is not ten times the topic


def is_long(counts: Mapping[str, int]) -> bool:
    """True when a query has more distinct search words than a short query is searched by."""
    return len(counts) > MAX_TOKENS


def lookup_words(counts: Mapping[str, int]) -> list[str]:
    """The words whose document frequency is worth a lookup: the most repeated first, then the earliest."""
    order = {word: index for index, word in enumerate(counts)}
    return sorted(counts, key=lambda word: (-counts[word], order[word]))[:MAX_LOOKUPS]


def telling_words(counts: Mapping[str, int], frequencies: Mapping[str, int], notes: int) -> list[str]:
    """The `TELLING_WORDS` heaviest words that some note holds, in the order the query has them.

    `frequencies` maps a looked-up word to the number of notes holding it (capped at `COMMON_AT`); `notes` is
    how many notes there are."""
    total = max(notes, 1)
    weights = {
        word: (1 + math.log(counts[word])) * math.log(1 + total / df)
        for word, df in frequencies.items()
        if df > 0
    }
    order = {word: index for index, word in enumerate(counts)}
    best = sorted(weights, key=lambda word: (-weights[word], order[word]))[:TELLING_WORDS]
    return sorted(best, key=order.__getitem__)


def repeats(counts: Mapping[str, int], words: list[str]) -> dict[str, int]:
    """How many times each chosen word counts in the bm25 query: as often as the query uses it, at most
    `MAX_REPEAT`."""
    return {word: min(counts[word], MAX_REPEAT) for word in words}
