"""Anchors: the entities a question names, found the way Obsidian resolves a link (issue 13 step 2, issue 15).

"What is blocking Harbor Analytics?" is about the note called Harbor Analytics before it is about blocking. A
note's name, file name and aliases are its link keys (casefolded, server/store/sync_sql.link_keys); every run of
consecutive words of the question is looked up among them, so a name is found whatever its case and wherever
it stands in the question. What is found:

- `exact`: the whole question (less surrounding quotes, brackets and a final question mark) is a note's title,
  name or alias. That note is what the person asked for: it comes first, whatever else shares its words;
- `named`: the question holds a note's full name. That note gets the anchor signal (it ranks near the top) and
  seeds the graph walk (walk.py), so the notes linked to it can rank even when they share no word with the
  question.

A name that is one ordinary word ("Research", "Home") is weak evidence that the question means that note: it
counts when the person capitalised it inside the question (names.py reads capitals the same way) and at half
strength otherwise. Names made only of stopwords or shorter than three letters never anchor.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from server.search.fts_query import STOPWORDS, word_matches
from server.store.cjk import has_cjk
from server.store.cjk import runs as cjk_runs
from vault_sync.names import fold

MAX_PHRASE_WORDS = 8  # longer titles are rare, and a question holding one is matched by its words anyway
MAX_CJK_NAME = 12  # characters: the longest stretch of a CJK run looked up as a name
MAX_QUESTION_WORDS = 64  # a pasted passage is searched by its words; its first lines may still name notes
WEAK = 0.5  # strength of a one-word name the question did not capitalise

_EDGES = " \t\r\n\"'“”‘’`[]()<>{}*_#?!.,;:"


# What may wrap a title the person typed as a question: `[[Dune (1965)]]`, `"Budget (draft)"?`. Only a pair
# that opens and closes the question is taken off, so a title's own bracket stays (review 22d: "Dune (1965)"
# lost its ")" and was never the exact title).
_WRAPPERS = (
    ("[[", "]]"), ('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("`", "`"), ("(", ")"),
    ("[", "]"), ("{", "}"), ("<", ">"), ("**", "**"), ("*", "*"), ("__", "__"), ("_", "_"),
)  # fmt: skip
_FINAL = "?!.,;:…"  # a question's own closing punctuation
_CLOSING = ")]}>\"'”’»"  # what may close a name right after its last word: "Dune (1965)"


@dataclass(frozen=True)
class Phrases:
    """The lookups one question needs: the whole question as a title, and each run of words."""

    whole: str | None  # the question less what wraps it: a title's own brackets kept
    runs: dict[str, bool]  # casefolded phrase -> whether it is one word written with a capital mid-sentence
    bare: str | None = None  # the question less every edge character: a title when `whole` is none


def phrases(question: str, when_words: frozenset[str] = frozenset()) -> Phrases:
    """The whole question as a possible title, and every run of 1..MAX_PHRASE_WORDS consecutive words of its
    first MAX_QUESTION_WORDS words, spelled as the question spells them (inner punctuation kept: "Q3 - plan",
    and the brackets or quotes closing its last word: "Dune (1965)") and with single spaces between the words.

    A run made only of `when_words` (the words of the question's date phrases, as `query_tokens` gives them)
    and stopwords names no note: "in May" asks about a month, not about May Chen (review 22d)."""
    text = unicodedata.normalize("NFC", question)
    whole = fold(_unwrapped(text))
    bare = fold(text.strip().strip(_EDGES).strip())
    words = word_matches(text)[:MAX_QUESTION_WORDS]
    runs: dict[str, bool] = {}
    for i, first in enumerate(words):
        for j in range(i, min(len(words), i + MAX_PHRASE_WORDS)):
            last = words[j]
            spaced = fold(" ".join(w.group() for w in words[i : j + 1]))
            if not _can_anchor(spaced) or _only_when(spaced, when_words):
                continue
            # Each closing character after the last word may be the name's own or what wraps it: "Dune (1965)"
            # inside `[[Dune (1965)]]` (review 22f), so every length is looked up.
            spelled = {fold(text[first.start() : last.end()])}
            end = last.end()
            while end < len(text) and text[end] in _CLOSING:
                end += 1
                spelled.add(fold(text[first.start() : end]))
            capital = i == j and i > 0 and first.group()[0].isupper() and not _starts_sentence(text, first)
            for phrase in spelled | {spaced}:
                runs[phrase] = runs.get(phrase, False) or capital
    # Chinese, Japanese and Korean put no spaces between words: a name inside a run (東京 in 東京について, 李明 in
    # 李明的情况) is every stretch of it. Such a stretch is written as the name is (these scripts have no
    # capitals to tell a name by), so it counts fully (review 22g).
    for stretch in cjk_stretches(text[: words[-1].end()] if words else ""):
        runs[stretch] = True
    return Phrases(
        whole if whole and _can_anchor(whole) else None,
        runs,
        bare if bare and bare != whole and _can_anchor(bare) else None,
    )


def cjk_stretches(text: str) -> list[str]:
    """Every stretch of 2..MAX_CJK_NAME characters of each run of CJK characters in `text`, casefolded: the
    names such a run may hold."""
    return [
        fold(run[start : start + size])
        for run in cjk_runs(unicodedata.normalize("NFC", text))
        for size in range(2, min(len(run), MAX_CJK_NAME) + 1)
        for start in range(len(run) - size + 1)
    ]


def _unwrapped(text: str) -> str:
    """`text` less its final punctuation and the pairs wrapping it, as often as they nest."""
    while True:
        before = text
        text = text.strip().rstrip(_FINAL).strip()
        for opening, closing in _WRAPPERS:
            if (
                len(text) > len(opening) + len(closing)
                and text.startswith(opening)
                and text.endswith(closing)
            ):
                text = text[len(opening) : -len(closing)]
                break
        if text == before:
            return text


def _only_when(phrase: str, when_words: frozenset[str]) -> bool:
    words = [w for w in phrase.split() if w not in STOPWORDS]
    return bool(when_words) and all(w in when_words for w in words)


def strength(phrase: str, capitalised: bool) -> float:
    """How sure a found name makes us that the question means that note (see the module docstring)."""
    return 1.0 if len(phrase.split()) > 1 or capitalised else WEAK


def _can_anchor(phrase: str) -> bool:
    words = phrase.split()
    # Two CJK characters make a name (東京, 李明): each says as much as a word of a few letters.
    shortest = 2 if has_cjk(phrase) else 3
    return len(phrase) >= shortest and any(w not in STOPWORDS for w in words)


def _starts_sentence(text: str, match: re.Match[str]) -> bool:
    before = text[: match.start()].rstrip()
    return not before or before[-1] in ".!?…\n"
