"""Notes to ParsedNote: identity, label rules, name, aliases, tags, properties, links (vault_sync.parse)."""

from __future__ import annotations

import pytest

from vault_sync.errors import MalformedNote, UnreadableNote
from vault_sync.model import Link, ParsedNote
from vault_sync.parse import json_value, parse_note, rel_type_of

LABELS = {"project": "Project", "person": "Person", "technology": "Technology"}
FOLDERS = {"Projects": "Project", "people": "Person"}


def parse(data: bytes | str, path: str = "Inbox/My Note.md") -> ParsedNote:
    raw = data.encode() if isinstance(data, str) else data
    return parse_note(path, raw, folder_labels=FOLDERS, canonical_label=lambda t: LABELS.get(t.lower()))


def test_full_note() -> None:
    note = parse(
        "---\n"
        "engrama_id: 3f2c9a8e\n"
        "type: project\n"
        "name: Engrama\n"
        "aliases: [engrama-vault]\n"
        "status: active\n"
        "relations:\n"
        '  USES: ["[[SQLite]]", "[[watchdog]]"]\n'
        "---\n"
        "Body with [[Wikilinks]] and [[Note|alias]] and [[Note#Heading]] and ![[embed]].\n"
    )
    assert note.engrama_id == "3f2c9a8e"
    assert (note.label, note.name, note.aliases) == ("Project", "Engrama", ("engrama-vault",))
    assert note.properties == {"status": "active"}
    assert note.links == (
        Link("USES", "SQLite", "frontmatter"),
        Link("USES", "watchdog", "frontmatter"),
        Link("LINKS_TO", "Wikilinks", "wikilink"),
        Link("LINKS_TO", "Note", "wikilink"),
        Link("LINKS_TO", "embed", "wikilink"),
    )
    assert note.body.startswith("Body with") and note.has_frontmatter


def test_note_without_frontmatter() -> None:
    note = parse("# Title\n\n---\n\nsee [[X]]\n", path="Notes/Plain.md")
    assert (note.engrama_id, note.label, note.name, note.has_frontmatter) == (None, "Note", "Plain", False)
    assert note.body == "# Title\n\n---\n\nsee [[X]]\n"
    assert note.links == (Link("LINKS_TO", "X", "wikilink"),)


@pytest.mark.parametrize("value", ["", "   ", "~"])
def test_empty_engrama_id_is_none(value: str) -> None:
    assert parse(f"---\nengrama_id: {value}\n---\n").engrama_id is None


def test_engrama_id_is_stripped_and_stringified() -> None:
    assert parse("---\nengrama_id: '  abc '\n---\n").engrama_id == "abc"
    assert parse("---\nengrama_id: 42\n---\n").engrama_id == "42"


def test_unknown_type_becomes_note_and_stays_a_property() -> None:
    note = parse("---\ntype: Spaceship\n---\n", path="Projects/X.md")
    assert note.label == "Note"
    assert note.properties == {"type": "Spaceship"}


def test_known_type_is_canonicalised_and_not_a_property() -> None:
    note = parse("---\ntype: PERSON\n---\n", path="Projects/X.md")
    assert (note.label, note.properties) == ("Person", {})


def test_no_type_uses_the_folder_label_case_insensitively() -> None:
    assert parse("x", path="projects/Sub/X.md").label == "Project"
    assert parse("x", path="People/Ada.md").label == "Person"
    assert parse("x", path="Elsewhere/X.md").label == "Note"
    assert parse("x", path="Projects.md").label == "Note"  # a file at the top is in no folder


def test_non_string_type_is_kept_as_a_property() -> None:
    note = parse("---\ntype: [a, b]\n---\n")
    assert (note.label, note.properties) == ("Note", {"type": ["a", "b"]})


def test_name_falls_back_to_title_then_file_name() -> None:
    assert parse("---\nname: N\ntitle: T\n---\n").name == "N"
    assert parse("---\nname: N\ntitle: T\n---\n").properties == {"title": "T"}
    assert parse("---\ntitle: T\n---\n").name == "T"
    assert parse("---\ntitle: T\n---\n").properties == {}
    assert parse("---\nname: ''\n---\n", path="a/b/Ünïcode 漢.md").name == "Ünïcode 漢"
    assert parse("---\nname: 2024\n---\n").name == "2024"


def test_aliases_and_tags_in_every_form() -> None:
    assert parse("---\naliases: one\n---\n").aliases == ("one",)
    assert parse("---\nalias: [a, ' b ', null]\n---\n").aliases == ("a", "b")
    assert parse("---\ntags: '#a, b c'\n---\n").tags == ("a", "b", "c")
    assert parse("---\ntags: ['#x', y, '#x']\n---\n").tags == ("x", "y")
    assert parse("---\ntag: solo\n---\n").tags == ("solo",)
    assert parse("---\naliases: []\ntags:\n---\n").properties == {}


def test_relations_in_every_form() -> None:
    note = parse(
        "---\nrelations:\n"
        '  uses: "[[A]]"\n'
        "  part-of:\n    - '[[B|alias]]'\n    - C\n"
        "  depends on: [[D]]\n"
        '  RELATED_TO: ["[[E#h]]", null, "[[A]]"]\n'
        "---\n"
    )
    assert note.links == (
        Link("USES", "A", "frontmatter"),
        Link("PART_OF", "B", "frontmatter"),
        Link("PART_OF", "C", "frontmatter"),
        Link("DEPENDS_ON", "D", "frontmatter"),
        Link("RELATED_TO", "E", "frontmatter"),
        Link("RELATED_TO", "A", "frontmatter"),
    )
    assert note.properties == {}


def test_relations_that_are_not_a_map_are_kept_as_a_property() -> None:
    note = parse('---\nrelations: ["[[A]]"]\n---\n')
    assert note.links == ()
    assert note.properties == {"relations": ["[[A]]"]}


def test_properties_are_json_able() -> None:
    note = parse(
        "---\ncreated: 2024-05-01\nat: 2024-05-01 10:30:00\nset: !!set {a: null}\n"
        "n: .nan\nnested: {d: 2024-01-02, l: [1, 2.5, true]}\n---\n"
    )
    assert note.properties == {
        "created": "2024-05-01",
        "at": "2024-05-01T10:30:00",
        "set": ["a"],
        "n": "nan",
        "nested": {"d": "2024-01-02", "l": [1, 2.5, True]},
    }


def test_json_value_of_odd_types() -> None:
    assert json_value((1, {2: b"\x00"})) == [1, {"2": "AA=="}]
    assert json_value(object).startswith("<class")


def test_rel_type_of() -> None:
    assert rel_type_of(" depends-on  soon ") == "DEPENDS_ON_SOON"


def test_crlf_and_bom_note() -> None:
    note = parse(b"\xef\xbb\xbf---\r\nname: X\r\n---\r\nsee [[Y]]\r\n")
    assert note.name == "X"
    assert note.body == "see [[Y]]\r\n"
    assert note.links == (Link("LINKS_TO", "Y", "wikilink"),)


def test_non_utf8_note_is_unreadable() -> None:
    with pytest.raises(UnreadableNote, match=r"Inbox/My Note\.md is not UTF-8 text.*re-save it as UTF-8"):
        parse("---\nname: café\n---\n".encode("cp1252"))


def test_nul_byte_note_is_unreadable() -> None:
    with pytest.raises(UnreadableNote, match="binary"):
        parse(b"PK\x03\x04\x00\x00")


def test_malformed_yaml_is_reported_with_path_and_line() -> None:
    with pytest.raises(
        MalformedNote, match=r"Inbox/My Note\.md has invalid YAML in its frontmatter at line 4"
    ) as err:
        parse("---\nok: 1\ntags: [a, b\nstatus: x\n---\n")
    assert "while parsing a flow sequence that starts at line 3" in str(err.value)


def test_unterminated_frontmatter_is_reported() -> None:
    with pytest.raises(MalformedNote, match="unterminated frontmatter"):
        parse("---\nname: X\nno closing line\n")


def test_list_frontmatter_is_reported() -> None:
    with pytest.raises(MalformedNote, match="frontmatter that is a list"):
        parse("---\n- a\n- b\n---\n")
