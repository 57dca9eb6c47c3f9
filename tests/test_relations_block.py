"""Mirroring relations into a note's `relations:` block (vault_sync.relations_block)."""

from __future__ import annotations

import json

import pytest

from vault_sync.errors import MalformedNote
from vault_sync.frontmatter import read_frontmatter
from vault_sync.parse import parse_note
from vault_sync.relations_block import add_relation, remove_relation


def add(data: str, rel_type: str = "USES", target: str = "T") -> str:
    return add_relation(data.encode(), rel_type, target).decode()


def test_no_relations_block_appends_one_before_the_closing_line() -> None:
    out = add("---\ntitle: A  # keep me\n---\nbody\n")
    assert out == '---\ntitle: A  # keep me\nrelations:\n  USES:\n    - "[[T]]"\n---\nbody\n'


def test_no_frontmatter_gets_a_block_with_relations_only() -> None:
    assert add("body") == '---\nrelations:\n  USES:\n    - "[[T]]"\n---\nbody'
    crlf = add_relation(b"\xef\xbb\xbfbody\r\n", "USES", "T")
    assert crlf == b'\xef\xbb\xbf---\r\nrelations:\r\n  USES:\r\n    - "[[T]]"\r\n---\r\nbody\r\n'


def test_block_list_gets_an_item_with_the_same_indentation() -> None:
    data = '---\nrelations:\n  USES:\n    - "[[A]]"  # why\n  PART_OF: "[[P]]"\nafter: 1\n---\n'
    assert add(data) == data.replace("# why\n", '# why\n    - "[[T]]"\n')


def test_indentless_block_list() -> None:
    data = '---\nrelations:\n  USES:\n  - "[[A]]"\n---\n'
    assert add(data) == '---\nrelations:\n  USES:\n  - "[[A]]"\n  - "[[T]]"\n---\n'


def test_flow_list_gets_the_item_on_the_same_line() -> None:
    data = '---\nrelations:\n  USES: ["[[A]]", B]  # c\n---\n'
    assert add(data) == '---\nrelations:\n  USES: ["[[A]]", B, "[[T]]"]  # c\n---\n'
    assert add("---\nrelations:\n  USES: []\n---\n") == '---\nrelations:\n  USES: ["[[T]]"]\n---\n'
    assert add("---\nrelations:\n  USES: [A, ]\n---\n") == '---\nrelations:\n  USES: [A, "[[T]]"]\n---\n'


def test_unquoted_double_brackets_are_a_nested_flow_list() -> None:
    assert add("---\nrelations:\n  USES: [[A]]\n---\n") == '---\nrelations:\n  USES: [[A], "[[T]]"]\n---\n'


def test_scalar_becomes_a_flow_list_with_both() -> None:
    assert (
        add('---\nrelations:\n  USES: "[[A]]"\n---\n') == '---\nrelations:\n  USES: ["[[A]]", "[[T]]"]\n---\n'
    )
    assert add("---\nrelations:\n  USES: 'A'\n---\n") == "---\nrelations:\n  USES: ['A', \"[[T]]\"]\n---\n"
    assert add("---\nrelations:\n  USES: A, B\n---\n") == '---\nrelations:\n  USES: ["A, B", "[[T]]"]\n---\n'


def test_empty_value_becomes_a_flow_list() -> None:
    assert add("---\nrelations:\n  USES:\n---\n") == '---\nrelations:\n  USES: ["[[T]]"]\n---\n'


def test_missing_key_is_added_to_the_block() -> None:
    data = '---\nrelations:\n  PART_OF:\n    - "[[P]]"\ntitle: A\n---\n'
    expected = '---\nrelations:\n  PART_OF:\n    - "[[P]]"\n  USES:\n    - "[[T]]"\ntitle: A\n---\n'
    assert add(data) == expected


def test_existing_key_is_matched_in_any_spelling() -> None:
    data = '---\nrelations:\n  depends-on: ["[[A]]"]\n---\n'
    assert add(data, "DEPENDS_ON") == '---\nrelations:\n  depends-on: ["[[A]]", "[[T]]"]\n---\n'


@pytest.mark.parametrize(
    "value",
    ['"[[T]]"', "'[[t]]'", "T", '["[[t|alias]]"]', '["[[T#Heading]]"]', "[[T]]", '\n    - "[[T.md]]"'],
)
def test_an_existing_relation_is_left_alone(value: str) -> None:
    data = f"---\nrelations:\n  uses: {value}\n---\n".encode()
    assert add_relation(data, "USES", "T") is data


def test_empty_and_flow_relations_are_re_rendered() -> None:
    assert add("---\nrelations:\n---\n") == '---\nrelations:\n  USES:\n    - "[[T]]"\n---\n'
    data = '---\nrelations: {USES: ["[[A]]"]}\nz: 1\n---\n'
    assert add(data) == '---\nrelations:\n  USES:\n    - "[[A]]"\n    - "[[T]]"\nz: 1\n---\n'


def test_crlf_block_list() -> None:
    data = b'---\r\nrelations:\r\n  USES:\r\n    - "[[A]]"\r\n---\r\n'
    assert add_relation(data, "USES", "T") == data.replace(b'"[[A]]"\r\n', b'"[[A]]"\r\n    - "[[T]]"\r\n')


def test_relation_keys_yaml_would_misread_are_quoted() -> None:
    out = add_relation(b"---\n---\n", "ON", "T")
    assert read_frontmatter(out)[1] == {"relations": {"ON": ["[[T]]"]}}


def test_refuses_relations_that_are_not_a_map() -> None:
    with pytest.raises(MalformedNote, match="not a map"):
        add_relation(b'---\nrelations: ["[[A]]"]\n---\n', "USES", "T")


def test_refuses_malformed_frontmatter() -> None:
    with pytest.raises(MalformedNote, match="unterminated"):
        add_relation(b"---\nrelations:\n", "USES", "T")


@pytest.mark.parametrize(
    ("rel_type", "target"), [("", "T"), ("USES", ""), ("USES", "[[T]]"), ("USES", "a\nb")]
)
def test_rejects_unusable_arguments(rel_type: str, target: str) -> None:
    with pytest.raises(ValueError):
        add_relation(b"", rel_type, target)


def test_remove_relation_rewrites_only_the_relations_entry() -> None:
    data = b'---\na: 1  # c\nrelations:\n  USES: ["[[A]]", "[[T]]"]\n  PART_OF: "[[T]]"\nz: 2\n---\nbody'
    out = remove_relation(data, "uses", "t")
    assert out == b'---\na: 1  # c\nrelations:\n  USES:\n    - "[[A]]"\n  PART_OF: "[[T]]"\nz: 2\n---\nbody'
    assert (
        remove_relation(out, "USES", "A")
        == b'---\na: 1  # c\nrelations:\n  PART_OF: "[[T]]"\nz: 2\n---\nbody'
    )
    assert remove_relation(b'---\nrelations:\n  USES: "[[T]]"\n---\n', "USES", "T") == b"---\n---\n"


def test_remove_relation_that_is_not_there_changes_nothing() -> None:
    data = b'---\nrelations:\n  USES: ["[[A]]"]\n---\n'
    assert remove_relation(data, "USES", "T") is data
    assert remove_relation(b"body", "USES", "T") == b"body"


@pytest.mark.parametrize("target", ["C#", "F#", "a|b", "[2024] Work/Atlas", "x^y"])
def test_a_target_no_wikilink_carries_is_written_as_a_plain_value_once(target: str) -> None:
    """Review 19a: `[[C#]]` is read as note `C`, heading `#` (by Obsidian and by the sync): the relation led to
    `C`. A plain value is taken as written, and counts as the same relation when added again."""
    data = b"---\ntype: Project\n---\nBody.\n"
    once = add_relation(data, "USES", target)
    assert (
        once
        == b"---\ntype: Project\nrelations:\n  USES:\n    - "
        + json.dumps(target).encode()
        + b"\n---\nBody.\n"
    )
    note = parse_note("P.md", once, folder_labels={}, canonical_label=lambda t: t)
    assert [link.target for link in note.links] == [target]
    assert add_relation(once, "USES", target) == once
    assert remove_relation(once, "USES", target) == data


@pytest.mark.parametrize(
    "relations",
    [
        "relations:   # typed links go here\n",
        'relations: {USES: "[[Zlib]]"}  # keep this comment\n',
        'relations: {\n  USES: "[[Zlib]]",  # why zlib: compression\n}\n',
        'relations:\n  USES:\n    A: 1  # a map value\n  APPLIES:\n    - "[[Idea Y]]"   # decided in March\n',
    ],
    ids=["null", "flow map", "multi-line flow map", "map value"],
)
def test_a_relations_entry_with_comments_is_never_written_anew(relations: str) -> None:
    """Review 23a: where no small edit could add the relation (an empty value, a flow map, a map under a type),
    the whole `relations:` entry was rendered again and every comment the person wrote in it was gone, the
    call reporting the note updated. It is refused, as a property holding a comment is, and the note is left."""
    note = f"---\ntitle: A\n{relations}---\nbody\n".encode()
    with pytest.raises(MalformedNote, match="holds a comment"):
        add_relation(note, "USES", "Zstd")
    if "APPLIES" in relations:
        with pytest.raises(MalformedNote, match="holds a comment"):
            remove_relation(note, "APPLIES", "Idea Y")
