"""Issue 12 items 2 and 3 as a person meets them: the installed `engrama-vault serve` over real stdio, its
watcher running, and a tool called the moment after the person moves, renames or trashes a note, or after
`engrama_forget`. Each ends with one note and one entity per name, also after rebuilding the database.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from server.store import GraphStore
from tests.test_e2e_stdio import COMMAND, call, serve_args
from tests.test_live_processes import eventually, note_ids

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


@asynccontextmanager
async def served(vault: Path, db: Path, log: Path) -> AsyncIterator[ClientSession]:
    """A real server over stdio, once its start-up catch-up is done and its watcher runs."""
    params = StdioServerParameters(command=str(COMMAND), args=serve_args(vault, db), env=dict(os.environ))
    with open(log, "a", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await eventually(lambda: quiet(session))
            yield session


async def quiet(session: ClientSession) -> bool:
    vault = (await call(session, "engrama_status", {}))["vault"]
    return bool(vault["watching"]) and vault["pending"] == 0


async def settled(session: ClientSession) -> None:
    """Let the watcher reconcile what it saw, then reconcile the whole vault once more."""
    await eventually(lambda: quiet(session))
    assert not (await call(session, "engrama_sync_vault", {}))["errors"]


async def entities(db: Path, name: str) -> list[tuple[str, str, str]]:
    store = await GraphStore.open(db)
    try:
        nodes = await store.find_nodes(name, include_archived=True)
        return [(n.label, n.id, n.status) for n in nodes if n.name == name]
    finally:
        await store.close()


def rebuild(vault: Path, db: Path) -> None:
    """Delete the database and build it again from the vault with the real `engrama-vault sync`."""
    for side in ("", "-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    done = subprocess.run(
        [str(COMMAND), "sync", "--vault", str(vault), "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not json.loads(done.stdout)["errors"]


def move(vault: Path, old: str, new: str) -> None:
    (vault / new).parent.mkdir(parents=True, exist_ok=True)
    os.rename(vault / old, vault / new)


def restore_as_a_person_would(vault: Path, name: str, folder: str) -> None:
    """Move a note out of `.trash/` into `folder`, as `Name 1.md` when its name is taken there."""
    stem = name[:-3]
    free = next(
        candidate
        for candidate in [name, *(f"{stem} {n}.md" for n in range(1, 100))]
        if not (vault / folder / candidate).exists()
    )
    move(vault, f".trash/{name}", f"{folder}/{free}")


async def test_move_then_remember_at_once_writes_into_the_moved_note(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    async with served(vault, db_path, tmp_path / "server.log") as session:
        made = await call(session, "engrama_remember", {"label": "Concept", "name": "Topic"})
        move(vault, "Concepts/Topic.md", "Archive/Topic.md")
        done = await call(
            session, "engrama_remember", {"label": "Concept", "name": "Topic", "observation": "Seen again."}
        )
        assert (done["id"], done["path"]) == (made["id"], "Archive/Topic.md")
        await settled(session)
    assert note_ids(vault) == {"Archive/Topic.md": [made["id"]]}  # no new file in Concepts/
    assert "Seen again." in (vault / "Archive/Topic.md").read_text(encoding="utf-8")
    assert await entities(db_path, "Topic") == [("Concept", made["id"], "active")]
    rebuild(vault, db_path)
    assert await entities(db_path, "Topic") == [("Concept", made["id"], "active")]


async def test_trash_then_remember_leaves_one_entity_before_and_after_a_rebuild(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    async with served(vault, db_path, tmp_path / "server.log") as session:
        made = await call(session, "engrama_remember", {"label": "Concept", "name": "Topic"})
        move(vault, "Concepts/Topic.md", ".trash/Topic.md")
        done = await call(
            session, "engrama_remember", {"label": "Concept", "name": "Topic", "observation": "Still useful."}
        )
        assert (done["id"], done["path"]) == (made["id"], "Concepts/Topic.md")
        for trashed in sorted((vault / ".trash").glob("*.md")):  # nothing left to restore, but if there were
            restore_as_a_person_would(vault, trashed.name, "Concepts")
        await settled(session)
    assert await entities(db_path, "Topic") == [("Concept", made["id"], "active")]
    assert note_ids(vault) == {"Concepts/Topic.md": [made["id"]]}
    assert "trash" in done["message"]
    rebuild(vault, db_path)
    assert await entities(db_path, "Topic") == [("Concept", made["id"], "active")]


async def test_rename_then_relate_and_forget_then_relate_keep_one_entity(
    vault: Path, db_path: Path, tmp_path: Path
) -> None:
    async with served(vault, db_path, tmp_path / "server.log") as session:
        made = await call(session, "engrama_remember", {"label": "Concept", "name": "Topic"})
        move(vault, "Concepts/Topic.md", "Concepts/Subject.md")
        renamed = await call(
            session,
            "engrama_relate",
            {"source": "Topic", "rel_type": "RELATED_TO", "target": "Other", "target_label": "Concept"},
        )
        assert (renamed["edge"]["source_id"], renamed["note_path"]) == (made["id"], "Concepts/Subject.md")

        await call(session, "engrama_forget", {"name": "Topic"})
        source_end = await call(
            session,
            "engrama_relate",
            {"source": "Topic", "rel_type": "RELATED_TO", "target": "Third", "source_label": "Concept"},
        )
        assert (source_end["edge"]["source_id"], source_end["revived"]) == (made["id"], ["Topic"])

        await call(session, "engrama_forget", {"name": "Topic"})
        target_end = await call(
            session, "engrama_relate", {"source": "Other", "rel_type": "RELATED_TO", "target": "Topic"}
        )
        assert (target_end["edge"]["target_id"], target_end["revived"]) == (made["id"], ["Topic"])

        later = await call(
            session, "engrama_remember", {"label": "Concept", "name": "Topic", "observation": "Back in use."}
        )
        assert (later["id"], later["created"], later["path"]) == (made["id"], False, "Concepts/Subject.md")
        await settled(session)
    ids = note_ids(vault)
    assert ids["Concepts/Subject.md"] == [made["id"]] and "Concepts/Topic.md" not in ids
    note = (vault / "Concepts/Subject.md").read_text(encoding="utf-8")
    assert "Back in use." in note and "status: archived" not in note
    assert await entities(db_path, "Topic") == [("Concept", made["id"], "active")]
    rebuild(vault, db_path)
    assert await entities(db_path, "Topic") == [("Concept", made["id"], "active")]
