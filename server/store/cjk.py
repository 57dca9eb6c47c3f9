"""Chinese, Japanese and Korean text in the full-text indexes (review 22d: 寿司 never found 東京で寿司を食べました).

These scripts do not put spaces between words, and FTS5's `unicode61` tokenizer keeps a whole run of such
characters as one token: a note saying 東京で寿司を食べました was one word to the index, found by nothing but that
whole sentence. Text goes into both indexes with each run of these characters cut into its overlapping pairs
(東京 京で で寿 寿司 ...), and a question's words are cut the same way (`fts_query`), so a word of two or more
characters matches wherever it stands: the bigram indexing of CJK search engines (Lucene's CJKAnalyzer), which
needs no dictionary. A run of one character stays one token. Text of other scripts is left exactly as it is,
so their rows and rankings do not change.

`spaced` is a pure function of the text: a row leaves the contentless indexes with exactly the tokens it went
in with (`passages_sql`, `search_sql`).
"""

from __future__ import annotations

import re

# Kana, CJK ideographs (extension A, the unified block, compatibility ideographs, extensions B-F), the
# iteration and closing marks that are part of words (々 in 様々 and 我々, 〆, 〇, 〻: review 22g), Hangul syllables
# and jamo, half-width katakana.
_RUN = re.compile(
    "["
    "\u3005-\u3007\u303b"
    "\u3040-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
    "\uff66-\uff9f"
    "]+"
)


def has_cjk(text: str) -> bool:
    return not text.isascii() and _RUN.search(text) is not None


def pairs(run: str) -> list[str]:
    """The overlapping pairs of a run of CJK characters; a run of one character is itself."""
    return [run] if len(run) < 3 else [run[i : i + 2] for i in range(len(run) - 1)]


def spaced(text: str) -> str:
    """`text` as the indexes take it: each run of CJK characters as its pairs, between spaces."""
    if not text or text.isascii() or _RUN.search(text) is None:  # isascii: most text, at C speed
        return text
    return _RUN.sub(lambda m: " " + " ".join(pairs(m.group())) + " ", text)


def runs(text: str) -> list[str]:
    """The runs of CJK characters in `text`, in order."""
    return [] if text.isascii() else _RUN.findall(text)
