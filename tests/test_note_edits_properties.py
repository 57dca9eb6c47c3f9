"""Property tests: over generated notes, our edits change only the bytes we own.

Notes are built from pieces (comments, blank lines, plain/quoted scalars, flow and block lists, block
scalars, nested maps, a `relations:` block in several layouts; LF or CRLF; BOM; unicode; empty or absent
frontmatter; bodies with `---` rules, code and wikilinks; with or without a final newline), and each
piece's byte span is recorded so the tests can check exactly which bytes an edit may touch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vault_sync.errors import MalformedNote, VaultError
from vault_sync.frontmatter import BOM, locate_frontmatter, read_frontmatter
from vault_sync.identify import insert_id
from vault_sync.model import ParsedNote
from vault_sync.notes import observation_line, update_note
from vault_sync.open_blocks import require_closed
from vault_sync.parse import parse_note, rel_type_of
from vault_sync.relations_block import add_relation
from vault_sync.wikilinks import extract_wikilinks
from vault_sync.yaml_edit import plain_value, same_data

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ID = "3f2c9a8e-0000-4000-8000-000000000001"

WORD = (
    st.text(alphabet="abcxyzé漢字🙂019 -", min_size=1, max_size=10)
    .map(str.strip)
    .filter(lambda w: w[:1].isalnum())
)
KEYS = [
    "title",
    "status",
    "created",
    "k1",
    "tags",
    "título",
    "名前",
    "emoji_🙂",
    "up",
    "notes",
    "aliases",
    "x-y",
]
TARGETS = ["A", "B", "T", "Zeta 漢", "folder/Deep"]


@dataclass(frozen=True)
class Note:
    data: bytes
    newline: bytes
    entries: tuple[tuple[str, bytes], ...]  # (key, the entry's exact bytes) for every top-level entry
    relations_span: tuple[int, int] | None  # byte span of the `relations:` entry, when there is one
    has_frontmatter: bool


def _item(draw: st.DrawFn) -> str:
    word = draw(WORD)
    return draw(st.sampled_from([word, f"'{word}'", f'"{word}"', f'"[[{word}]]"']))


@st.composite
def value_lines(draw: st.DrawFn, key: str) -> list[str]:
    """One top-level entry as lines without line breaks."""
    kind = draw(st.sampled_from(["scalar", "literal", "comment", "flow", "block", "scalar_block", "map"]))
    word = draw(WORD)
    if kind == "scalar":
        return [f"{key}: {_item(draw)}"]
    if kind == "literal":
        return [f"{key}: {draw(st.sampled_from(['42', '4.50', '2024-05-01', 'yes', 'null', '', '~', '[]']))}"]
    if kind == "comment":
        return [f"{key}: {_item(draw)}  # {word}"]
    items = [_item(draw) for _ in range(draw(st.integers(0, 3)))]
    if kind == "flow":
        return [f"{key}: [{', '.join(items)}]"]
    if kind == "block":
        indent = draw(st.sampled_from(["", "  ", "    "]))
        return [f"{key}:"] + [f"{indent}- {item}" for item in items]
    if kind == "scalar_block":
        style = draw(st.sampled_from(["|", "|-", "|+", ">", ">-"]))
        lines = [f"  {draw(WORD)}" for _ in range(draw(st.integers(1, 3)))]
        return [f"{key}: {style}", *lines] + ([""] if draw(st.booleans()) else [])
    return [f"{key}:", f"  sub: {_item(draw)}", f"  list: [{word}]", f"  deep:\n    - {word}"]


@st.composite
def relations_lines(draw: st.DrawFn) -> list[str]:
    layout = draw(st.sampled_from(["block", "empty", "flow_map"]))
    if layout == "empty":
        return ["relations:"]
    if layout == "flow_map":
        return [f'relations: {{USES: ["[[{draw(st.sampled_from(TARGETS))}]]"]}}']
    lines = ["relations:"] + (["  # typed links"] if draw(st.booleans()) else [])
    for key in draw(st.lists(st.sampled_from(["USES", "PART_OF", "depends on"]), unique=True, max_size=3)):
        targets = draw(st.lists(st.sampled_from(TARGETS), unique=True, max_size=3))
        form = draw(st.sampled_from(["block", "indentless", "flow", "scalar", "plain"]))
        if form in ("block", "indentless"):
            pad = "    " if form == "block" else "  "
            lines += [f"  {key}:"] + [f'{pad}- "[[{t}]]"' for t in targets]
        elif form == "flow" or len(targets) > 1:
            quoted = ", ".join(f'"[[{t}|alias]]"' for t in targets)
            lines.append(f"  {key}: [{quoted}]")
        else:
            lines.append(f"  {key}: {targets[0] if targets else ''}".rstrip())
    return lines


BODY_LINES = ["text 🙂", "---", "***", "[[Link A]]", "see [[B|alias]] and ![[C#h]]", "```", "~~~", "`[[D]]`"]
BODY_LINES += ["# Heading", "", "- item", "漢字 [[Zeta 漢]]", "---   "]


@st.composite
def notes(draw: st.DrawFn, *, with_relations: bool = True) -> Note:
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    bom = BOM if draw(st.booleans()) else b""
    body_lines = draw(st.lists(st.sampled_from(BODY_LINES), max_size=8))
    has_fm = draw(st.integers(0, 5)) > 0
    if not has_fm:
        body_lines = ["first line", *body_lines]  # a leading `---` line would open frontmatter
    body = nl.join(body_lines) + (nl if body_lines and draw(st.booleans()) else "")
    if not has_fm:
        newline = nl if nl in body else "\n"  # a file without line breaks gets LF
        return Note(bom + body.encode(), newline.encode(), (), None, False)
    out = bytearray(bom + f"---{draw(st.sampled_from(['', ' ', '  ']))}{nl}".encode())
    entries: list[tuple[str, bytes]] = []
    relations_span = None
    keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=6))
    if with_relations and draw(st.booleans()):
        keys.insert(draw(st.integers(0, len(keys))), "relations")
    for key in keys:
        if draw(st.integers(0, 3)) == 0:
            out += draw(st.sampled_from(["# comment ✓", "", "#"])).encode() + nl.encode()
        lines = draw(relations_lines()) if key == "relations" else draw(value_lines(key))
        text = "".join(line.replace("\n", nl) + nl for line in lines).encode()
        if key == "relations":
            relations_span = (len(out), len(out) + len(text))
        entries.append((key, text))
        out += text
    closing = draw(st.sampled_from(["---", "...", "--- "]))
    out += (closing + (nl if body or draw(st.booleans()) else "") + body).encode()
    return Note(bytes(out), nl.encode(), tuple(entries), relations_span, True)


def parse(data: bytes) -> ParsedNote:
    return parse_note("Folder/Note.md", data, folder_labels={}, canonical_label=lambda t: None)


def comments_of(entry: bytes) -> list[bytes]:
    """The comments written in an entry's lines (the generated values hold no `#` of their own)."""
    return [line[line.index(b"#") :].rstrip(b"\r\n") for line in entry.splitlines() if b"#" in line]


def body_of(data: bytes) -> bytes:
    span = locate_frontmatter(data)
    return data[span.end :] if span else data[len(BOM) if data.startswith(BOM) else 0 :]


@SETTINGS
@given(notes())
def test_insert_id_only_inserts_one_line(note: Note) -> None:
    out = insert_id(note.data, ID)
    line = f"engrama_id: {ID}".encode() + note.newline
    span = locate_frontmatter(note.data)
    if span is not None:
        assert out == note.data[: span.close_start] + line + note.data[span.close_start :]
    else:
        bom = len(BOM) if note.data.startswith(BOM) else 0
        block = b"---" + note.newline + line + b"---" + note.newline
        assert out == note.data[:bom] + block + note.data[bom:]
    assert same_data(read_frontmatter(out)[1], {**read_frontmatter(note.data)[1], "engrama_id": ID})
    before, after = parse(note.data), parse(out)
    assert (after.body, after.links, after.engrama_id) == (before.body, before.links, ID)


def _folded_links(note: ParsedNote) -> set[tuple[str, str, str]]:
    return {(link.rel_type, link.target.casefold(), link.origin) for link in note.links}


@SETTINGS
@given(notes(), st.sampled_from(["USES", "PART_OF", "DEPENDS_ON", "RELATED_TO"]), st.sampled_from(TARGETS))
def test_add_relation_changes_only_the_relations_block(note: Note, rel_type: str, target: str) -> None:
    out = add_relation(note.data, rel_type, target)
    span = locate_frontmatter(note.data)
    if note.relations_span is not None:
        start, end = note.relations_span
    elif span is not None:
        start = end = span.close_start
    else:
        start = end = len(BOM) if note.data.startswith(BOM) else 0
    assert out[:start] == note.data[:start]
    assert out[len(out) - (len(note.data) - end) :] == note.data[end:]
    before, after = parse(note.data), parse(out)
    assert after.properties == before.properties and after.body == before.body
    new = (rel_type_of(rel_type), target.casefold(), "frontmatter")
    assert _folded_links(after) == _folded_links(before) | {new}
    assert add_relation(out, rel_type, target) == out


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


@SETTINGS
@given(
    notes(),
    st.lists(st.sampled_from([*KEYS, "relations"]), unique=True, max_size=3),
    st.dictionaries(st.text(min_size=1, max_size=10), JSON_VALUES, max_size=2),
    st.lists(JSON_VALUES, min_size=3, max_size=3),
    st.none() | WORD,
)
def test_update_note_changes_only_the_keys_it_sets(
    note: Note, replaced: list[str], added: dict[str, Any], values: list[Any], observation: str | None
) -> None:
    updates = {**added, **{key: values[i] for i, key in enumerate(replaced)}}
    try:
        out = update_note(note.data, properties=updates, observation=observation, today="2026-11-21")
    except MalformedNote as exc:
        if "ends inside" in str(exc):  # an observation is never appended inside a block left open
            assert observation is not None
            with pytest.raises(MalformedNote):
                require_closed(note.data)
            return
        # Refused only when rewriting an entry would lose the person's comment: one inside a value of
        # several lines (a comment after a value on the key's line stays, the value replaced in place).
        assert "comment" in str(exc)
        assert any(key in updates and b"#" in text and text.count(b"\n") > 1 for key, text in note.entries)
        return
    for key, text in note.entries:
        if key not in updates:
            assert text in out, f"the lines of {key!r} changed"
        else:
            for comment in comments_of(text):
                assert comment in out, f"the comment {comment!r} of {key!r} was lost"
    old_body, new_body = body_of(note.data), body_of(out)
    assert new_body.startswith(old_body)
    appended = new_body[len(old_body) :]
    if observation is None:
        assert appended == b""
    else:
        bullet = observation_line(observation, "2026-11-21").encode().replace(b"\n", note.newline)
        needs_break = out[: len(out) - len(appended)] and not out[: len(out) - len(appended)].endswith(b"\n")
        assert appended == (note.newline if needs_break else b"") + bullet
    expected = {**read_frontmatter(note.data)[1], **plain_value(updates)}
    assert same_data(read_frontmatter(out)[1], expected)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_parse_note_accepts_any_bytes_or_says_why_not(data: bytes) -> None:
    try:
        note = parse(data)
    except VaultError as exc:
        assert str(exc)
    else:
        assert all(link.target and link.target == link.target.strip() for link in note.links)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*BODY_LINES, "[[", "]]", "`", "``", "|x", "#h", "![[e]]", " "]), max_size=20)
)
def test_extract_wikilinks_returns_clean_unique_targets(pieces: list[str]) -> None:
    targets = extract_wikilinks("".join(pieces))
    assert len({t.casefold() for t in targets}) == len(targets)
    assert all(t and t == t.strip() and "|" not in t and "#" not in t for t in targets)


@SETTINGS
@given(notes(), st.lists(st.sampled_from([*KEYS, "relations"]), unique=True, min_size=1, max_size=3))
def test_update_note_removes_only_the_lines_of_the_keys_it_removes(note: Note, removed: list[str]) -> None:
    """Reviving an entity takes its `valid_to:` (or `status:`) line out: every other byte stays."""
    try:
        out = update_note(note.data, properties={}, observation=None, today="2026-11-21", remove=removed)
    except MalformedNote as exc:  # the entry holds the person's comment: never removed with it
        assert "comment" in str(exc)
        assert any(key in removed and b"#" in text for key, text in note.entries)
        return
    for key, text in note.entries:  # a comment below an empty value is not the key's: it stays
        for comment in comments_of(text) if key in removed else ():
            assert comment in out, f"the comment {comment!r} under {key!r} was removed"
    if not any(key in removed for key, _ in note.entries):
        assert out == note.data  # nothing to remove: not a byte changes
    for key, text in note.entries:
        if key not in removed:
            assert text in out, f"the lines of {key!r} changed"
    assert body_of(out) == body_of(note.data)
    # Only whole lines were taken out, nothing added or rewritten (a comment inside an empty value stays).
    kept = iter(note.data.splitlines(keepends=True))
    assert all(any(line == other for other in kept) for line in out.splitlines(keepends=True))
    old = read_frontmatter(note.data)[1]
    assert same_data(read_frontmatter(out)[1], {k: v for k, v in old.items() if k not in removed})


def test_a_value_the_note_already_holds_changes_no_byte_even_with_comments_inside_it() -> None:
    """Found by review: an assistant repeating a list the note already has (with a comment inside it) was
    refused as a rewrite that would lose the comment, and the observation of the same call was lost with it."""
    data = b"---\ntags:\n  - db  # the main one\n  - infra\nstatus: active\n---\nAtlas.\n"
    out = update_note(
        data,
        properties={"tags": ["db", "infra"], "status": "active"},
        observation="Second fact.",
        today="2026-11-26",
    )
    assert out == data + b"- 2026-11-26: Second fact.\n"
    with pytest.raises(MalformedNote, match="comment"):  # a new value there would lose the comment: refused
        update_note(data, properties={"tags": ["db"]}, observation=None, today="2026-11-26")
    kept = update_note(
        data, properties={"status": "active"}, observation=None, today="2026-11-26", remove=["status"]
    )
    assert kept == data  # set and removed at once: set wins, as before


def test_a_comment_under_a_key_below_a_block_value_keeps_the_key() -> None:
    """Found by this file's property test in CI (session 18): `relations:` with only an indented comment under
    it, right below a literal block (`created: |`). Taking the key out left the comment line to the block,
    which took it into its value; the edit was refused, saying only that other properties would change. The
    comment is the person's: the key stays, and the refusal says why, as for a comment on the key itself."""
    data = b"---\ncreated: |\n  0\nrelations:\n  # typed links\nk1: 0\n---\ntext\n"
    with pytest.raises(MalformedNote, match="comment under it"):
        update_note(data, properties={}, observation=None, today="2026-11-21", remove=["relations"])
