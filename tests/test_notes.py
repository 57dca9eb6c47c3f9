"""Notes written for engrama_remember: file names, new notes, in-place updates (vault_sync.notes)."""

from __future__ import annotations

from datetime import date

import pytest

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import read_frontmatter
from vault_sync.notes import MAX_NAME_BYTES, note_filename, observation_line, render_new_note, update_note
from vault_sync.parse import parse_note


@pytest.mark.parametrize(
    ("name", "filename"),
    [
        ("Engrama", "Engrama.md"),
        ('a*b"c\\d/e<f>g:h|i?j#k^l[m]n', "a b c d e f g h i j k l m n.md"),
        ("  lots   of\tspace\n", "lots of space.md"),
        (".hidden", "hidden.md"),
        # Review 23h: a dot after a space or a slash taken out made a hidden file name.
        ("../../escape", "escape.md"),
        (". .NET", "NET.md"),
        ("./.config", "config.md"),
        ("... .env", "env.md"),
        ("...", "Untitled.md"),
        ("", "Untitled.md"),
        ("[[]]", "Untitled.md"),
        ("trailing dot.", "trailing dot.md"),
        ("CON", "CON_.md"),
        ("nul.txt", "nul.txt_.md"),
        ("漢字 🙂", "漢字 🙂.md"),
    ],
)
def test_note_filename(name: str, filename: str) -> None:
    assert note_filename(name) == filename


def test_note_filename_is_bounded_without_splitting_a_character() -> None:
    filename = note_filename("漢" * 200)
    assert len(filename.encode()) <= MAX_NAME_BYTES + 3
    assert set(filename[:-3]) == {"漢"}


def test_render_new_note() -> None:
    data = render_new_note(
        engrama_id="id-1",
        label="Project",
        name="Engrama",
        properties={"status": "active", "tags": ["ai", "memory"], "since": "2024-05-01", "up": "[[Home]]"},
        observation="Started the vault side.",
        today="2026-11-21",
    )
    assert data.decode() == (
        "---\n"
        "engrama_id: id-1\n"
        "type: Project\n"
        "name: Engrama\n"
        "status: active\n"
        "tags:\n"
        "  - ai\n"
        "  - memory\n"
        "since: '2024-05-01'\n"
        'up: "[[Home]]"\n'
        "---\n"
        "# Engrama\n"
        "\n"
        "- 2026-11-21: Started the vault side.\n"
    )


def test_render_new_note_parses_back_and_ignores_reserved_property_keys() -> None:
    data = render_new_note(
        engrama_id="id-1",
        label="Person",
        name="Ada: Lovelace #1",
        properties={"name": "other", "type": "X", "born": date(1815, 12, 10), "n": {"a": [1, None, True]}},
        observation=None,
        newline="\r\n",
    )
    assert data.endswith(b"---\r\n# Ada: Lovelace #1\r\n")
    note = parse_note("People/x.md", data, folder_labels={}, canonical_label=lambda t: t)
    assert (note.engrama_id, note.label, note.name) == ("id-1", "Person", "Ada: Lovelace #1")
    assert note.properties == {"born": "1815-12-10", "n": {"a": [1, None, True]}}


def test_observation_line() -> None:
    assert observation_line("  one\n\n  two  \n", "2026-01-02") == "- 2026-01-02: one\n    two\n"
    with pytest.raises(ValueError):
        observation_line(" \n", "2026-01-02")


NOTE = (
    b"---\n"
    b"engrama_id: id-1  # do not touch\n"
    b"status: active\n"
    b"tags:\n"
    b"  - a\n"
    b"  - b\n"
    b"notes: |\n"
    b"  free text\n"
    b"# a comment\n"
    b"---\n"
    b"# Engrama\n"
    b"\n"
    b"---\n"
    b"text"
)


def test_update_replaces_whole_entries_and_adds_missing_keys_before_the_closing_line() -> None:
    out = update_note(
        NOTE, properties={"tags": ["c"], "status": "done", "new": 1}, observation=None, today="x"
    )
    assert out == (
        b"---\n"
        b"engrama_id: id-1  # do not touch\n"
        b"status: done\n"
        b"tags:\n"
        b"  - c\n"
        b"notes: |\n"
        b"  free text\n"
        b"# a comment\n"
        b"new: 1\n"
        b"---\n"
        b"# Engrama\n"
        b"\n"
        b"---\n"
        b"text"
    )


def test_update_replaces_a_block_scalar_entirely() -> None:
    out = update_note(NOTE, properties={"notes": "short"}, observation=None, today="x")
    assert b"notes: short\n# a comment\n" in out
    assert b"free text" not in out


def test_update_appends_the_observation_after_adding_the_missing_newline() -> None:
    out = update_note(NOTE, properties={}, observation="Shipped it", today="2026-11-21")
    assert out == NOTE + b"\n- 2026-11-21: Shipped it\n"
    assert update_note(out, properties={}, observation="Shipped it", today="2026-11-21") == out
    again = update_note(out, properties={}, observation="Shipped it", today="2026-11-22")
    assert again == out + b"- 2026-11-22: Shipped it\n"


def test_update_keeps_crlf_and_bom() -> None:
    data = b"\xef\xbb\xbf---\r\nstatus: a\r\nz: 1\r\n---\r\nbody\r\n"
    out = update_note(data, properties={"status": "b", "l": [1]}, observation="o", today="2026-11-21")
    assert out == b"\xef\xbb\xbf---\r\nstatus: b\r\nz: 1\r\nl:\r\n  - 1\r\n---\r\nbody\r\n- 2026-11-21: o\r\n"


def test_update_creates_a_block_when_there_is_none() -> None:
    out = update_note(b"just text\n", properties={"status": "new"}, observation=None, today="x")
    assert out == b"---\nstatus: new\n---\njust text\n"


def test_update_empty_block_and_empty_file() -> None:
    assert update_note(b"---\n---\n", properties={"a": 1}, observation=None, today="x") == b"---\na: 1\n---\n"
    assert update_note(b"", properties={}, observation="o", today="d") == b"- d: o\n"


def test_update_with_nothing_to_do_returns_the_same_bytes() -> None:
    assert update_note(NOTE, properties={}, observation="   ", today="x") == NOTE


def test_update_refuses_malformed_frontmatter() -> None:
    with pytest.raises(MalformedNote, match="unterminated"):
        update_note(b"---\na: 1\n", properties={"a": 2}, observation=None, today="x")
    with pytest.raises(MalformedNote, match="line by line"):
        update_note(b"---\n{a: 1}\n---\n", properties={"a": 2}, observation=None, today="x")


def test_update_values_parse_back_exactly() -> None:
    values = {
        "s": "yes",
        "d": "2024-01-01",
        "n": None,
        "e": [],
        "m": {"k": ["[[X]]"]},
        "u": "ü 漢 🙂",
        "t": (1, 2),
    }
    out = update_note(NOTE, properties=values, observation=None, today="x")
    mapping = read_frontmatter(out)[1]
    assert {k: mapping[k] for k in values} == {**values, "t": [1, 2]}


def test_removing_a_key_below_a_keep_chomped_block_takes_its_blank_lines_along() -> None:
    # `|+` keeps trailing blank lines: left behind, the blank line would join `status`'s value.
    data = b"---\nstatus: |+\n  draft\nvalid_to: 2026-01-01\n\ntitle: Plan\n---\nBody\n"
    out = update_note(data, properties={}, observation=None, today="2026-11-21", remove=["valid_to"])
    assert out == b"---\nstatus: |+\n  draft\ntitle: Plan\n---\nBody\n"
    assert read_frontmatter(out)[1] == {"status": "draft\n", "title": "Plan"}
    # Elsewhere the blank lines are the person's layout and stay.
    plain = b"---\nstatus: draft\nvalid_to: 2026-01-01\n\ntitle: Plan\n---\n"
    out = update_note(plain, properties={}, observation=None, today="2026-11-21", remove=["valid_to"])
    assert out == b"---\nstatus: draft\n\ntitle: Plan\n---\n"


def test_the_same_observation_is_appended_once_a_day_even_among_later_lines() -> None:
    # A queued write replayed after a crash finds its bullet, now followed by the person's later lines.
    once = update_note(
        b"---\r\na: 1\r\n---\r\nbody\r\n", properties={}, observation="Met Ana", today="2026-11-21"
    )
    edited = once + b"- 2026-11-21: something else\r\nmore text\r\n"
    assert update_note(edited, properties={}, observation="Met Ana", today="2026-11-21") == edited


def test_an_observation_that_only_begins_a_longer_one_is_still_appended() -> None:
    longer = update_note(b"# T\n", properties={}, observation="Met Ana\nin Oslo", today="2026-11-21")
    assert longer == b"# T\n- 2026-11-21: Met Ana\n  in Oslo\n"
    out = update_note(longer, properties={}, observation="Met Ana", today="2026-11-21")
    assert out == longer + b"- 2026-11-21: Met Ana\n"
    assert update_note(out, properties={}, observation="Met Ana\nin Oslo", today="2026-11-21") == out


def test_an_observation_is_not_appended_inside_a_code_block_the_note_leaves_open() -> None:
    """Found by review: the bullet landed inside the person's unclosed ``` block, shown as code."""
    note = b"---\ntype: Project\n---\nSome code:\n\n```python\nprint('hi')\n"
    with pytest.raises(MalformedNote, match="code block"):
        update_note(note, properties={}, observation="Met Ana", today="2026-11-21")
    closed = note + b"```\n"
    assert update_note(closed, properties={}, observation="Met Ana", today="2026-11-21") == (
        closed + b"- 2026-11-21: Met Ana\n"
    )
