"""Writing approved insights into notes: only when approved, once, around the person's bytes, into the graph."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_reflect_support import VaultBuilder, synced

from server.reflect.service import (
    InsightNotApproved,
    InsightWriteError,
    decide_insight,
    reflect,
    write_insight_to_vault,
)
from server.store import memory_sql
from vault_sync.checksum import sha256_hex


def shared_sqlite(vault: Path) -> VaultBuilder:
    b = VaultBuilder(vault)
    b.note("Technologies", "SQLite", "Technology")
    b.note("Projects", "Alpha", "Project", relations={"USES": ["SQLite"]}, body="Alpha's own words.\n\nMore.")
    b.note("Projects", "Beta", "Project", relations={"USES": ["SQLite"]})
    return b


async def approved_insight(rt) -> str:
    [insight] = (await reflect(rt, ["shared_technology"])).insights
    await decide_insight(rt, insight.id, "approve")
    return insight.id


async def test_write_appends_a_marked_section_once(vault, db_path) -> None:
    b = shared_sqlite(vault)
    before = {name: b.read(name) for name in ("Alpha", "Beta", "SQLite")}
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        written = await write_insight_to_vault(rt, insight_id)
        after_first = {name: b.read(name) for name in before}
        again = await write_insight_to_vault(rt, insight_id)
        after_second = {name: b.read(name) for name in before}
    assert written.written == again.written == sorted(b.paths[n] for n in ("Alpha", "Beta", "SQLite"))
    assert written.skipped == again.skipped == []
    assert after_second == after_first  # byte-identical: writing again changes nothing
    for name, data in after_first.items():
        assert data.startswith(before[name])  # the person's bytes are untouched
        added = data[len(before[name]) :].decode("utf-8")
        assert added.startswith("\n<!-- engrama:insight shared_technology/")
        assert added.endswith("<!-- /engrama:insight -->\n")
        assert "Insight: Shared technology: 2 entities build on SQLite" in added
        assert "Confidence 0.48 · approved 20" in added
    alpha_section = after_first["Alpha"].decode("utf-8")
    assert "[[Projects/Beta|Beta]]" in alpha_section and "[[Technologies/SQLite|SQLite]]" in alpha_section
    assert "[[Projects/Alpha|Alpha]]" not in alpha_section  # a note never links to itself


async def test_the_graph_records_what_was_written(vault, db_path) -> None:
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        await write_insight_to_vault(rt, await approved_insight(rt))
        state = await rt.store.file_state(b.paths["Alpha"])
        [alpha] = await rt.store.find_nodes("Alpha")
        rows, _ = await rt.store.read(memory_sql.neighbourhood, alpha.id, 1, 100)
        neighbours = {node.name for node, *_ in rows}
        named_alpha = await rt.store.find_nodes("Alpha")
    assert state is not None and state.checksum == sha256_hex(b.read("Alpha"))
    # The section's wikilinks are engrama's, not the person's: the graph links Alpha and Beta through the
    # insight's own note (ABOUT), not as if Alpha's text linked Beta (reflect would feed on them: review 18a).
    assert "Beta" not in neighbours and "Shared technology: 2 entities build on SQLite" in neighbours
    assert [n.status for n in named_alpha] == ["active"]  # no stub from a link to itself


def about_names(conn, node_id: str) -> list[str]:
    sql = "select n.name from edges e join nodes n on n.id = e.target where e.source = ? and e.type = 'ABOUT'"
    return [r[0] for r in conn.execute(sql, (node_id,))]


async def test_an_approved_insight_has_a_note_of_its_own_in_the_graph(vault, db_path) -> None:
    shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        await approved_insight(rt)
        [node] = await rt.store.find_nodes("Shared technology: 2 entities build on SQLite", "Insight")
        about = set(await rt.store.read(about_names, node.id))
    assert node.path == "Insights/Shared technology - 2 entities build on SQLite.md"
    assert (
        node.properties["insight_status"] == "approved" and node.properties["pattern"] == "shared_technology"
    )
    assert {"insight_key", "decided_at"} <= set(node.properties)
    assert 0 < node.confidence < 1  # the note's `confidence:` is the node's own (issue #8), not a property
    assert about == {"SQLite", "Alpha", "Beta"}


async def test_only_approved_insights_are_written(vault, db_path) -> None:
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        [insight] = (await reflect(rt, ["shared_technology"])).insights
        with pytest.raises(InsightNotApproved, match="approve it first with engrama_approve_insight"):
            await write_insight_to_vault(rt, insight.id)
        await decide_insight(rt, insight.id, "dismiss")
        with pytest.raises(InsightNotApproved, match="dismissed"):
            await write_insight_to_vault(rt, insight.id)
    assert b"engrama:insight" not in b.read("Alpha")


async def test_target_note_receives_the_section_alone(vault, db_path) -> None:
    b = shared_sqlite(vault)
    b.note("Notes", "Ideas", body="My ideas.")
    alpha = b.read("Alpha")
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        assert (await write_insight_to_vault(rt, insight_id, target_note="Notes/Ideas")).written == [
            "Notes/Ideas.md"
        ]
    assert b"<!-- engrama:insight " in b.read("Ideas") and b.read("Alpha") == alpha


@pytest.mark.parametrize("target", ["../outside.md", "/etc/passwd", "Notes/../../x.md", ".obsidian/app.md"])
async def test_target_notes_outside_the_vault_are_refused(vault, db_path, target) -> None:
    shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        with pytest.raises(InsightWriteError):
            await write_insight_to_vault(rt, insight_id, target_note=target)


async def test_a_missing_target_note_is_reported(vault, db_path) -> None:
    shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        with pytest.raises(InsightWriteError, match="does not exist"):
            await write_insight_to_vault(rt, insight_id, target_note="Notes/Nope.md")


async def test_a_note_edited_since_the_last_sync_is_written_on_its_new_bytes(vault, db_path) -> None:
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        edited = b.read("Alpha") + b"A line the person just typed.\n"
        (vault / b.paths["Alpha"]).write_bytes(edited)  # the graph still has the old checksum
        await write_insight_to_vault(rt, insight_id)
    assert b.read("Alpha").startswith(edited)


async def test_crlf_notes_keep_their_line_endings(vault, db_path) -> None:
    b = shared_sqlite(vault)
    path = vault / b.paths["Beta"]
    crlf = path.read_bytes().replace(b"\n", b"\r\n")
    path.write_bytes(crlf)
    async with synced(vault, db_path) as rt:
        await write_insight_to_vault(rt, await approved_insight(rt))
    data = path.read_bytes()
    assert data.startswith(crlf) and data.count(b"\n") == data.count(b"\r\n")


async def test_malformed_notes_are_skipped_not_edited(vault, db_path) -> None:
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        broken = b"---\nengrama_id: [unclosed\n---\nBody\n"
        (vault / b.paths["Beta"]).write_bytes(broken)
        written = await write_insight_to_vault(rt, insight_id)
    assert b.paths["Beta"] not in written.written and b.read("Beta") == broken
    assert b.paths["Alpha"] in written.written
    assert [s.path for s in written.skipped] == [b.paths["Beta"]]  # said, with why


async def test_a_dismissal_waits_for_the_person_saving_the_dismissed_list_and_loses_nothing(
    vault, db_path
) -> None:
    """The dismissed list is a note like any other: when the person's editor is saving it in place (the file
    truncated, its text written a moment later), the dismissal waits until the note is quiet and adds its line
    to what the person wrote. Writing at once would replace the empty file and the editor's text would land in
    an unlinked inode."""
    import threading
    import time

    from server.reflect.records import dismissed_path

    shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        [insight] = (await reflect(rt, ["shared_technology"])).insights
        rel = dismissed_path(rt)
        listing = vault / rel
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text("# Dismissed insights\n\nMy own notes on what I turned down.\n", encoding="utf-8")
        await rt.require_sync().sync_path(rel)
        rt.require_sync().settle = 0.5  # the production rule: never edit a note changed within the window
        typed = "# Dismissed insights\n\nMy own notes on what I turned down, and a new line.\n"
        editor = open(listing, "r+b")  # noqa: SIM115 - held open across the dismissal, as an editor does
        editor.truncate(0)
        editor.flush()

        def finish_saving() -> None:
            time.sleep(0.2)
            editor.write(typed.encode("utf-8"))
            editor.close()

        saving = threading.Thread(target=finish_saving)
        saving.start()
        decision = await decide_insight(rt, insight.id, "dismiss")
        saving.join()
        text = listing.read_text(encoding="utf-8")
    assert decision.status == "dismissed"
    assert text.startswith(typed), text
    assert insight.title in text[len(typed) :]


async def test_an_entity_note_renamed_since_gets_the_insight_and_a_deleted_one_is_reported(
    vault, db_path
) -> None:
    """Found by review: writing an insight skipped, without a word, an entity's note the person had renamed
    (or deleted) since the graph last saw it; the result listed only the notes written."""
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        os.rename(vault / b.paths["Alpha"], vault / "Projects/Alpha (2024).md")  # no sync since
        (vault / b.paths["Beta"]).unlink()
        done = await write_insight_to_vault(rt, insight_id)
    assert done.written == sorted(["Projects/Alpha (2024).md", b.paths["SQLite"]])
    assert "<!-- engrama:insight shared_technology/" in (vault / "Projects/Alpha (2024).md").read_text(
        encoding="utf-8"
    )
    assert [(s.path, "gone from the vault" in s.error) for s in done.skipped] == [(b.paths["Beta"], True)]


async def test_a_second_clients_write_back_is_queued_and_written_by_the_holder(vault, db_path) -> None:
    """Review 18a: with two clients on one vault, writing an approved insight from the one whose server does not
    hold the vault was refused ("try again from it"), though its decisions and remembers were queued. It is
    queued too now, and the holder writes it; one retracted before the holder gets to it is not written."""
    from server.services import outbox
    from server.store import outbox_sql

    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        before = b.read("Alpha")
        rt.require_sync().writable = False  # as a follower's server is
        done = await write_insight_to_vault(rt, insight_id)
        assert done.written == [] and done.queued is not None and "queued" in done.queued
        assert b.read("Alpha") == before and (await rt.store.read(outbox_sql.summary)).waiting == 1
        rt.require_sync().writable = True  # the holder drains it
        assert await outbox.drain(rt) == outbox.Drained(1, 0)
        assert b"engrama:insight" in b.read("Alpha") and b"engrama:insight" in b.read("Beta")


async def test_a_queued_write_back_retracted_before_the_holder_writes_it_is_not_written(
    vault, db_path
) -> None:
    from server.services import outbox

    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        before = b.read("Alpha")
        rt.require_sync().writable = False
        assert (await write_insight_to_vault(rt, insight_id)).queued
        rt.require_sync().writable = True
        [note] = [p for p in (vault / "Insights").glob("*.md") if "Dismissed" not in p.name]
        note.write_text(
            note.read_text(encoding="utf-8").replace("insight_status: approved", "insight_status: dismissed"),
            encoding="utf-8",
        )
        await rt.require_sync().sync_vault()
        assert await outbox.drain(rt) == outbox.Drained(1, 0)  # done with: nothing to write
        assert b.read("Alpha") == before


async def test_links_the_person_writes_after_an_insight_section_they_edited_reach_the_graph(
    vault, db_path
) -> None:
    """Review 21b: the person deleted the end marker of a section written into their note (or typed after it
    on its line), then linked another note: the link never reached the graph."""
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        await write_insight_to_vault(rt, await approved_insight(rt))
        alpha = vault / b.paths["Alpha"]
        text = alpha.read_text(encoding="utf-8")
        alpha.write_text(
            text.replace("<!-- /engrama:insight -->\n", "") + "We moved the port to [[Gamma]].\n",
            encoding="utf-8",
        )
        beta = vault / b.paths["Beta"]
        beta.write_text(beta.read_text(encoding="utf-8").rstrip("\n") + " See [[Delta]].\n", encoding="utf-8")
        await rt.require_sync().sync_vault()
        for name, linked in (("Alpha", "Gamma"), ("Beta", "Delta")):
            node = await rt.store.read(memory_sql.find_entity, "Project", name)
            neighbours = await rt.store.read(
                lambda c, i=node.id: [
                    r[0]
                    for r in c.execute(
                        "select n.name from edges e join nodes n on n.id = e.target "
                        "where e.source = ? and e.valid_to is null",
                        (i,),
                    )
                ]
            )
            assert linked in neighbours, (name, neighbours)


async def test_a_write_back_cut_short_by_a_kill_is_finished_by_the_next_start(
    vault, db_path, tmp_path
) -> None:
    """Review 21b: the server was killed (SIGKILL) while writing an approved insight into its 300 notes; the
    insight stayed in the few notes written, and a restart neither finished the write nor said anything."""
    import asyncio
    import json
    import signal
    import subprocess
    import time

    from tests.test_e2e_stdio import COMMAND, call, serve_args
    from tests.test_live_processes import eventually
    from tests.test_resources import served

    b = VaultBuilder(vault)
    b.note("Technologies", "SQLite", "Technology")
    for i in range(300):
        b.note("Projects", f"P{i:03d}", "Project", relations={"USES": ["SQLite"]}, body=f"Project {i}.")
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
    notes = sorted(p for p in vault.glob("*/*.md") if p.parent.name != "Insights")
    before = {p: p.read_bytes() for p in notes}

    def carrying() -> int:
        return sum(b"<!-- engrama:insight " in p.read_bytes() for p in notes)

    env = {**os.environ, "ENGRAMA_SETTLE_SECONDS": "0"}
    server = subprocess.Popen(
        [str(COMMAND), *serve_args(vault, db_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "killed.log", "w", encoding="utf-8"),  # noqa: SIM115 - closed with the process
        env=env,
    )
    assert server.stdin is not None and server.stdout is not None

    def send(message: dict) -> None:
        server.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
    assert json.loads(server.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "engrama_write_insight_to_vault", "arguments": {"insight_id": insight_id}},
        }
    )
    deadline = time.monotonic() + 60
    while carrying() < 3:
        assert time.monotonic() < deadline and server.poll() is None, "the write-back never began"
        await asyncio.sleep(0.005)
    server.send_signal(signal.SIGKILL)
    server.wait(timeout=10)
    cut_short = carrying()
    assert 3 <= cut_short < len(notes), "the kill came after the whole write: make the vault larger"
    async with served(vault, db_path, tmp_path, watch=True) as session:
        await eventually(lambda: carrying() == len(notes), 60)

        async def nothing_waits() -> bool:
            return (await call(session, "engrama_status", {}))["vault"]["outbox"]["waiting"] == 0

        await eventually(nothing_waits, 30)
    for path, data in before.items():
        now = path.read_bytes()
        assert now.startswith(data) and now.count(b"<!-- engrama:insight ") == 1, path


async def test_every_section_links_to_where_a_moved_note_is_now(vault, db_path) -> None:
    """Review 23b: a note moved just before the write was found by its id and written, but every section was
    rendered with its old path: the links to it led nowhere (a click made an empty note there) and its own
    section linked to itself."""
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        (vault / "Archive").mkdir()
        os.rename(vault / b.paths["Alpha"], vault / "Archive/Alpha.md")  # no sync since
        done = await write_insight_to_vault(rt, insight_id)
    assert done.written == sorted(["Archive/Alpha.md", b.paths["Beta"], b.paths["SQLite"]])
    for rel in done.written:
        text = (vault / rel).read_text(encoding="utf-8")
        assert "[[Projects/Alpha|" not in text
        assert ("[[Archive/Alpha|Alpha]]" in text) == (rel != "Archive/Alpha.md")  # never a link to itself
    assert not (vault / "Projects/Alpha.md").exists()


async def test_an_entity_whose_note_went_to_the_trash_is_reported_not_left_out(vault, db_path) -> None:
    """Review 23b: once the graph had seen an entity's note deleted or trashed (its entity archived), writing
    the insight left that entity out without a word; the result said nothing was skipped."""
    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        (vault / ".trash").mkdir()
        os.rename(vault / b.paths["Alpha"], vault / ".trash/Alpha.md")
        await rt.require_sync().sync_vault()
        done = await write_insight_to_vault(rt, insight_id)
    assert done.written == sorted([b.paths["Beta"], b.paths["SQLite"]])
    assert [s.path for s in done.skipped] == [b.paths["Alpha"]]
    assert "gone from the vault" in done.skipped[0].error and "restore it" in done.skipped[0].error


async def test_a_queued_write_back_waits_for_a_note_that_cannot_take_it_yet(vault, db_path) -> None:
    """Review 23b: the holder applying a second client's write-back skipped a note it could not write then
    (being edited, malformed for a moment), logged it and dropped the row: that note never got the insight
    and engrama_status showed nothing waiting. The row stays, with why, and the note gets it once it can."""
    from server.services import outbox
    from server.store import outbox_sql

    b = shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        rt.require_sync().writable = False  # as a follower's server is
        assert (await write_insight_to_vault(rt, insight_id)).queued
        rt.require_sync().writable = True
        good = b.read("Alpha")
        (vault / b.paths["Alpha"]).write_bytes(good.replace(b"type: Project", b"type: [Project"))
        assert await outbox.drain(rt) == outbox.Drained(0, 1)
        summary = await rt.store.read(outbox_sql.summary)
        assert summary.waiting == 1 and b"engrama:insight" in b.read("Beta")
        # Review 23g: the person takes the section out of Beta while the row waits; tried again, the row
        # writes only the notes still without it, and Beta stays as they left it.
        without = b.read("Beta")[: b.read("Beta").index(b"\n<!-- engrama:insight ")] + b"\n"
        (vault / b.paths["Beta"]).write_bytes(without)
        await rt.require_sync().sync_vault()
        assert await outbox.drain(rt) == outbox.Drained(0, 1)
        assert b.read("Beta") == without
        (vault / b.paths["Alpha"]).write_bytes(good)  # the person fixes the typo
        assert await outbox.drain(rt) == outbox.Drained(1, 0)
        assert b"engrama:insight" in b.read("Alpha") and b.read("Beta") == without


async def test_a_second_clients_write_into_a_target_note_that_does_not_exist_is_refused_at_once(
    vault, db_path
) -> None:
    """Review 23b: the holder refuses a target_note that does not exist; the same call from a second client was
    reported queued, then dropped by the holder with only a line in its log."""
    from server.store import outbox_sql

    shared_sqlite(vault)
    async with synced(vault, db_path) as rt:
        insight_id = await approved_insight(rt)
        rt.require_sync().writable = False
        with pytest.raises(InsightWriteError, match=r"Notes/Ideas\.md does not exist"):
            await write_insight_to_vault(rt, insight_id, target_note="Notes/Ideas.md")
        assert (await rt.store.read(outbox_sql.summary)).waiting == 0


async def test_a_write_back_cancelled_while_a_note_is_busy_is_not_finished_later(vault, db_path) -> None:
    """Review 23k: the call cancelled by the client while one of the notes was being typed in left its journal
    row queued, and the next drain wrote the section into the notes a moment later (over a later call that chose
    another note). Cancelled, nothing more is written."""
    import asyncio

    from server.services import outbox
    from tests.test_typing_editor import saving_until, settled_runtime

    b = shared_sqlite(vault)
    async with settled_runtime(vault, db_path) as rt:  # the id lines written, once quiet
        insight_id = await approved_insight(rt)
        beta = vault / b.paths["Beta"]
        stop = asyncio.Event()
        person = asyncio.create_task(saving_until(beta, stop))
        await asyncio.sleep(0.5)
        call = asyncio.create_task(write_insight_to_vault(rt, insight_id))
        await asyncio.sleep(0.6)
        call.cancel()
        stop.set()
        await person
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(1.5)  # the person paused
        assert await outbox.drain(rt) == outbox.Drained(0, 0)
        assert b"engrama:insight" not in beta.read_bytes()
