"""Insight sections and the dismissed list: pure byte edits that only ever append, and only once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vault_sync.errors import MalformedNote
from vault_sync.insight_section import (
    append_list_item,
    append_section,
    find_section,
    listed_keys,
    outside_sections,
    section_keys,
)
from vault_sync.open_blocks import require_closed

KEY = "shared_technology/0123456789abcdef"
INSIDE = "> [!tip] Insight: SQLite everywhere\n> Both use it."


def test_section_is_appended_after_a_blank_line() -> None:
    note = b"---\nengrama_id: x\n---\nMy own words.\n"
    out = append_section(note, KEY, INSIDE)
    assert out.startswith(note)
    assert out[len(note) :] == (
        b"\n<!-- engrama:insight shared_technology/0123456789abcdef -->\n"
        b"> [!tip] Insight: SQLite everywhere\n> Both use it.\n<!-- /engrama:insight -->\n"
    )
    assert section_keys(out) == [KEY]


def test_appending_twice_changes_nothing() -> None:
    once = append_section(b"text\n", KEY, INSIDE)
    assert append_section(once, KEY, "different words this time") == once


def test_crlf_notes_get_crlf_sections_and_bom_stays() -> None:
    note = b"\xef\xbb\xbf---\r\na: 1\r\n---\r\nBody\r\n"
    out = append_section(note, KEY, INSIDE)
    assert out.startswith(note)
    assert b"\n" not in out[len(note) :].replace(b"\r\n", b"")


def test_a_note_without_final_newline_keeps_its_last_line() -> None:
    out = append_section(b"last line", KEY, INSIDE)
    assert out.startswith(b"last line\n\n<!-- engrama:insight ")


def test_find_section_spans_markers_and_tolerates_a_deleted_end_marker() -> None:
    out = append_section(b"text\n", KEY, INSIDE)
    start, end = find_section(out, KEY)
    assert out[start:end].startswith(b"<!-- engrama:insight") and out[start:end].endswith(b"-->")
    cut = out.replace(b"<!-- /engrama:insight -->\n", b"")
    assert find_section(cut, KEY) == (start, len(cut))
    assert append_section(cut, KEY, INSIDE) == cut
    assert find_section(out, "concept_clustering/0123456789abcdef") is None


def test_sections_of_other_insights_do_not_count() -> None:
    other = append_section(b"text\n", "stale_knowledge/aaaaaaaaaaaaaaaa", INSIDE)
    both = append_section(other, KEY, INSIDE)
    assert both.startswith(other) and section_keys(both) == ["stale_knowledge/aaaaaaaaaaaaaaaa", KEY]


@pytest.mark.parametrize("bad", ["", "a b", "x-->y", "a--b", "x\ny", "<b>"])
def test_keys_that_could_break_the_comment_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        append_section(b"", bad, INSIDE)


def test_dismissed_list_items_are_added_once() -> None:
    note = b"---\nname: Dismissed insights\n---\nIntro.\n\n"
    out = append_list_item(note, KEY, "2025-06-01 · Shared technology: SQLite")
    assert out == note + b"- 2025-06-01 \xc2\xb7 Shared technology: SQLite \xc2\xb7 `" + KEY.encode() + b"`\n"
    assert append_list_item(out, KEY, "again") == out
    assert listed_keys(out) == {KEY}


@given(st.binary(max_size=300), st.text(max_size=80))
def test_append_keeps_every_original_byte_and_is_idempotent(data: bytes, words: str) -> None:
    try:
        require_closed(data)
    except (MalformedNote, ValueError):  # left open at its end (or unreadable): nothing is appended
        with pytest.raises((MalformedNote, ValueError)):
            append_section(data, KEY, words)
        return
    out = append_section(data, KEY, words)
    assert out.startswith(data)
    assert find_section(out, KEY) is not None
    assert append_section(out, KEY, words) == out


@pytest.mark.parametrize(
    ("note", "said"),
    [
        (b"Some code:\n\n```python\nprint('hi')\n", "code block"),
        (b"~~~~\nlog\n~~~\n", "code block"),  # a shorter fence does not close it
        (b"Draft\n<!-- to do:\nfinish\n", "HTML comment"),
        (b"<pre>\nlog\n", "<pre> block"),
        (b"%%\nprivate thoughts\n", "Obsidian comment"),
    ],
)
def test_nothing_is_appended_inside_a_block_the_note_leaves_open(note: bytes, said: str) -> None:
    """Found by review: an insight (and a dismissed-list line) appended to a note ending inside an open code
    block showed as code, its links dead. Closing the block would change the person's text: refused instead."""
    with pytest.raises(MalformedNote, match=said):
        append_section(note, "shared/a", "An insight about [[Engrama]].")
    with pytest.raises(MalformedNote, match=said):
        append_list_item(note, "shared/a", "Dismissed")


@pytest.mark.parametrize(
    "note",
    [
        b"```\ncode\n```\n",
        b"Inline `%%` and `<!--` are code.\n",
        b"```js\n// <!-- inside code\n```\n",
        b"Hidden %%note%% and <!-- a comment --> inline.\n",
        b"    ```\n    indented code, not a fence\n",
        # Found by review of the first version of the check, which refused these ordinary notes:
        b"> [!example]\n> ```python\n> %%timeit\n> sum(range(10))\n> ```\n\nDone.\n",  # a callout's code
        b"- Timing:\n    - Cells:\n        ```python\n        %%time\n        run()\n        ```\n- next\n",
        b"Example:\n\n    <!-- comment\n\nThat's it.\n",  # indented code
        b"- Windows:\n    ```bat\n    for %%i in (*.txt) do type %%i\n    ```\n",
        b"A <!--> b and <!---> c\n",  # whole (empty) comments
        b"Growth 100%%, and an inline <!-- mark.\n",  # inline marks are left to the renderer
        b"<pre>\n<!-- x\n</pre>\n",
    ],
)
def test_a_note_whose_blocks_are_closed_takes_the_section(note: bytes) -> None:
    assert append_section(note, "shared/a", "An insight.").startswith(note)


def test_outside_sections_keeps_the_persons_text_around_every_insight_section() -> None:
    text = (
        "Mine [[A]].\n<!-- engrama:insight k/1 -->\n> About [[B]]\n<!-- /engrama:insight -->\nMine again [[C]].\n"
        "<!-- engrama:insight k/2 -->\n> [!tip] Insight: t\n> About [[D]], the end marker deleted by the person\n"
    )
    assert outside_sections(text) == "Mine [[A]].\n\nMine again [[C]].\n"
    assert outside_sections("No section [[A]].\n") == "No section [[A]].\n"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # The callout and its end marker deleted by the person, the start marker left: what follows is theirs.
        (
            "Intro.\n<!-- engrama:insight k/1 -->\nWe moved to [[Gamma]].\n",
            "Intro.\nWe moved to [[Gamma]].\n",
        ),
        # Only the end marker deleted: the callout (its `>` lines) is engrama's, the rest the person's.
        (
            "<!-- engrama:insight k/1 -->\n> [!tip] Insight: t\n> About [[X]]\nThen mine [[Gamma]].\n",
            "Then mine [[Gamma]].\n",
        ),
        # Typed on the end marker's line, after it.
        (
            "<!-- engrama:insight k/1 -->\n> [[X]]\n<!-- /engrama:insight --> See [[Delta]].\n",
            " See [[Delta]].\n",
        ),
        # A section without its end marker does not reach into the next one, nor past its end.
        (
            "<!-- engrama:insight k/1 -->\n> [[X]]\nMine [[P]].\n<!-- engrama:insight k/2 -->\n> [[Y]]\n"
            "<!-- /engrama:insight -->\nAfter [[Z]].",
            "Mine [[P]].\n\nAfter [[Z]].",
        ),
        (
            "A\r\n<!-- engrama:insight k/1 -->\r\n> [[X]]\r\n<!-- /engrama:insight -->\r\nB [[Y]]",
            "A\r\n\r\nB [[Y]]",
        ),
    ],
)
def test_the_persons_words_after_a_section_they_edited_stay_theirs(text: str, kept: str) -> None:
    """Review 21b: a section whose end marker was gone (or had text after it on its line) took the rest of the
    note with it, and the person's links there were lost to the graph."""
    assert outside_sections(text) == kept
