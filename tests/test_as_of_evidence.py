"""`as_of` means what was known on that day (issue 12, item 8): every note starts at the best evidence of when
it began — `valid_from:`, else a `date:` / `created:` in its frontmatter, else its file's times and when
engrama first saw it — and the answer survives deleting the database and syncing again."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.services.context import context
from server.services.errors import EntityNotFound
from server.settings import Settings
from server.store.migrations import apply_migrations
from tests.test_e2e_stdio import COMMAND, call, serve_args
from vault_sync.began import file_began, frontmatter_began, id_began, lenient_moment
from vault_sync.identify import read_id

UNDATED = "Sourdough starter: feed it flour and water daily.\n"
DATED = "---\ndate: 2020-05-01\n---\nThe greenhouse tomatoes went in early, with [[Basil]] beside them.\n"
BASIL = "Basil grows well next to tomatoes.\n"


def write(vault: Path, rel: str, text: str, mtime: str | None = None) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        stamp = datetime.fromisoformat(mtime).replace(tzinfo=UTC).timestamp()
        os.utime(path, (stamp, stamp))


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as runtime:
        yield runtime


async def names(rt: Runtime, query: str, as_of: str) -> list[str]:
    return [hit.name for hit in (await search(rt, query, as_of=as_of)).results]


# --- through the real server --------------------------------------------------------------------------------


async def _answers(vault: Path, db_path: Path, log: Path) -> dict[str, Any]:
    """Start the real server on `vault`, sync, and ask the as_of questions of this issue."""
    params = StdioServerParameters(command=str(COMMAND), args=serve_args(vault, db_path))
    with open(log, "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write_),
            ClientSession(read, write_) as session,
        ):
            await session.initialize()
            synced = await call(session, "engrama_sync_vault", {})
            assert not synced["errors"], synced

            async def found(query: str, as_of: str) -> list[str]:
                result = await call(session, "engrama_search", {"query": query, "as_of": as_of})
                return sorted(hit["name"] for hit in result["results"])

            async def neighbours(as_of: str) -> list[str] | str:
                result = await session.call_tool("engrama_context", {"name": "Greenhouse", "as_of": as_of})
                if result.is_error:
                    return result.content[0].text  # type: ignore[union-attr]
                assert result.structured_content is not None
                return [n["name"] for n in result.structured_content["neighbours"]]

            return {
                "1990": await found("sourdough starter tomatoes basil", "1990-01-01"),
                "2019": await found("greenhouse tomatoes", "2019-12-31"),
                "2021": await found("greenhouse tomatoes", "2021-01-01"),
                "today": await found("sourdough starter", datetime.now(UTC).strftime("%Y-%m-%d")),
                "context 2021": await neighbours("2021-01-01"),
                "context 2019": await neighbours("2019-12-31"),
            }


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_as_of_answers_what_was_known_then_over_stdio_and_again_after_a_rebuild(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    write(vault, "Bread.md", UNDATED)
    write(vault, "Greenhouse.md", DATED)
    write(vault, "Basil.md", BASIL)
    first = await _answers(vault, db_path, tmp_path / "stderr.log")
    assert first["1990"] == []  # notes written today, with no date, were not known in 1990
    assert first["2019"] == [] and first["2021"] == ["Greenhouse"]
    assert first["today"] == ["Bread"]
    # The link came with the note, so it starts with the note; Basil itself began today.
    assert first["context 2021"] == [] and "did not hold on 2019-12-31" in first["context 2019"]
    shutil.rmtree(db_path.parent)  # the database is derived: rebuild it from the vault
    assert await _answers(vault, db_path, tmp_path / "stderr.log") == first


# --- the evidence, in order ---------------------------------------------------------------------------------


async def test_a_notes_own_valid_from_beats_its_date_and_its_file(rt: Runtime, vault: Path) -> None:
    write(
        vault,
        "Plan.md",
        "---\nvalid_from: 2022-03-01\ndate: 2020-01-01\n---\nThe rollout plan.\n",
        "2019-01-01",
    )
    await rt.require_sync().sync_vault()
    assert await names(rt, "rollout plan", "2022-02-28") == []
    assert await names(rt, "rollout plan", "2022-03-01") == ["Plan"]


@pytest.mark.parametrize(
    "key", ["date", "created", "created_at", "date created", "Date Created", "createdAt", "creation_date"]
)
async def test_the_date_keys_templates_write_date_a_note(rt: Runtime, vault: Path, key: str) -> None:
    write(vault, "Trip.md", f"---\n{key}: 2020-05-01 14:30\n---\nA trip to Lisbon.\n")
    await rt.require_sync().sync_vault()
    assert await names(rt, "Lisbon trip", "2020-04-30") == []
    assert await names(rt, "Lisbon trip", "2020-05-01") == ["Trip"]  # a date covers its whole day
    assert await names(rt, "Lisbon trip", "2020-05-01T14:00:00Z") == []
    note = await rt.store.find_nodes("Trip")
    assert next(iter(note[0].properties.values())) == "2020-05-01 14:30"  # still the person's property too


async def test_a_value_that_is_not_a_date_is_ignored(rt: Runtime, vault: Path) -> None:
    write(
        vault, "Idea.md", "---\ndate: someday\ncreated: 01/05/2020\n---\nAn idea about kites.\n", "2023-02-01"
    )
    await rt.require_sync().sync_vault()
    assert await names(rt, "kites idea", "2023-01-31") == []
    assert await names(rt, "kites idea", "2023-02-01") == ["Idea"]  # the file's time decides


async def test_an_undated_note_began_no_later_than_its_file_and_keeps_it_after_a_rebuild(
    vault: Path, db_path: Path
) -> None:
    """The id engrama writes gives the file new times; the id itself keeps the old evidence."""
    write(vault, "Old.md", "Notes on the 2018 harvest.\n", "2018-06-01T08:00:00")
    for _ in range(2):
        async with open_runtime(Settings(vault=vault, db_path=db_path, watch=False)) as rt:
            await rt.require_sync().sync_vault()
            assert await names(rt, "harvest", "2018-05-31") == []
            assert await names(rt, "harvest", "2018-06-01") == ["Old"]
            [node] = await rt.store.find_nodes("Old")
            assert node.valid_from == "2018-06-01T08:00:00Z"
        assert (vault / "Old.md").stat().st_mtime > datetime(2024, 1, 1, tzinfo=UTC).timestamp()
        shutil.rmtree(db_path.parent)
    assert id_began(read_id((vault / "Old.md").read_bytes())) == "2018-06-01T08:00:00Z"


async def test_a_date_ahead_of_the_file_counts_from_when_the_note_was_written(
    rt: Runtime, vault: Path
) -> None:
    write(vault, "Meeting.md", "---\ndate: 2031-01-10\n---\nPlanning meeting for the roof.\n", "2024-02-02")
    await rt.require_sync().sync_vault()
    assert await names(rt, "roof planning meeting", "2024-02-02") == ["Meeting"]
    assert await names(rt, "roof planning meeting", "2024-02-01") == []


async def test_an_edit_never_makes_a_note_younger(rt: Runtime, vault: Path) -> None:
    write(vault, "Garden.md", "Compost heap.\n", "2021-07-01")
    await rt.require_sync().sync_vault()
    data = (vault / "Garden.md").read_bytes()
    (vault / "Garden.md").write_bytes(data + b"Turned it today.\n")  # a new mtime: now
    await rt.require_sync().sync_path("Garden.md")
    assert await names(rt, "compost heap", "2021-07-01") == ["Garden"]


async def test_context_as_of_agrees_with_search(rt: Runtime, vault: Path) -> None:
    write(vault, "Greenhouse.md", DATED)
    write(vault, "Basil.md", "---\ncreated: 2019-04-01\n---\n" + BASIL)
    await rt.require_sync().sync_vault()
    seen = await context(rt, "Greenhouse", as_of="2021-01-01")
    assert [n.node.name for n in seen.neighbours] == ["Basil"]  # the link started with the note
    assert seen.node.valid_from == "2020-05-01"
    with pytest.raises(EntityNotFound, match="valid from 2020-05-01"):
        await context(rt, "Greenhouse", as_of="2020-04-30")
    assert await names(rt, "greenhouse", "2020-04-30") == []


async def test_a_database_from_before_this_change_gets_a_start_for_every_note(
    rt: Runtime, vault: Path
) -> None:
    """Migration 6 on an older database: what it knows (first seen, file mtime, an ISO date key) dates every
    note; stubs stay without a start."""
    write(vault, "Dated.md", "---\ncreated: 2020-05-01T10:00:00+02:00\n---\nAbout [[Nowhere]].\n")
    write(vault, "Undated.md", "Plain words.\n")
    await rt.require_sync().sync_vault()

    def downgrade(conn: Any) -> None:
        conn.execute("alter table nodes drop column began_at")
        conn.execute("update nodes set valid_from = null, created_at = '2025-02-02T00:00:00Z'")
        conn.execute(
            "update files set mtime_ns = 1700000000000000000 where path = 'Undated.md'"
        )  # 2023-11-14
        conn.execute("delete from schema_migrations where number = 6")

    await rt.store.write(downgrade)
    conn = sqlite3.connect(rt.settings.db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        assert apply_migrations(conn) == 1
        rows = {r["name"]: (r["valid_from"], r["began_at"]) for r in conn.execute("select * from nodes")}
    finally:
        conn.close()
    assert rows["Dated"] == ("2020-05-01", "2025-02-02T00:00:00Z")
    assert rows["Undated"] == ("2023-11-14T22:13:20Z", "2023-11-14T22:13:20Z")
    assert rows["Nowhere"] == (None, None)


async def test_every_note_keeps_the_day_it_is_about_and_an_older_database_gets_it(
    rt: Runtime, vault: Path
) -> None:
    """`nodes.note_day` (what a question's date window looks up) is the day `note_dates` reads, kept through
    edits and renames, and migration 13 fills it for a database written before it."""
    write(vault, "Daily/2023-05-20.md", "Groceries.\n")
    write(vault, "Trip.md", "---\ndate: 2021-07-04\n---\nFireworks.\n")
    session = "Session 3 — 1:56 pm on 8 May, 2023"
    write(vault, "Session 3.md", f"---\ntitle: {session}\n---\nTalked.\n")
    await rt.require_sync().sync_vault()

    def days(conn: Any) -> dict[str, str | None]:
        return {r["name"]: r["note_day"] for r in conn.execute("select name, note_day from nodes")}

    expected = {"2023-05-20": "2023-05-20", "Trip": "2021-07-04", session: "2023-05-08"}
    assert await rt.store.read(days) == expected
    write(vault, "Trip.md", "---\ndate: 2022-08-01\n---\nFireworks.\n")
    (vault / "Daily/2023-05-20.md").rename(vault / "Daily/2023-05-21.md")
    await rt.require_sync().sync_vault()
    moved = {"2023-05-21": "2023-05-21", "Trip": "2022-08-01", session: "2023-05-08"}
    assert await rt.store.read(days) == moved

    def downgrade(conn: Any) -> None:
        conn.execute("drop index nodes_note_day")
        conn.execute("alter table nodes drop column note_day")
        conn.execute("delete from schema_migrations where number = 13")

    await rt.store.write(downgrade)
    conn = sqlite3.connect(rt.settings.db_path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    try:
        assert apply_migrations(conn) == 1
        assert days(conn) == moved
    finally:
        conn.close()


# --- reading the evidence -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2020-05-01", "2020-05-01"),
        ("2020-05-01T10:00:00+02:00", "2020-05-01T08:00:00Z"),
        ("2020-05-01 10:30", "2020-05-01T10:30:00Z"),
        ("2020-05-01 10:30 pm", "2020-05-01T22:30:00Z"),
        ("2020-05-01T10:00:00.123Z", "2020-05-01T10:00:00Z"),
        ("2020/5/1", "2020-05-01"),
        ("2020-05-01 Friday", "2020-05-01"),
        ("Friday, May 1st 2020", "2020-05-01"),
        ("1 May 2020", "2020-05-01"),
        ("[[2020-05-01]]", "2020-05-01"),
        ([["2020-05-01"]], "2020-05-01"),  # YAML's reading of an unquoted [[2020-05-01]]
        ("[[Daily/2021-03-04|Thursday]]", "2021-03-04"),
        ("2020-05-01 25:00", "2020-05-01"),
        ("01/05/2020", None),  # January or May: not evidence
        ("2020", None),
        (2020, None),
        ("2020-02-30", None),
        ("2020-05-0123", None),
        ("someday", None),
        ("", None),
        (None, None),
        ({"a": 1}, None),
    ],
)
def test_dates_are_read_leniently(value: Any, expected: str | None) -> None:
    assert lenient_moment(value) == expected


def test_the_earliest_date_key_wins_and_other_keys_do_not_count() -> None:
    assert (
        frontmatter_began({"created": "2021-01-01", "date": "2020-06-01", "due": "2019-01-01"})
        == "2020-06-01"
    )
    assert frontmatter_began({"updated": "2019-01-01", "title": "x"}) is None


@given(
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.timezones())
)
def test_any_iso_date_time_reads_as_its_utc_moment(moment: datetime) -> None:
    try:
        utc = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return  # outside what a UTC timestamp can say
    assert lenient_moment(moment.isoformat()) == utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_placeholder_file_time_is_not_evidence(tmp_path: Path) -> None:
    path = tmp_path / "n.md"
    path.write_text("x", encoding="utf-8")
    os.utime(path, (1, 1))  # what reproducible builds stamp
    birth = getattr(path.stat(), "st_birthtime", None) or (path.stat().st_ctime if os.name == "nt" else None)
    expected = None if birth is None else datetime.fromtimestamp(birth, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert file_began(path.stat()) == expected  # the creation time where there is one; never 1970
