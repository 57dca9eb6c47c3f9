"""The folder given as the vault is taken in only when it is the vault meant, and a database keeps one vault's
graph (session 20).

`--vault` pointed one folder too high (the folder holding several vaults, the Documents or home folder above one)
wrote an id line into every Markdown file below it: the notes of the vaults inside, a code project's README, a
shopping list. A folder that is no Obsidian vault (no `.obsidian`) but holds one is refused, with what to do, by
every process before it syncs or writes anything, unless the graph already holds notes of that folder (a person
who chose to keep the whole folder as one graph keeps it). A plain folder of Markdown holding no vault is synced
as before (the example vault is one).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from server.runtime import open_runtime
from server.settings import Settings
from tests.test_cli import SCRIPT, run
from tests.test_e2e_stdio import COMMAND, call
from tests.test_identity_stdio import served
from vault_sync.errors import VaultError

VAULT = "Work vault"
ATLAS = "# Atlas\nthe launch plan for the spring\n"


def files(root: Path) -> dict[str, bytes]:
    """Every file below `root`, dot-folders included, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    """A Documents folder holding an Obsidian vault, a code project and a loose note."""
    top = tmp_path / "Documents"
    (top / VAULT / ".obsidian").mkdir(parents=True)
    (top / VAULT / ".obsidian" / "app.json").write_text("{}\n", encoding="utf-8")
    (top / VAULT / "Projects").mkdir()
    (top / VAULT / "Projects" / "Atlas.md").write_text(ATLAS, encoding="utf-8")
    (top / "code" / "tool").mkdir(parents=True)
    (top / "code" / "tool" / "README.md").write_text("# tool\nusage: tool --help\n", encoding="utf-8")
    (top / "Shopping.md").write_text("eggs\nflour\n", encoding="utf-8")
    return top


def test_a_folder_above_a_vault_is_refused_and_nothing_in_it_is_written(
    documents: Path, tmp_path: Path
) -> None:
    before = files(documents)
    db = tmp_path / "data" / "graph.db"
    for dry in ([], ["--dry-run"]):
        done = run("sync", "--vault", str(documents), "--db", str(db), *dry)
        assert done.returncode != 0, done
        assert "is not an Obsidian vault" in done.stderr and str(documents / VAULT) in done.stderr
        assert "Point --vault" in done.stderr and "Traceback" not in done.stderr
    assert files(documents) == before
    # Pointed at the vault, it syncs (and only the vault's notes get their line).
    done = run("sync", "--vault", str(documents / VAULT), "--db", str(tmp_path / "vault.db"))
    assert done.returncode == 0, done.stderr
    after = files(documents)
    assert "engrama_id: " in after[f"{VAULT}/Projects/Atlas.md"].decode()
    assert {k: v for k, v in after.items() if k != f"{VAULT}/Projects/Atlas.md"} == {
        k: v for k, v in before.items() if k != f"{VAULT}/Projects/Atlas.md"
    }


async def test_a_vault_holding_a_vault_and_a_folder_taken_in_before_are_synced_as_before(
    documents: Path, tmp_path: Path
) -> None:
    # The folder is a vault itself (its settings folder a symlink to shared ones): Obsidian shows the inner
    # vault's notes as its own, and so does engrama.
    shared = tmp_path / "settings"
    shared.mkdir()
    (documents / ".obsidian").symlink_to(shared, target_is_directory=True)
    async with open_runtime(Settings(vault=documents, db_path=tmp_path / "a.db")) as rt:
        report = await rt.require_sync().sync_vault()
        assert report.created == 3 and not report.errors
    # A plain folder synced before its subfolder was opened in Obsidian: the graph holds the folder's notes,
    # which the person chose to keep in this graph; it stays in step.
    (documents / ".obsidian").unlink()
    (documents / VAULT / ".obsidian" / "app.json").unlink()
    (documents / VAULT / ".obsidian").rmdir()
    async with open_runtime(Settings(vault=documents, db_path=tmp_path / "b.db")) as rt:
        assert (await rt.require_sync().sync_vault()).created == 3
    (documents / VAULT / ".obsidian").mkdir()
    async with open_runtime(Settings(vault=documents, db_path=tmp_path / "b.db")) as rt:
        (documents / VAULT / "Projects" / "Atlas.md").write_text(ATLAS + "moved to May\n", encoding="utf-8")
        report = await rt.require_sync().sync_vault()
        assert report.updated == 1 and not report.errors


async def test_no_process_opens_a_folder_above_a_vault_and_nothing_is_written(
    documents: Path, tmp_path: Path
) -> None:
    """Decided before anything syncs or writes, in every process (a server, a second client's follower, a
    command): review 20a found a tool call racing a first pass, and a follower queueing a note, when the
    refusal came from the pass. Settings reached through a symlink count, as Obsidian follows it."""
    before = files(documents)
    for db in ("c.db", "c.db", "d.db"):
        with pytest.raises(VaultError, match="is not an Obsidian vault"):
            async with open_runtime(Settings(vault=documents, db_path=tmp_path / db)):
                pass
    (documents / VAULT / ".obsidian" / "app.json").unlink()
    (documents / VAULT / ".obsidian").rmdir()
    (documents / VAULT / ".obsidian").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(VaultError, match=f"holds one: {documents / VAULT}"):
        async with open_runtime(Settings(vault=documents, db_path=tmp_path / "e.db")):
            pass
    (documents / VAULT / ".obsidian").unlink()
    assert files(documents) == {k: v for k, v in before.items() if not k.startswith(f"{VAULT}/.obsidian")}


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
def test_a_server_on_a_folder_above_a_vault_does_not_start_and_says_why(
    documents: Path, tmp_path: Path
) -> None:
    before = files(documents)
    started = subprocess.run(
        [
            SCRIPT,
            "serve",
            "--vault",
            str(documents),
            "--db",
            str(tmp_path / "f.db"),
            "--embedding-provider",
            "none",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2 and "Traceback" not in started.stderr, started
    assert "is not an Obsidian vault" in started.stderr and "Point --vault" in started.stderr
    assert files(documents) == before


# --- a database keeps one vault's graph -------------------------------------------------------------------------


def two_vaults(tmp_path: Path) -> tuple[Path, Path]:
    work, personal = tmp_path / "Work", tmp_path / "Personal"
    work.mkdir()
    personal.mkdir()
    (work / "Budget.md").write_text("# Budget\nthe quarterly budget\n", encoding="utf-8")
    (personal / "Diary.md").write_text("# Diary\nmy private diary\n", encoding="utf-8")
    return work, personal


def test_a_database_of_one_vault_is_refused_for_another_and_follows_a_moved_vault(tmp_path: Path) -> None:
    work, personal = two_vaults(tmp_path)
    db = tmp_path / "one.db"
    assert run("sync", "--vault", str(work), "--db", str(db)).returncode == 0
    before = files(personal)
    done = run("sync", "--vault", str(personal), "--db", str(db))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done
    assert f"keeps the graph of the vault {work}, not of {personal}" in done.stderr and "--db" in done.stderr
    assert files(personal) == before
    # The vault moved (its folder renamed): the database follows it, and no note is new to it.
    moved = tmp_path / "Work 2026"
    work.rename(moved)
    done = run("sync", "--vault", str(moved), "--db", str(db))
    assert done.returncode == 0 and "1 unchanged" in done.stdout and "0 created" in done.stdout, done
    assert "does: it moved" in done.stderr
    assert run("sync", "--vault", str(personal), "--db", str(db)).returncode == 2


def test_a_refused_start_ties_the_database_to_no_folder(documents: Path, tmp_path: Path) -> None:
    """Review 20d: the database recorded the folder above the vault before the folder was refused, so doing
    what the message said (pointing --vault at the vault inside) was refused too."""
    db = tmp_path / "one.db"
    assert run("sync", "--vault", str(documents), "--db", str(db)).returncode == 2
    done = run("sync", "--vault", str(documents / VAULT), "--db", str(db))
    assert done.returncode == 0, done.stderr


def test_a_database_whose_vault_is_unplugged_is_not_taken_over_by_another_vault(tmp_path: Path) -> None:
    """Review 20d: a vault on a drive that was not plugged in counted as moved, so another vault given the same
    database took its graph over (archiving its notes), and the first was refused once plugged in again."""
    work, personal = two_vaults(tmp_path)
    db = tmp_path / "one.db"
    assert run("sync", "--vault", str(work), "--db", str(db)).returncode == 0
    work.rename(tmp_path / "drive")  # unplugged
    done = run("sync", "--vault", str(personal), "--db", str(db))
    assert done.returncode == 2 and "not there now" in done.stderr, done
    assert "engrama_id" not in (personal / "Diary.md").read_text(encoding="utf-8")
    (tmp_path / "drive").rename(work)  # plugged in again
    done = run("sync", "--vault", str(work), "--db", str(db))
    assert done.returncode == 0 and "1 unchanged" in done.stdout and "0 archived" in done.stdout, done


def test_a_vault_restored_to_another_folder_keeps_its_database_when_the_old_one_is_left_empty(
    tmp_path: Path,
) -> None:
    """Review 20e: a vault restored to a new path was refused while its old folder still existed, even empty,
    and told to take a new database (losing the graph's history and insights)."""
    work, _ = two_vaults(tmp_path)
    db = tmp_path / "one.db"
    assert run("sync", "--vault", str(work), "--db", str(db)).returncode == 0
    restored = tmp_path / "Restored"
    shutil.copytree(work, restored)
    done = run("sync", "--vault", str(restored), "--db", str(db))
    assert done.returncode == 2, done  # both hold its notes: which is the vault is not for engrama to guess
    for note in work.iterdir():
        note.unlink()
    done = run("sync", "--vault", str(restored), "--db", str(db))
    assert done.returncode == 0 and "1 unchanged" in done.stdout, done


def test_two_vaults_claiming_a_new_database_at_once_get_it_for_one_of_them_only(tmp_path: Path) -> None:
    """Review 20e: two syncs of two vaults started together on a new database could both pass, the database
    then naming one vault while holding the other's notes."""
    work, personal = two_vaults(tmp_path)
    db = tmp_path / "one.db"
    started = [
        subprocess.Popen(
            [SCRIPT, "sync", "--vault", str(v), "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for v in (work, personal)
    ]
    codes = sorted(p.wait(timeout=60) for p in started)
    assert codes == [0, 2], codes
    vaults = [v for v in (work, personal) if run("sync", "--vault", str(v), "--db", str(db)).returncode == 0]
    assert len(vaults) == 1
    assert "engrama_id" not in ({work, personal} - set(vaults)).pop().joinpath(
        "Budget.md" if vaults[0] == personal else "Diary.md"
    ).read_text(encoding="utf-8")


@pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")
async def test_a_second_server_for_another_vault_on_the_same_database_does_not_start(tmp_path: Path) -> None:
    """Two MCP servers configured with one --db for two vaults: the second followed the first's lease, served
    the first vault's notes, and what the assistant remembered through it was written into the first vault."""
    work, personal = two_vaults(tmp_path)
    db = tmp_path / "one.db"
    async with served(work, db, tmp_path / "work.log") as session:
        second = subprocess.run(
            [SCRIPT, "serve", "--vault", str(personal), "--db", str(db), "--embedding-provider", "none"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2 and f"keeps the graph of the vault {work}" in second.stderr, second
        remembered = await call(session, "engrama_remember", {"label": "Person", "name": "Ana"})
        assert remembered["path"] == "People/Ana.md"
    assert sorted(files(personal)) == ["Diary.md"]
    assert (work / "People" / "Ana.md").exists()


async def test_a_database_inside_the_vault_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    work, _ = two_vaults(tmp_path)
    async with open_runtime(Settings(vault=work, db_path=work / ".engrama" / "graph.db")) as rt:
        assert (await rt.require_sync().sync_vault()).created == 1
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("is inside the vault" in m and "leave out --db" in m for m in warned), warned
    caplog.clear()
    async with open_runtime(Settings(vault=work, db_path=tmp_path / "outside.db")):
        pass
    assert not [r for r in caplog.records if "inside the vault" in r.getMessage()]
