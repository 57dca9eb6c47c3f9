"""Turn a person's question into an FTS5 MATCH expression that FTS5 can never read as syntax.

FTS5 gives meaning to `"`, `*`, `^`, `:`, `-`, `+`, parentheses and the bare words AND, OR, NOT and NEAR; a
question such as `what's C++ "NEAR" -v: (2023)?` would raise or change meaning if passed through. So the question
is reduced to word tokens (a unicode-aware regex: letters, digits, marks), lower-cased, with stopwords and
question words dropped, and every token is emitted as a double-quoted string OR-ed with the others. Inside a
quoted string FTS5 treats everything as data: `"near"`, `"not"` or `"and"` are plain words. Quotes cannot occur
in a token (the regex admits none), but they are doubled anyway so the quoting holds whatever the regex becomes.

OR rather than AND because questions carry words the answer does not (bm25 rewards the notes that hold more of
them). On LoCoMo this form is what gave session recall@5 0.864 with whole-note bm25 (shared/FACTS.md).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator

from server.store.cjk import has_cjk, spaced

MAX_TOKENS = 64  # bm25 over more OR-ed terms costs time and adds nothing a person typed on purpose


@functools.cache
def _token_pattern() -> re.Pattern[str]:
    """Letters and digits, plus the combining marks inside a word (Unicode category M*).

    Marks matter: `\\w` stops at a Devanagari vowel sign or a decomposed accent and would cut one word in
    two. The token is re-tokenized by FTS5 inside its quotes anyway, so it only has to hold whole words.
    The underscore is a separator, as in unicode61. Built on first use (~20 ms) to keep imports fast.
    """
    marks = [c for c in range(0x300, 0x20000) if unicodedata.category(chr(c))[0] == "M"]
    marks.extend(range(0xE0100, 0xE01F0))  # variation selectors supplement (Mn)
    ranges: list[tuple[int, int]] = []
    for code in marks:
        if ranges and code == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    mark_class = "".join(f"\\U{a:08x}" + (f"-\\U{b:08x}" if b > a else "") for a, b in ranges)
    return re.compile(rf"[^\W_](?:[^\W_]|[{mark_class}])*")


# A compact English list: function words, auxiliaries and the question words themselves. Content words that
# look small ("new", "first", "last", "year") stay: they often are what the question is about.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can cannot could couldn did didn do does doesn doing don down during each few for from
    further had hadn has hasn have haven having he her here hers herself him himself his how i if in into is
    isn it its itself just ll me might more most must mustn my myself no nor not now of off on once only or
    other ought our ours ourselves out over own re s same shall shan she should shouldn so some such t than
    that the their theirs them themselves then there these they this those through to too under until up us
    ve very was wasn we were weren what when where which while who whom whose why will with won would wouldn
    you your yours yourself yourselves d m o y
    also ever kind sort something anything
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def word_matches(text: str) -> list[re.Match[str]]:
    """The words of `text` as regex matches (case and position kept), split exactly as `query_tokens` splits."""
    return list(_token_pattern().finditer(unicodedata.normalize("NFC", text)))


def query_tokens(question: str, *, max_tokens: int = MAX_TOKENS) -> list[str]:
    """The distinct search words of `question`, lower-cased, in order, stopwords dropped, at most `max_tokens`.

    Single letters are dropped too (the `s` of `Caroline's`); single digits stay, since "3 kids" means 3.
    """
    tokens: dict[str, None] = {}
    for token in _search_words(question):
        tokens[token] = None
        if len(tokens) >= max_tokens:
            break
    return list(tokens)


def query_word_counts(question: str) -> dict[str, int]:
    """Every distinct search word of `question` (as `query_tokens` picks them), in order, with how often it
    occurs: what a long query (a pasted paragraph) is about shows in the words it repeats."""
    counts: dict[str, int] = {}
    for token in _search_words(question):
        counts[token] = counts.get(token, 0) + 1
    return counts


def _search_words(question: str) -> Iterator[str]:
    # NFC joins a letter and its combining accent; lower() (not casefold) because unicode61 folds
    # case the simple way and would never match "strasse" for a stored "straße".
    text = unicodedata.normalize("NFC", question).lower()
    for match in _token_pattern().finditer(text):
        word = match.group()
        # Chinese, Japanese and Korean runs are searched by their character pairs, as they are indexed
        # (`server.store.cjk`); a single such character is a word.
        for token in spaced(word).split() if has_cjk(word) else (word,):
            if token not in STOPWORDS and (len(token) > 1 or token.isdigit() or has_cjk(token)):
                yield token


def quote_token(token: str) -> str:
    """An FTS5 string literal for `token`: double quotes around it, inner double quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


def build_match(question: str, *, prefix: bool = False, max_tokens: int = MAX_TOKENS) -> str | None:
    """A safe MATCH expression for `question`, or None when it holds no search words (then search nothing).

    With `prefix=True` every token of three or more characters also matches words it begins
    (`"photo"*` finds "photography"); shorter ones stay exact, since a prefix of one or two letters matches
    most of the index.
    """
    tokens = query_tokens(question, max_tokens=max_tokens)
    if not tokens:
        return None
    terms = [quote_token(t) + ("*" if prefix and len(t) >= 3 else "") for t in tokens]
    return " OR ".join(terms)
