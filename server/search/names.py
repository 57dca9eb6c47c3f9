"""Names in a question: the words a person capitalised, which in a personal vault are its strongest clues.

"What did Caroline research?" is about Caroline before it is about research. bm25 alone weighs "caroline" by
rarity only, and in a vault where many notes mention research, notes about someone else win. So a word written
with a capital, other than the first word of a sentence, counts as a name: it weighs double in the full-text
query, and notes holding every name of the question get a bonus in fusion. On LoCoMo the two together moved
recall@5 from 0.870 to 0.879 and MRR from 0.814 to 0.828 (docs/search.md). A question without capitals is
searched as before.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

from server.search.fts_query import MAX_TOKENS, query_tokens, quote_token, word_matches

MAX_NAMES = 4  # more capitals than this is a title-cased or shouted query, not a list of names
_SENTENCE_END = ".!?…\n"


def query_names(question: str) -> list[str]:
    """The search tokens of `question` that were written capitalised and do not start a sentence."""
    tokens = set(query_tokens(question))
    names: list[str] = []
    previous_end = 0
    text = unicodedata.normalize("NFC", question)  # the form word_matches reads, so positions agree
    for match in word_matches(text):
        gap = text[previous_end : match.start()]
        starts_sentence = previous_end == 0 or any(c in _SENTENCE_END for c in gap)
        previous_end = match.end()
        word = match.group()
        token = word.lower()
        if starts_sentence or not word[0].isupper() or token not in tokens or token in names:
            continue
        names.append(token)
    return names if len(names) <= MAX_NAMES else []


def weighted_match(
    question: str,
    names: list[str],
    *,
    name_weight: int = 2,
    prefix_min: int | None = None,
    tokens: list[str] | None = None,
    repeats: Mapping[str, int] | None = None,
) -> str | None:
    """The OR-ed FTS5 expression of `question` (see fts_query) with each name repeated `name_weight` times,
    and every other word of at least `prefix_min` letters matched as a prefix of its stem. `tokens`, when
    given, are the words to search instead of the question's first ones, and `repeats` how many times each
    counts (a long query's telling words, weighted by how often the query uses them: telling.py).

    FTS5's bm25 sums over the phrases of the query, so a phrase given twice counts twice. A prefix after the
    porter stem reaches a word's family ("activities" -> activ* -> activity, active, activist), which a
    question rephrasing the note needs; short words and names stay exact."""
    if tokens is None:
        tokens = query_tokens(question, max_tokens=MAX_TOKENS)
    if not tokens:
        return None
    terms: list[str] = []
    for token in tokens:
        if token in names:
            terms.extend([quote_token(token)] * name_weight)
        else:
            wide = prefix_min is not None and len(token) >= prefix_min
            terms.extend([quote_token(token) + ("*" if wide else "")] * (repeats or {}).get(token, 1))
    return " OR ".join(terms)


def all_names_match(names: list[str]) -> str | None:
    """An FTS5 expression matching the notes that hold every name, or None without names."""
    return " AND ".join(quote_token(n) for n in names) if names else None
