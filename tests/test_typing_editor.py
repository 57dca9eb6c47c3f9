"""A tool's write never lands between two saves of an editor the person is typing in (review 22a).

An editor with the note open keeps its own copy of the text and saves it in place every second or two while the
person types (Obsidian saves about every 2 s). A write engrama makes between two such saves is wiped by the next
one, and the assistant was told it was saved. The watcher reads every save within a fraction of a second, so
"the note is as the graph last read it" said nothing about whether the person had stopped: tool writes and the
writes queued by a second client went in between saves. The rule is the README's: a note is written only once
it has been quiet for the settle window; a tool call waits for the pause, or says the note is being edited and
writes nothing. Real servers over stdio, their real watchers, a real vault.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client.session import ClientSession

from server.runtime import Runtime, open_runtime
from server.settings import Settings
from tests.test_e2e_stdio import COMMAND, call, synced_session
from tests.test_live import eventually
from tests.test_outbox import ATLAS, Holder, follower, started, text

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")

SETTLE = "1"  # the settle window the servers run with (production: 3 s); a tool waits it + 2 s at most


@contextlib.asynccontextmanager
async def atlas_served(
    vault: Path, db_path: Path, tmp_path: Path
) -> AsyncIterator[tuple[ClientSession, Path]]:
    """A real server (settle window SETTLE) over a vault holding Projects/Atlas.md, once Atlas has its id."""
    (vault / "Projects").mkdir()
    atlas = vault / "Projects/Atlas.md"
    atlas.write_text(ATLAS, encoding="utf-8")
    env = {**os.environ, "ENGRAMA_SETTLE_SECONDS": SETTLE}
    async with synced_session(vault, db_path, tmp_path, env=env) as session:
        await eventually(lambda: "engrama_id:" in atlas.read_text(encoding="utf-8"), 20, "Atlas's id line")
        yield session, atlas


async def keep_saving(note: Path, seconds: float, every: float = 0.4) -> str:
    """An editor saving its own copy of `note` in place every `every` seconds for `seconds`, one word more each
    time, never reading the file again (its buffer is what it saves). Returns the last text it saved."""
    typed = note.read_text(encoding="utf-8")
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    word = 0
    while loop.time() < until:
        typed += f"typed{word} "
        word += 1
        with open(note, "r+", encoding="utf-8") as editor:  # in place: truncate, then write
            editor.truncate(0)
            editor.write(typed)
        await asyncio.sleep(every)
    return typed


@contextlib.asynccontextmanager
async def settled_runtime(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    """A runtime on `vault` with a real settle window (1 s, no watcher), once its notes have their id lines
    (written when they have been quiet for that window)."""
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False, settle=1.0)) as rt:
        await rt.require_sync().sync_vault()
        await asyncio.sleep(1.1)
        await rt.require_sync().sync_vault()
        yield rt


async def saving_until(note: Path, stop: asyncio.Event, every: float = 0.3) -> None:
    """An editor saving its buffer of `note` in place, by path, every `every` seconds, one word more each time,
    until `stop` is set."""
    typed = note.read_bytes()
    while not stop.is_set():
        typed += b"more "
        with open(note, "r+b") as editor:
            editor.truncate(0)
            editor.write(typed)
        await asyncio.sleep(every)


async def made_again_in_step(
    session: ClientSession, atlas: Path, told: str, query: str, timeout: float = 20
) -> None:
    """Wait until Atlas holds both the sentence the person typed and the tool's `told` text, and a search for
    `query` finds Atlas first (the graph in step with the note)."""

    def both() -> bool:
        text = atlas.read_text(encoding="utf-8")
        return "A sentence typed, not saved yet." in text and told in text

    await eventually(both, timeout, "the write made again on top of the person's text")

    async def found() -> bool:
        hits = await call(session, "engrama_search", {"query": query})
        return [r["name"] for r in hits["results"]][:1] == ["Atlas"]

    await eventually(found, 20, "the graph in step with the note")


@contextlib.asynccontextmanager
async def held_and_followed(
    vault: Path, db_path: Path, tmp_path: Path
) -> AsyncIterator[tuple[Holder, ClientSession, Path]]:
    """A lease holder (`engrama-vault serve`, its stdin kept open) over a vault holding Projects/Atlas.md, once
    Atlas has its id, and a second server driven over stdio by a real client: (holder, its session, Atlas).
    Each server's log is printed at the end."""
    (vault / "Projects").mkdir()
    atlas = vault / "Projects/Atlas.md"
    atlas.write_text(ATLAS, encoding="utf-8")
    holder = Holder(vault, db_path, tmp_path / "holder.log")
    try:
        await started(holder, vault)
        async with follower(vault, db_path, tmp_path / "follower.log") as session:
            yield holder, session, atlas
    finally:
        if holder.proc.poll() is None:
            holder.stop()
        print(f"--- holder.log\n{holder.log.read_text(encoding='utf-8')}")
        print(f"--- follower.log\n{(tmp_path / 'follower.log').read_text(encoding='utf-8')}")


async def test_a_tool_call_into_a_note_being_typed_writes_nothing_and_says_so(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    async with atlas_served(vault, db_path, tmp_path) as (session, atlas):
        typing = asyncio.create_task(keep_saving(atlas, seconds=6))
        await asyncio.sleep(1.0)
        result = await session.call_tool(
            "engrama_remember",
            {"label": "Project", "name": "Atlas", "observation": "Told while the person typed."},
        )
        last = await typing
        await asyncio.sleep(float(SETTLE) + 1)
        assert atlas.read_text(encoding="utf-8") == last  # every word the person typed, nothing wiped
        assert result.is_error, result.content  # never "updated the note" for a write the next save wiped
        assert "being edited right now" in result.content[0].text  # type: ignore[union-attr]
        # Once the person has paused, the same call lands, beside everything they typed.
        done = await call(
            session,
            "engrama_remember",
            {"label": "Project", "name": "Atlas", "observation": "Told after the pause."},
        )
        assert done["name"] == "Atlas"
        after = atlas.read_text(encoding="utf-8")
        assert "Told after the pause." in after and last.rstrip().rsplit(" ", 1)[-1] in after


async def test_a_queued_write_waits_until_the_person_stops_typing(
    vault: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second client's write is queued for the lease holder, which wrote it between two saves: the next save
    wiped it and the row was gone. It now waits for the pause, then lands beside what was typed."""
    monkeypatch.setenv("ENGRAMA_SETTLE_SECONDS", SETTLE)  # the holder and the follower inherit it
    async with held_and_followed(vault, db_path, tmp_path) as (holder, session, atlas):
        typing = asyncio.create_task(keep_saving(atlas, seconds=6))
        await asyncio.sleep(1.0)
        queued = await call(
            session,
            "engrama_remember",
            {"label": "Project", "name": "Atlas", "observation": "Queued while the person typed."},
        )
        assert "queued" in queued["message"]
        last = await typing
        await eventually(lambda: "Queued while the person typed." in text(vault, "Projects/Atlas.md"), 30)
        await eventually(lambda: _drained(session), 20, "the queue drained")
        holder.stop()
    final = atlas.read_text(encoding="utf-8")
    assert final.startswith(last.split("---\n", 2)[0])  # the note as typed, the id line kept
    assert all(f"typed{i} " in final for i in range(last.count("typed")))  # no word lost


async def _drained(session: ClientSession) -> bool:
    return (await call(session, "engrama_status", {}))["vault"]["outbox"]["waiting"] == 0


async def test_a_write_an_editor_saves_its_older_copy_over_is_made_again_on_top(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    """Review 22g: the person typed a moment before the tool's write, and the editor had not saved yet (Obsidian
    saves ~2 s after a keystroke): the note on disk was quiet, the write landed and was reported, and the
    editor's save of its buffer (which never held the write) wiped it. A save of the note that lacks a tool's
    change made a moment ago has the change made again, on top of what the person typed."""
    async with atlas_served(vault, db_path, tmp_path) as (session, atlas):
        await asyncio.sleep(float(SETTLE) + 0.5)  # the note has been left alone
        buffer = atlas.read_text(encoding="utf-8") + "A sentence typed, not saved yet.\n"  # the editor's
        done = await call(
            session,
            "engrama_remember",
            {"label": "Project", "name": "Atlas", "observation": "Told between a keystroke and its save."},
        )
        assert done["name"] == "Atlas" and "Told between" in atlas.read_text(encoding="utf-8")
        await asyncio.sleep(0.5)
        with open(atlas, "r+", encoding="utf-8") as editor:  # the autosave of the older buffer, in place
            editor.truncate(0)
            editor.write(buffer)

        await made_again_in_step(session, atlas, "Told between a keystroke", "keystroke")
    final = atlas.read_text(encoding="utf-8")
    assert final.count("Told between a keystroke and its save.") == 1 and final.count("engrama_id:") == 1
