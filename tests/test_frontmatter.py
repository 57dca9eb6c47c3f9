"""Locating and reading frontmatter at the byte level (vault_sync.frontmatter)."""

from __future__ import annotations

from datetime import date

import pytest

from vault_sync.errors import MalformedNote, UnreadableNote
from vault_sync.frontmatter import BOM, decode_note, file_newline, locate_frontmatter, read_frontmatter


def test_locates_block_spans_with_lf() -> None:
    data = b"---\na: 1\n---\nbody\n"
    span = locate_frontmatter(data)
    assert span is not None
    assert (span.start, span.yaml_start, span.close_start, span.end) == (0, 4, 9, 13)
    assert data[span.yaml_start : span.yaml_end] == b"a: 1\n"
    assert data[span.end :] == b"body\n"
    assert span.newline == b"\n"


def test_locates_block_after_bom_with_crlf_and_trailing_spaces() -> None:
    data = BOM + b"--- \r\na: 1\r\n---\t\r\nbody"
    span = locate_frontmatter(data)
    assert span is not None
    assert span.start == 3
    assert data[span.yaml_start : span.yaml_end] == b"a: 1\r\n"
    assert data[span.end :] == b"body"
    assert span.newline == b"\r\n"


def test_closing_with_dots_and_at_end_of_file() -> None:
    span = locate_frontmatter(b"---\na: 1\n...")
    assert span is not None
    assert span.end == len(b"---\na: 1\n...")


def test_empty_block_reads_as_empty_mapping() -> None:
    span, mapping = read_frontmatter(b"---\n---\nbody")
    assert span is not None and span.yaml_start == span.close_start
    assert mapping == {}


def test_only_comments_read_as_empty_mapping() -> None:
    assert read_frontmatter(b"---\n# nothing yet\n---\n")[1] == {}


@pytest.mark.parametrize(
    "data",
    [b"", b"body\n", b"\n---\na: 1\n---\n", b"----\na: 1\n---\n", b"--- x\n---\n", b" ---\na: 1\n---\n"],
)
def test_no_frontmatter_unless_the_first_line_is_exactly_dashes(data: bytes) -> None:
    assert locate_frontmatter(data) is None
    assert read_frontmatter(data) == (None, {})


def test_horizontal_rule_in_body_is_not_the_closing_line() -> None:
    data = b"---\na: 1\n---\ntext\n\n---\n\nmore\n---\n"
    span, mapping = read_frontmatter(data)
    assert span is not None and data[span.end :].startswith(b"text")
    assert mapping == {"a": 1}


def test_body_rule_without_frontmatter_is_ignored() -> None:
    assert locate_frontmatter(b"# Title\n\n---\n\nx: 1\n---\n") is None


@pytest.mark.parametrize("data", [b"---\na: 1\n", b"---\n", b"---", b"---\r\na: 1\r\n--\r\n"])
def test_unterminated_frontmatter_is_malformed(data: bytes) -> None:
    with pytest.raises(MalformedNote, match="unterminated frontmatter.*add a closing '---' line in Obsidian"):
        locate_frontmatter(data, source="Inbox/x.md")


def test_invalid_yaml_names_the_file_line() -> None:
    data = b"---\ntitle: ok\ntags: [a, b\nstatus: x\n---\n"
    with pytest.raises(
        MalformedNote, match=r"Inbox/x\.md has invalid YAML in its frontmatter at line 4"
    ) as err:
        read_frontmatter(data, source="Inbox/x.md")
    assert "fix it in Obsidian" in str(err.value)


def test_invalid_yaml_line_counts_from_the_file_start_with_crlf_and_bom() -> None:
    data = BOM + b"---\r\na: 1\r\nb: : 2\r\n---\r\n"
    with pytest.raises(MalformedNote, match="at line 3"):
        read_frontmatter(data)


def test_control_character_is_reported_with_its_line() -> None:
    with pytest.raises(MalformedNote, match="at line 3"):
        read_frontmatter(b"---\na: 1\nb: \x07\n---\n")


def test_a_date_that_is_no_date_is_read_as_the_text_it_is() -> None:
    """A template's placeholder (`due: 0000-00-00`) or a typo (`2024-02-30`) made the whole note malformed:
    neither indexed nor searchable (found by the insert_id property test, session 20). Obsidian shows it as
    text; so does engrama. A real date is still a date."""
    data = b"---\nwhen: 2024-02-30\ndue: 0000-00-00\nday: 2024-05-01\n---\n"
    assert read_frontmatter(data)[1] == {"when": "2024-02-30", "due": "0000-00-00", "day": date(2024, 5, 1)}


@pytest.mark.parametrize(
    ("yaml", "kind"), [(b"- a\n- b\n", "a list"), (b"just text\n", "a str"), (b"42\n", "a int")]
)
def test_frontmatter_that_is_not_a_mapping_is_malformed(yaml: bytes, kind: str) -> None:
    with pytest.raises(MalformedNote, match=f"frontmatter that is {kind}, not a set of 'key: value'"):
        read_frontmatter(b"---\n" + yaml + b"---\n")


def test_values_are_parsed_by_yaml() -> None:
    data = b"---\nwhen: 2024-05-01\nok: yes\nn: 4.50\nl: [a, 'b']\n---\n"
    assert read_frontmatter(data)[1] == {"when": date(2024, 5, 1), "ok": True, "n": 4.5, "l": ["a", "b"]}


def test_file_newline() -> None:
    assert file_newline(b"a\r\nb\n") == b"\r\n"
    assert file_newline(b"a\nb\r\n") == b"\n"
    assert file_newline(b"") == b"\n"
    assert file_newline(b"\r\n") == b"\r\n"


def test_decode_note_refuses_binary_and_other_encodings() -> None:
    with pytest.raises(UnreadableNote, match="NUL bytes.*binary"):
        decode_note(b"abc\x00def", source="a.md")
    with pytest.raises(UnreadableNote, match=r"a\.md is not UTF-8 text.*re-save it as UTF-8"):
        decode_note("café".encode("latin-1"), source="a.md")
    with pytest.raises(UnreadableNote, match="UTF-16"):
        decode_note("hi".encode("utf-16"), source="a.md")
    assert decode_note(BOM + "café".encode()) == "café"


def test_a_tab_the_editor_cannot_read_is_named_with_its_line_and_the_fix() -> None:
    """Review 21c: `status:<TAB>active` is indexed (libyaml lets it pass) but every edit was refused with
    PyYAML's scanner dump, naming neither the line of the file nor what to do."""
    from vault_sync.errors import MalformedNote
    from vault_sync.notes import update_note

    note = b"---\ntype: Project\nstatus:\tactive\n---\nbody\n"
    with pytest.raises(
        MalformedNote, match=r"at line 3 .*replace it with a space in Obsidian, then try again"
    ):
        update_note(note, properties={"status": "archived"}, observation=None, today="2026-01-01")
