"""Inserting the engrama_id line without touching any other byte (vault_sync.identify)."""

from __future__ import annotations

import uuid

import pytest

from vault_sync.began import id_began
from vault_sync.errors import MalformedNote, UnreadableNote
from vault_sync.frontmatter import read_frontmatter
from vault_sync.identify import insert_id, new_engrama_id, read_id, set_id

ID = "3f2c9a8e-0000-4000-8000-000000000001"
LINE = f"engrama_id: {ID}\n".encode()


def assert_only_line_inserted(before: bytes, after: bytes, line: bytes = LINE) -> None:
    at = after.index(line)
    assert after[:at] + after[at + len(line) :] == before
    assert read_frontmatter(after)[1] == {**read_frontmatter(before)[1], "engrama_id": ID}


@pytest.mark.parametrize(
    "data",
    [
        b"---\ntitle: A\n---\nbody\n",
        b"---\ntitle: A\n---\nbody",  # no trailing newline
        b"---\ntitle: A\n---",  # ends right after the closing line
        b"---\n---\n",  # empty block
        b"---\n# only a comment\n---\n",
        b"---  \ntitle: A\n---\t\n",  # trailing spaces on the delimiters
        b"---\ntitle: A\n...\nbody\n",  # YAML's document end closes it too
        b"---\n# why: 'quoted'\nt: 'single'  # trailing comment\nd: \"double\"\nflow: [a, 'b', \"c\"]\n---\n",
        b"---\nk: |\n  line one\n  line two\n---\nbody\n",  # block scalar as the last key
        b"---\nk: |+\n  kept\n\n---\n",  # keep-chomping block scalar with a trailing blank line
        b"---\nk: >-\n  folded\n  text\n---\n",
        b"---\nlist:\n- a\n- b\n---\n",  # indentless block list last
        b"---\nmap:\n  deep:\n    - x\n---\n",
        b"---\ntitle: A\n---\ntext\n\n---\n\nmore\n---\n",  # horizontal rules in the body
        "---\nname: 漢字 🙂\n---\nemoji 🙂\n".encode(),
    ],
)
def test_inserts_one_line_before_the_closing_line(data: bytes) -> None:
    assert_only_line_inserted(data, insert_id(data, ID))


def test_crlf_note_gets_a_crlf_line() -> None:
    data = b"---\r\ntitle: A\r\nk: |\r\n  x\r\n---\r\nbody\r\n"
    out = insert_id(data, ID)
    assert out == b"---\r\ntitle: A\r\nk: |\r\n  x\r\n" + LINE.replace(b"\n", b"\r\n") + b"---\r\nbody\r\n"


def test_bom_is_kept() -> None:
    data = b"\xef\xbb\xbf---\ntitle: A\n---\n"
    assert insert_id(data, ID) == b"\xef\xbb\xbf---\ntitle: A\n" + LINE + b"---\n"


def test_indented_mapping_gets_an_indented_line() -> None:
    data = b"---\n  a: 1\n  b: 2\n---\n"
    assert insert_id(data, ID) == b"---\n  a: 1\n  b: 2\n  " + LINE + b"---\n"


@pytest.mark.parametrize(
    ("data", "block"),
    [
        (b"", b"---\n" + LINE + b"---\n"),
        (b"body", b"---\n" + LINE + b"---\n"),
        (b"# T\r\nbody\r\n", b"---\r\n" + LINE.replace(b"\n", b"\r\n") + b"---\r\n"),
        (b"# T\nbody\r\n", b"---\n" + LINE + b"---\n"),  # the first line decides
        (b"----\nnot frontmatter\n", b"---\n" + LINE + b"---\n"),
    ],
)
def test_no_frontmatter_gets_a_new_block_at_the_top(data: bytes, block: bytes) -> None:
    assert insert_id(data, ID) == block + data


def test_new_block_goes_after_the_bom() -> None:
    assert insert_id(b"\xef\xbb\xbfbody", ID) == b"\xef\xbb\xbf---\n" + LINE + b"---\nbody"


@pytest.mark.parametrize("empty", ["engrama_id:", "engrama_id: ''", "engrama_id: ~"])
def test_an_empty_engrama_id_is_filled_in(empty: str) -> None:
    data = f"---\na: 1\n{empty}\nb: 2\n---\n".encode()
    assert insert_id(data, ID) == b"---\na: 1\n" + LINE + b"b: 2\n---\n"


def test_refuses_a_note_that_already_has_an_id() -> None:
    with pytest.raises(MalformedNote, match="already has engrama_id 'abc'"):
        insert_id(b"---\nengrama_id: abc\n---\n", ID)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"---\ntitle: A\n", "unterminated frontmatter"),
        (b"---\n- a\n- b\n---\n", "frontmatter that is a list"),
        (b"---\na: [\n---\n", "invalid YAML"),
        (b"---\n{a: 1}\n---\n", "cannot be edited line by line"),  # a flow map cannot take a new line
    ],
)
def test_refuses_what_it_cannot_edit_safely(data: bytes, message: str) -> None:
    with pytest.raises(MalformedNote, match=message):
        insert_id(data, ID)


def test_refuses_binary_and_non_utf8_files() -> None:
    with pytest.raises(UnreadableNote):
        insert_id(b"\x00\x01", ID)
    with pytest.raises(UnreadableNote):
        insert_id("café".encode("latin-1"), ID)


@pytest.mark.parametrize("bad", ["", " x", "a\nb"])
def test_rejects_an_unusable_id(bad: str) -> None:
    with pytest.raises(ValueError):
        insert_id(b"", bad)


def test_an_id_yaml_would_misread_is_quoted() -> None:
    out = insert_id(b"---\n---\n", "2024-01-01")
    assert out == b"---\nengrama_id: '2024-01-01'\n---\n"


def test_new_engrama_id_is_a_uuid7_stamped_with_when_the_note_began() -> None:
    value = new_engrama_id()
    assert uuid.UUID(value).version == 7 and uuid.UUID(value).variant == uuid.RFC_4122
    assert value != new_engrama_id()
    assert id_began(new_engrama_id("2019-03-04T05:06:07Z")) == "2019-03-04T05:06:07Z"
    stamped = id_began(new_engrama_id("2999-01-01"))
    assert stamped is not None and stamped < "2999"  # a start in the future is not evidence: now
    assert id_began(str(uuid.uuid4())) is None and id_began("my-own-id") is None


def test_blank_crlf_lines_before_an_indented_mapping() -> None:
    data = b"---\r\n\r\n  a: 1\r\n---\r\n"
    assert insert_id(data, ID) == b"---\r\n\r\n  a: 1\r\n  " + LINE.replace(b"\n", b"\r\n") + b"---\r\n"


def test_read_id() -> None:
    assert read_id(b"---\nengrama_id: ' abc '\n---\n") == "abc"
    assert read_id(b"---\nengrama_id:\n---\n") is None
    assert read_id(b"no frontmatter") is None
    assert read_id(b"---\nunterminated\n") is None


def test_set_id_rewrites_only_the_id_entry_of_a_copied_note() -> None:
    data = b"---\r\na: 1\r\nengrama_id: old  # copied\r\nb: 2\r\n---\r\nbody"
    assert (
        set_id(data, ID)
        == b"---\r\na: 1\r\n" + LINE.replace(b"\n", b"  # copied\r\n") + b"b: 2\r\n---\r\nbody"
    )
    assert set_id(b"body", ID) == insert_id(b"body", ID)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            b"---\ntype: Project\nengrama_id:   # filled in by engrama\n---\nBody\n",
            b"engrama_id: {id}   # filled in by engrama\n",
        ),
        (
            b'---\r\ntype: Project\r\nengrama_id: ""  # keep me\r\n---\r\nBody\r\n',
            b"engrama_id: {id}  # keep me\r\n",
        ),
    ],
)
def test_filling_an_empty_engrama_id_keeps_the_comment_on_its_line(before: bytes, after: bytes) -> None:
    """Found by review: the whole entry was written anew, and the person's comment on it was gone."""
    new = str(uuid.uuid4())
    edited = insert_id(before, new)
    assert after.replace(b"{id}", new.encode()) in edited
    head, _, tail = before.partition(b"engrama_id:")
    assert edited.startswith(head) and edited.endswith(tail.split(b"\n", 1)[1])  # every other line as it was


def test_a_copied_notes_new_id_keeps_the_comment_on_its_line() -> None:
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    before = f"---\nengrama_id: {old}  # my own note on this id\nstatus: draft\n---\nBody\n".encode()
    assert set_id(before, new) == before.replace(old.encode(), new.encode())


def test_an_engrama_id_whose_comment_cannot_be_kept_is_refused_not_lost() -> None:
    before = (
        b"---\nengrama_id: # why\n  ''\n---\nBody\n"  # the value on a line of its own, a comment above it
    )
    with pytest.raises(MalformedNote, match="comment"):
        insert_id(before, str(uuid.uuid4()))
