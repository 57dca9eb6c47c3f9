"""A note that cannot be read as a note (its frontmatter broken mid-edit, grown past the size limit): search
finds what it says now, never what it said, and `engrama_status` names it with why, until it can be read again
(review 21a: a word the person removed while the YAML was broken still found the note, with the old text as
its snippet, and status said the graph was in step).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from server.live import live_sync
from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.settings import Settings
from server.status import build_status
from vault_sync.writer import MAX_NOTE_BYTES

GOOD = "---\ntitle: Trip plan\ntype: Project\n---\nFlight code is XJ4471.\nHotel near the river.\n"
BROKEN = (
    "---\ntitle: Trip plan: Lisbon\ntype: Project\n---\nWe take the train to Porto.\nHotel near the river.\n"
)


async def found(rt: Runtime, query: str) -> list[str]:
    return [hit.path or "" for hit in (await search(rt, query)).results]


async def not_synced(rt: Runtime) -> dict[str, str]:
    attention = (await build_status(rt))["vault"].get("attention", {})
    return {entry["path"]: entry["why"] for entry in attention.get("not_synced", [])}


async def settled(live: object, rt: Runtime, check: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        await live.wait_idle(timeout)  # type: ignore[attr-defined]
        if await check():  # type: ignore[operator]
            return
        assert time.monotonic() < deadline, "not in step in time"
        await asyncio.sleep(0.05)


async def test_a_note_whose_frontmatter_breaks_is_found_by_what_it_says_now(
    vault: Path, db_path: Path
) -> None:
    note = vault / "Trip.md"
    note.write_text(GOOD, encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt, live_sync(rt, quiet=0.05) as live:
        await settled(live, rt, lambda: _has(rt, "XJ4471", "Trip.md"))
        node_id = (await rt.store.find_nodes("Trip plan"))[0].id
        note.write_text(BROKEN.replace("---\n", f"---\nengrama_id: {node_id}\n", 1), encoding="utf-8")

        async def broken_seen() -> bool:
            return "Trip.md" in await not_synced(rt)

        await settled(live, rt, broken_seen)
        assert await found(rt, "XJ4471") == []  # removed from the note: no longer found
        assert await found(rt, "Porto train") == ["Trip.md"]  # what it says now
        why = (await not_synced(rt))["Trip.md"]
        assert "invalid YAML" in why and "line 3" in why, why
        [node] = await rt.store.find_nodes("Trip plan")  # its identity and properties as last read
        assert node.id == node_id
        note.write_text(
            BROKEN.replace("title: Trip plan: Lisbon", f'engrama_id: {node_id}\ntitle: "Trip plan: Lisbon"'),
            encoding="utf-8",
        )

        async def fixed() -> bool:
            return not await not_synced(rt) and bool(await rt.store.find_nodes("Trip plan: Lisbon"))

        await settled(live, rt, fixed)
        assert await found(rt, "Porto train") == ["Trip.md"] and await found(rt, "XJ4471") == []


async def test_a_note_grown_past_the_size_limit_is_no_longer_found_by_what_it_said(
    vault: Path, db_path: Path
) -> None:
    note = vault / "Log.md"
    note.write_text("A kumquat grows here.\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt, live_sync(rt, quiet=0.05) as live:
        await settled(live, rt, lambda: _has(rt, "kumquat", "Log.md"))
        note.write_text("x" * 79 + "\n" + ("y" * 79 + "\n") * (MAX_NOTE_BYTES // 80 + 1), encoding="utf-8")

        async def over() -> bool:
            return "Log.md" in await not_synced(rt)

        await settled(live, rt, over)
        assert await found(rt, "kumquat") == []
        assert "MiB limit" in (await not_synced(rt))["Log.md"]


async def _has(rt: Runtime, query: str, path: str) -> bool:
    return path in await found(rt, query)


async def test_a_note_put_back_as_it_was_after_being_unreadable_is_found_again(
    vault: Path, db_path: Path
) -> None:
    """Review 21e: a note saved once with a byte that is not UTF-8 and then undone to its exact bytes stayed out
    of search for good: its file state still named the bytes it was put back to, so they were "the same"."""
    note = vault / "Heron.md"
    note.write_text("A zebrafinch sings here.\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt, live_sync(rt, quiet=0.05) as live:
        await settled(live, rt, lambda: _has(rt, "zebrafinch", "Heron.md"))
        original = note.read_bytes()  # with its id line
        note.write_bytes(original + b"caf\xe9\n")

        async def unreadable() -> bool:
            return "Heron.md" in await not_synced(rt)

        await settled(live, rt, unreadable)
        assert await found(rt, "zebrafinch") == []
        note.write_bytes(original)

        async def back() -> bool:
            return not await not_synced(rt) and await _has(rt, "zebrafinch", "Heron.md")

        await settled(live, rt, back)
        assert (await rt.require_sync().sync_vault()).errors == []
        assert await found(rt, "zebrafinch") == ["Heron.md"]


def test_the_list_of_notes_not_synced_counts_only_those_still_broken() -> None:
    """Review 21e: 25 notes broken one by one, 24 then fixed: one was listed with `not_synced_total: 6`, the
    fixed ones beyond the 20 shown never taken off the count."""
    from vault_sync.attention import Attention

    record = Attention()
    for i in range(25):
        record = record.with_outcomes([(f"N{i:02d}.md", "invalid YAML")])
    status = record.as_status()
    assert len(status["not_synced"]) == 20 and status["not_synced_total"] == 25
    for i in range(24):
        record = record.with_outcomes([(f"N{i:02d}.md", None)])
    assert record.as_status() == {"not_synced": [{"path": "N24.md", "why": "invalid YAML"}]}


async def test_a_pipe_named_like_a_note_is_reported_and_stops_nothing(vault: Path, db_path: Path) -> None:
    """Review 22e: a FIFO named `pipe.md` appearing in the vault hung the running server's reader in open()
    until something wrote to it: the watcher's sync and every tool call after it waited forever."""
    from server.services.notesync import sync_vault
    from server.services.remember import remember

    (vault / "Home.md").write_text("Home.\n", encoding="utf-8")
    async with open_runtime(Settings(vault=vault, db_path=db_path)) as rt, live_sync(rt, quiet=0.05) as live:
        await live.wait_idle(30)
        os.mkfifo(vault / "pipe.md")

        async def listed() -> bool:
            return "not a regular file" in (await not_synced(rt)).get("pipe.md", "")

        await asyncio.wait_for(settled(live, rt, listed), 30)  # the watcher's event for it
        report = await asyncio.wait_for(sync_vault(rt), 30)
        assert [(e.path, "not a regular file" in e.error) for e in report.errors] == [("pipe.md", True)]
        written = await asyncio.wait_for(remember(rt, "Note", "Home", observation="Still writing."), 30)
        assert written.name == "Home" and "Still writing." in (vault / "Home.md").read_text(encoding="utf-8")


ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(
    ROOT and shutil.which("setpriv") is None, reason="root reads any file; setpriv drops that"
)
async def test_a_note_made_unreadable_stays_listed_through_a_whole_vault_sync(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Review 22e: `chmod 000` changes neither a note's size nor its time, so a whole-vault pass skipped it as
    unchanged and dropped it from `vault.attention.not_synced`, while it still could not be read. As root, the
    server runs without the capabilities that let root read any file, so the permission counts."""
    from tests.test_e2e_stdio import call, synced_session

    (vault / "Secret.md").write_text("Secret words about the zebracorn.\n", encoding="utf-8")
    (vault / "Other.md").write_text("Other words.\n", encoding="utf-8")
    wrap = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if ROOT else []
    env = {**os.environ, "ENGRAMA_SETTLE_SECONDS": "0"}
    try:
        async with synced_session(vault, db_path, tmp_path, env=env, wrap=wrap) as session:
            os.chmod(vault / "Secret.md", 0)

            async def listed() -> dict[str, str]:
                vault_status = (await call(session, "engrama_status", {}))["vault"]
                entries = vault_status.get("attention", {}).get("not_synced", [])
                return {e["path"]: e["why"] for e in entries}

            deadline = time.monotonic() + 30
            while "Secret.md" not in await listed():  # the watcher's event for the change of mode
                assert time.monotonic() < deadline, await listed()
                await asyncio.sleep(0.1)
            report = await call(session, "engrama_sync_vault", {})
            assert "permission denied" in (await listed()).get("Secret.md", ""), report
            os.chmod(vault / "Secret.md", 0o644)  # readable again: the next pass takes it off the list
            await call(session, "engrama_sync_vault", {})
            assert "Secret.md" not in await listed()
    finally:
        os.chmod(vault / "Secret.md", 0o644)
        print((tmp_path / "stderr.log").read_text(encoding="utf-8")[-3000:])


async def test_a_socket_named_like_a_note_is_said_to_be_no_file(vault: Path, db_path: Path) -> None:
    """Review 22f: a socket cannot be opened at all (ENXIO), and the raw errno was the answer."""
    import socket

    from server.services.errors import ServiceError
    from server.services.notesync import sync_note

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(vault / "Sock.md"))
        async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
            with pytest.raises(ServiceError, match="not a regular file"):
                await sync_note(rt, "Sock.md")
    finally:
        listener.close()
