"""A tool's write kept against an editor's older copy survives the death of the process that made it.

For a moment after a tool's write, a save of the note that lacks it (an editor saving a buffer from before the
write) has the write made again on top (review 22g, tests/test_typing_editor.py). That lived in the writing
process's memory only: killed in that moment, and the editor's older copy saved over the note, the write was gone
for good although the assistant had been told it was made. The holder now records each kept write in the
database (`server.store.kept_sql`), and the process that takes the vault over makes it again
(`vault_sync.reapply`: the change from the bytes before the write to the bytes after it, made on the text the
note holds now). Real servers over stdio, a real SIGKILL, a real vault.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_e2e_stdio import COMMAND, call
from tests.test_live import eventually
from tests.test_outbox import text
from tests.test_typing_editor import held_and_followed, made_again_in_step
from vault_sync.reapply import reapply
from vault_sync.writer import KeptWrite, keep_recorded, saved_over_since

LINES = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\n", b"---\n", b"x: 1\n", b"\n", b"tail"]), max_size=10)
FRONTMATTER = st.lists(st.sampled_from([b"type: Project\n", b"status: active\n", b"tags: [a]\n"]), max_size=4)


def _edited(lines: list[bytes], data: st.DataObject) -> list[bytes]:
    """`lines` with a few lines inserted, removed or replaced (a tool's write)."""
    out = list(lines)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        if kind == "insert" or not out:
            out.insert(
                data.draw(st.integers(0, len(out))), data.draw(st.sampled_from([b"NEW\n", b"tag: t\n"]))
            )
        elif kind == "delete":
            del out[data.draw(st.integers(0, len(out) - 1))]
        else:
            out[data.draw(st.integers(0, len(out) - 1))] = b"CHANGED\n"
    return out


@given(LINES, st.data())
def test_a_write_made_again_on_the_text_it_was_made_on_gives_exactly_what_it_wrote(
    base: list[bytes], data: st.DataObject
) -> None:
    written = b"".join(_edited(base, data))
    assert reapply(b"".join(base), written, b"".join(base)) == written


@given(LINES, st.data())
def test_a_write_made_again_keeps_the_lines_the_person_added_since(
    base: list[bytes], data: st.DataObject
) -> None:
    """The editor's copy holds a line typed before its save, at the end: the write is made again and the typed
    line is kept, once."""
    base = [*base, b"last line\n"] if not base or base[-1].endswith(b"\n") else [*base, b"\nlast line\n"]
    written = _edited(base[:-1], data) + [base[-1]]  # the write leaves the last line alone
    typed = b"A sentence typed, not saved yet.\n"
    merged = reapply(b"".join(base), b"".join(written), b"".join(base) + typed)
    assert merged is not None
    assert merged.endswith(typed) and merged.count(typed) == 1
    assert merged[: -len(typed)] == b"".join(written)


def test_a_write_after_a_last_line_without_its_newline_is_made_again() -> None:
    """Review 23g: a note ending without a newline (as Obsidian leaves many): the write appended after the last
    line, which thereby got its newline, and the older copy with a line typed after it did not hold that last
    line "as it was": nothing was made again, and the observation was lost for good."""
    base = b"---\nengrama_id: abc\n---\nAtlas is our build system."
    written = base + b"\n- 2026-11-27: Told just before the crash.\n"
    typed = base + b"\nA sentence typed, not saved yet."
    merged = reapply(base, written, typed)
    assert merged == written + b"A sentence typed, not saved yet."


def test_a_note_ending_with_its_closing_fence_keeps_it_on_a_line_of_its_own() -> None:
    """Review 23j: a note that ends with its closing `---` and no newline: the frontmatter merged apart kept that
    missing newline, and the observation appended after it was joined to the fence (`---- 2026-...`), which
    left the note without valid frontmatter."""
    base = b"---\ntype: Project\nengrama_id: abc\n---"
    written = b"---\ntype: Project\nengrama_id: abc\nstatus: paused\n---\n- 2026-11-27: Kickoff.\n"
    typed = b"---\ntype: Project\ntags: [client]\nengrama_id: abc\n---"
    merged = reapply(base, written, typed)
    assert (
        merged
        == b"---\ntype: Project\ntags: [client]\nengrama_id: abc\nstatus: paused\n---\n- 2026-11-27: Kickoff.\n"
    )


def test_a_write_after_a_crlf_last_line_without_its_line_ending_is_made_again() -> None:
    """Review 23k: the same in a note with CRLF line endings: its last line was padded with a bare `\\n`, so the
    line the write had given its `\\r\\n` was "not there", and the write was lost for good."""
    base = b"---\r\nengrama_id: abc\r\n---\r\nAtlas is our build system."
    written = base + b"\r\n- 2026-11-27: Told just before the crash.\r\n"
    typed = base + b"\r\nA sentence typed, not saved yet."
    assert reapply(base, written, typed) == written + b"A sentence typed, not saved yet."


def test_a_property_the_write_added_stays_in_the_frontmatter() -> None:
    """Review 23g: the person's older copy had a `---` rule typed right under the frontmatter, which the merge
    took for the closing fence, and the property the write added went into the body."""
    body = b"".join(b"Line %d of the body.\n" % i for i in range(8))
    base = b"---\ntype: Project\nengrama_id: abc\n---\n" + body
    written = base.replace(b"engrama_id: abc\n", b"engrama_id: abc\ndeadline: '2027-03-01'\n")
    typed = base.replace(b"---\nLine 0", b"---\n---\nLine 0")
    merged = reapply(base, written, typed)
    assert merged == written.replace(b"---\nLine 0", b"---\n---\nLine 0")


@given(FRONTMATTER, st.integers(0, 12), st.data())
def test_a_tool_write_and_the_persons_edit_elsewhere_both_hold(
    front: list[bytes], lines: int, data: st.DataObject
) -> None:
    """The tool changed the frontmatter or appended to the body; the person's older copy changed the body
    elsewhere: the merge holds both, exactly, the property in the frontmatter."""
    head = [b"---\n", *front, b"engrama_id: abc\n", b"---\n"]
    body = [b"Line %d.\n" % i for i in range(lines)]
    tool = data.draw(st.sampled_from(["property", "status", "observation"]))
    if tool == "property":
        tool_head, tool_body = [*head[:-1], b"deadline: '2027-03-01'\n", head[-1]], body
    elif tool == "status" and b"status: active\n" in head:
        tool_head, tool_body = [b"status: archived\n" if x == b"status: active\n" else x for x in head], body
    else:
        tool_head, tool_body = head, [*body, b"- 2026-11-27: Told.\n"]
    person = data.draw(st.sampled_from(["rule", "edit"] if body else ["rule"]))
    if person == "rule":  # a `---` typed right under the frontmatter
        person_body, expected_body = [b"---\n", *body], [b"---\n", *tool_body]
    else:  # a body line edited (not the last one when the tool appends after it)
        k = data.draw(st.integers(0, max(0, len(body) - (2 if tool_body is not body else 1))))
        person_body = [b"Edited %d.\n" % k if i == k else x for i, x in enumerate(body)]
        expected_body = [b"Edited %d.\n" % k if i == k else x for i, x in enumerate(tool_body)]
    base, written = b"".join(head + body), b"".join(tool_head + tool_body)
    merged = reapply(base, written, b"".join(head + person_body))
    assert merged == b"".join(tool_head + expected_body)


def test_a_write_whose_lines_the_person_changed_is_not_made_again() -> None:
    base = b"---\nstatus: active\n---\nBody.\n"
    written = b"---\nstatus: archived\n---\nBody.\n"
    assert reapply(base, written, b"---\nstatus: paused\n---\nBody.\n") is None  # the person's value stays


def test_a_recorded_write_counts_as_saved_over_only_by_a_save_made_while_it_was_kept(tmp_path: Path) -> None:
    """What the process taking the vault over decides from a record: an older copy saved while the write was
    kept is saved over; a change made later is the person's (review 23g: a line they deleted on purpose
    seconds after the write came back at the next start)."""
    note = tmp_path / "Atlas.md"
    base = b"---\nengrama_id: abc\n---\nAtlas is our build system.\n"
    written = base + b"- Told just before the crash.\n"
    now = time.time()
    kept = KeptWrite("Atlas.md", "abc", base, written, now - 1, now + 2)
    note.write_bytes(base + b"Typed.\n")  # the editor's older copy, saved now
    assert saved_over_since(tmp_path, kept)
    os.utime(note, (now + 3, now + 3))  # saved after the write's time: the person's, taken out on purpose
    assert not saved_over_since(tmp_path, kept)
    os.utime(note, (now, now))
    note.write_bytes(written)  # the note holds the write: nothing to make again
    assert not saved_over_since(tmp_path, kept)
    note.write_bytes(base.replace(b"abc", b"other") + b"Typed.\n")  # another note at the path now
    assert not saved_over_since(tmp_path, kept)


def test_a_recorded_write_made_again_twice_is_in_the_note_once(tmp_path: Path) -> None:
    """The process taking over may make a recorded write again from two places at once (the record, and its own
    watcher seeing the older copy saved): like a tool's own edit, the edit changes nothing the second time."""
    base = b"---\nengrama_id: abc\n---\nAtlas is our build system.\n"
    written = base + b"- Told just before the crash.\n"
    typed = base + b"Typed.\n"
    edit = keep_recorded(tmp_path, KeptWrite("Atlas.md", "abc", base, written, 0.0, 1.0), now=2.0)
    once = edit(typed)
    assert once == written + b"Typed.\n"
    assert edit(once) == once and edit(written) == written


pytestmark_e2e = pytest.mark.skipif(
    not COMMAND.exists(), reason="engrama-vault is not installed in this venv"
)


@pytestmark_e2e
async def test_a_write_saved_over_after_its_maker_was_killed_is_made_again_by_the_next_holder(
    vault: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder writes a queued remember into Atlas, is SIGKILLed a moment later, and the person's editor then
    saves its copy from before the write (with a sentence typed meanwhile) in place. The follower takes the vault
    over and makes the write again, on top of what the person typed."""
    monkeypatch.setenv("ENGRAMA_SETTLE_SECONDS", "1")
    async with held_and_followed(vault, db_path, tmp_path) as (holder, session, atlas):
        await asyncio.sleep(1.5)  # the note has been left alone for the settle window
        buffer = atlas.read_text(encoding="utf-8") + "A sentence typed, not saved yet.\n"  # the editor's
        done = await call(
            session,
            "engrama_remember",
            {"label": "Project", "name": "Atlas", "observation": "Told just before the crash."},
        )
        assert "queued" in done["message"]  # the holder writes it
        await eventually(lambda: "Told just before the crash." in text(vault, "Projects/Atlas.md"), 20)
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait(timeout=10)
        with open(atlas, "r+", encoding="utf-8") as editor:  # the autosave of the older buffer, in place
            editor.truncate(0)
            editor.write(buffer)
        # Made again by the process that took the vault over, the graph in step.
        await made_again_in_step(session, atlas, "Told just before the crash.", "crash", timeout=30)
    final = atlas.read_text(encoding="utf-8")
    assert final.count("Told just before the crash.") == 1 and final.count("engrama_id:") == 1
    assert final.count("A sentence typed, not saved yet.") == 1
