"""The `engrama-vault` command as a person runs it: a real console script in a child process."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli import build_parser
from server.store.migrations import MIGRATIONS

SCRIPT = str(Path(sys.executable).parent / "engrama-vault")
REPO = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict[str, str] | None = None, prefix: list[str] | None = None):
    return subprocess.run(
        [*(prefix or []), SCRIPT, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def command_names() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[attr-defined]


def test_every_command_has_help_and_is_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in command_names():
        done = run(name, "--help")
        assert done.returncode == 0 and "--vault" in done.stdout and "--db" in done.stdout, name
        assert f"engrama-vault {name}" in readme, f"README does not document `engrama-vault {name}`"


def test_ci_installs_and_tests_as_the_readme_says() -> None:
    """A fresh machine needs exactly two commands (the example run, the tests), and CI runs the second."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0].strip() for b in setup.split("```bash\n")[1:]]
    assert len(blocks) == 2 and all("\n" not in b for b in blocks), blocks
    assert "--vault examples/vault" in blocks[0]
    extras = blocks[1].split("pip install -e '.[", 1)[1].split("]'", 1)[0]
    assert "local" in extras.split(","), "the tests must install the [local] extra so its tests run"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert f"pip install --quiet -e '.[{extras}]'" in ci and "\npython -m pytest\n" in ci
    assert blocks[1].endswith("-m pytest")


def test_init_records_the_profile_and_status_json_reports_it(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    done = run(
        "init", "--vault", str(vault), "--db", str(db), "--profile", "base", "--modules", "teaching", "ai"
    )
    assert done.returncode == 0, done.stderr
    assert (vault / ".engrama" / "config.yaml").exists() and db.exists()
    status = json.loads(run("status", "--vault", str(vault), "--db", str(db), "--json").stdout)
    assert status["profile"] == {"name": "base", "modules": ["teaching", "ai"]}
    assert status["vault"]["configured"] is True and status["backend"]["db_path"] == str(db)
    assert "embedder" not in status  # absent, not null, when no embedder is configured


def test_init_with_an_unknown_module_says_which_exist(tmp_path: Path) -> None:
    done = run("init", "--vault", str(tmp_path), "--db", str(tmp_path / "g.db"), "--modules", "astrology")
    assert done.returncode == 2 and "astrology" in done.stderr and "teaching" in done.stderr


def test_sync_json_reports_and_exits_nonzero_when_a_note_failed(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(REPO / "examples" / "vault", vault)
    (vault / "Broken.md").write_text("---\nname: [oops\n---\n", encoding="utf-8")
    done = run("sync", "--vault", str(vault), "--db", str(tmp_path / "g.db"), "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["created"] == report["scanned"] - 1
    assert [e["path"] for e in report["errors"]] == ["Broken.md"]
    (vault / "Broken.md").unlink()
    again = run("sync", "--vault", str(vault), "--db", str(tmp_path / "g.db"))
    assert again.returncode == 0 and "0 failed" in again.stdout


def test_sync_without_a_vault_says_how_to_give_one(tmp_path: Path) -> None:
    done = run("sync", "--db", str(tmp_path / "g.db"), env={"ENGRAMA_VAULT": ""})
    assert done.returncode == 2 and "--vault" in done.stderr


def test_an_unreadable_note_is_reported_and_the_rest_syncs(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        prefix: list[str] = []
    else:  # root reads through chmod 000; drop the capabilities that allow it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, where chmod 000 does not block reads, and setpriv is missing")
        drop = "-dac_override,-dac_read_search"
        prefix = [setpriv, "--bounding-set", drop, "--inh-caps", drop, "--"]
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Open.md").write_text("fine\n", encoding="utf-8")
    locked = vault / "Locked.md"
    locked.write_text("private\n", encoding="utf-8")
    locked.chmod(0)
    done = run("sync", "--vault", str(vault), "--db", str(tmp_path / "g.db"), "--json", prefix=prefix)
    locked.chmod(0o644)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["created"] == 1
    [error] = report["errors"]
    assert error["path"] == "Locked.md" and "permission" in error["error"]
    assert locked.read_text(encoding="utf-8") == "private\n"


def test_sync_while_a_server_holds_the_lease_writes_no_note(tmp_path: Path) -> None:
    from vault_sync.lease import VaultLease

    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    (vault / "New.md").write_text("no id yet\n", encoding="utf-8")
    lease = VaultLease.for_database(db)
    assert lease.try_acquire()  # stands in for a running `engrama-vault serve`
    try:
        done = run("sync", "--vault", str(vault), "--db", str(db), "--json")
    finally:
        lease.release()
    assert done.returncode == 1 and "holds this vault's lease" in done.stderr
    [error] = json.loads(done.stdout)["errors"]
    assert "lease" in error["error"]
    assert (vault / "New.md").read_bytes() == b"no id yet\n"
    assert run("sync", "--vault", str(vault), "--db", str(db)).returncode == 0  # once free, it syncs


@pytest.mark.parametrize("command", ["sync", "status", "serve"])
def test_a_database_from_a_newer_version_is_refused_with_one_line_and_left_as_it_is(
    tmp_path: Path, command: str
) -> None:
    """Found by review: going back a version opened the newer file silently, then failed on tables it did not
    know (a raw traceback at the first edit, which never reached search)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A.md").write_text("# A\n", encoding="utf-8")
    db = tmp_path / "graph.db"
    assert run("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    newest = MIGRATIONS[-1][0] + 1
    with sqlite3.connect(db) as conn:
        conn.execute(
            "insert into schema_migrations values (?, 'from the future', '2027-01-01T00:00:00Z')", (newest,)
        )
    conn.close()
    notes_before = (vault / "A.md").read_bytes()
    done = run(command, "--vault", str(vault), "--db", str(db))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith(f"engrama-vault {command}:")]
    assert f"upgraded by a newer engrama-vault (schema {newest};" in line and "update engrama-vault" in line
    assert (vault / "A.md").read_bytes() == notes_before
    with sqlite3.connect(db) as conn:
        assert conn.execute("select max(number) from schema_migrations").fetchone()[0] == newest
    conn.close()


@pytest.mark.parametrize("command", ["sync", "status", "serve"])
def test_a_damaged_database_is_one_line_that_says_to_move_it_aside(tmp_path: Path, command: str) -> None:
    """Found by review: a database file that is not one (or damaged pages) ended `serve`, `status` and `sync`
    with an 88-line traceback and no word that it can simply be rebuilt from the vault."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A.md").write_text("# A\n", encoding="utf-8")
    db = tmp_path / "graph.db"
    db.write_bytes(b"this is no SQLite file; a sync client mangled it" * 200)
    done = run(command, "--vault", str(vault), "--db", str(db))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith(f"engrama-vault {command}:")]
    assert (
        "is damaged" in line and "move it aside or delete it" in line and "rebuilds it from the vault" in line
    )


# --- review 19b: the unhappy paths of a first run -------------------------------------------------------------


def test_a_database_folder_that_cannot_be_made_is_one_line_that_says_what_to_do(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "afile").write_text("not a folder\n")
    for command in ("status", "sync"):
        done = run(command, "--vault", str(vault), "--db", str(tmp_path / "afile" / "g.db"))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "cannot create the database folder" in done.stderr and "--db" in done.stderr


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    shutil.copytree(REPO / "examples" / "vault", vault)
    assert run("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    reader = subprocess.Popen(
        [SCRIPT, "reflect", "--vault", str(vault), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # `| head -0`: the reader is gone before the first line
    err = reader.stderr.read()
    assert reader.wait() == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_modules_written_by_hand_as_one_string_are_names_not_letters(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".engrama").mkdir(parents=True)
    (vault / ".engrama" / "config.yaml").write_text("profile: base\nmodules: teaching, ai\n")
    done = run("status", "--vault", str(vault), "--db", str(tmp_path / "g.db"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["profile"]["modules"] == ["teaching", "ai"]
    # a blank ENGRAMA_MODULES (a placeholder in a client's config) is as if unset (review 19d)
    blank = run(
        "status", "--vault", str(vault), "--db", str(tmp_path / "g.db"), "--json", env={"ENGRAMA_MODULES": ""}
    )
    assert json.loads(blank.stdout)["profile"]["modules"] == ["teaching", "ai"]


def test_settings_given_through_the_environment_are_used_or_refused_with_the_right_words(
    tmp_path: Path,
) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    (vault / "Note.md").write_text("A note.\n")
    said = run("sync", "--vault", str(vault), "--db", str(db), env={"ENGRAMA_LOG_LEVEL": "info"})
    assert said.returncode == 0 and " INFO " in said.stderr, said.stderr
    bad = run("sync", "--vault", str(vault), "--db", str(db), env={"ENGRAMA_LOG_LEVEL": "verbose"})
    assert bad.returncode == 2 and "the log level must be one of" in bad.stderr
    watch = run("status", "--vault", str(vault), "--db", str(db), env={"ENGRAMA_WATCH": "disable"})
    assert watch.returncode == 2 and "ENGRAMA_WATCH must be 1 or 0" in watch.stderr, watch.stderr
    afile = run("status", "--vault", str(vault / "Note.md"), "--db", str(db))
    assert afile.returncode == 2 and "is a file, not a folder" in afile.stderr, afile.stderr


def test_search_on_new_notes_says_they_wait_for_a_sync_not_that_they_could_not_be_read(
    tmp_path: Path,
) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    (vault / "Kite.md").write_text("A kite in the wind.\n")
    done = run("search", "--vault", str(vault), "--db", str(db), "kite")
    assert "could not be read" not in done.stderr, done.stderr
    assert "1 new note(s) are not searchable yet: `engrama-vault sync`" in done.stderr, done.stderr


def test_status_on_a_terminal_says_whether_the_vault_is_in_step_and_which_notes_are_not_synced(
    tmp_path: Path,
) -> None:
    """Review 22h: the plain status said "(1 notes synced)" and nothing of pending changes or of a note that
    cannot be synced; only --json did."""
    vault, db = tmp_path / "vault", tmp_path / "graph.db"
    vault.mkdir()
    (vault / "Good.md").write_text("Fine.\n", encoding="utf-8")
    (vault / "Broken.md").write_text("---\ntitle: Trip: Lisbon\n---\nText.\n", encoding="utf-8")
    synced = run("sync", "--vault", str(vault), "--db", str(db))
    assert synced.returncode == 1  # Broken.md failed
    shown = run("status", "--vault", str(vault), "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "sync:     not watching (no server holds the vault), 0 change(s) pending" in shown.stdout, (
        shown.stdout
    )
    assert "not synced: Broken.md: " in shown.stdout and "YAML" in shown.stdout, shown.stdout


def test_a_db_path_that_is_not_engramas_database_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """Review 23i: another program's SQLite file given as --db was switched to WAL and given engrama's 30-odd
    tables; a note given by mistake was called damaged, with the advice to delete it; a folder was reported as
    a permissions problem. Each is refused, changing nothing, with what to do."""
    vault = tmp_path / "vault"
    shutil.copytree(REPO / "examples" / "vault", vault)
    contacts = tmp_path / "contacts.db"
    with sqlite3.connect(contacts) as conn:
        conn.execute("create table people (name text)")
        conn.execute("insert into people values ('Ann')")
    conn.close()
    rails = tmp_path / "development.sqlite3"  # another tool's schema_migrations table (review 23j)
    with sqlite3.connect(rails) as conn:
        conn.execute("create table schema_migrations (version varchar primary key)")
        conn.execute("create table users (id integer primary key)")
    conn.close()
    note = next(vault.rglob("*.md"))
    before = {contacts: contacts.read_bytes(), note: note.read_bytes(), rails: rails.read_bytes()}
    for db, expected in (
        (contacts, "another program's database (its tables: people)"),
        (rails, "another program's database (its tables: schema_migrations, users)"),
        (note, "is a .md file, not a database"),
        (tmp_path, "is a folder, not a database file"),
    ):
        done = run("sync", "--vault", str(vault), "--db", str(db))
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and "nothing was changed" in done.stderr or db == tmp_path, done.stderr
        assert "delete" not in done.stderr
    assert {path: path.read_bytes() for path in before} == before
    assert not Path(f"{contacts}-wal").exists() and not Path(f"{contacts}.lease").exists()
    assert not Path(f"{rails}-wal").exists()


def test_reflect_with_a_mistyped_pattern_writes_nothing(tmp_path: Path) -> None:
    """Review 23i: `reflect --pattern shared_tech` synced the vault first (writing an id line into every note)
    and only then said the pattern is unknown, exiting 2 as if nothing had happened."""
    vault = tmp_path / "vault"
    (vault / "Projects").mkdir(parents=True)
    for name in ("Alpha", "Beta"):
        (vault / f"Projects/{name}.md").write_text("---\ntype: Project\n---\nUses [[SQLite]].\n", "utf-8")
    before = {p: p.read_bytes() for p in vault.rglob("*.md")}
    done = run("reflect", "--vault", str(vault), "--db", str(tmp_path / "g.db"), "--pattern", "shared_tech")
    assert done.returncode == 2 and "unknown pattern 'shared_tech'" in done.stderr
    assert {p: p.read_bytes() for p in vault.rglob("*.md")} == before


def test_sync_says_which_notes_were_still_being_edited_and_have_no_id_line_yet(tmp_path: Path) -> None:
    """Review 23i: a note the person kept editing through the whole sync got no id line (the sync waits for
    quiet, then gives up), and the summary said nothing of it: only --json listed it."""
    import threading
    import time

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Quiet.md").write_text("A note left alone.\n", encoding="utf-8")
    typing = vault / "Typing.md"
    typing.write_text("Being typed.\n", encoding="utf-8")
    stop = threading.Event()

    def type_on() -> None:
        while not stop.is_set():
            with open(typing, "a", encoding="utf-8") as editor:
                editor.write("more ")
            time.sleep(0.3)

    person = threading.Thread(target=type_on)
    person.start()
    try:
        done = run(
            "sync", "--vault", str(vault), "--db", str(tmp_path / "g.db"), env={"ENGRAMA_SETTLE_SECONDS": "1"}
        )
    finally:
        stop.set()
        person.join()
    assert done.returncode == 0, done.stderr
    assert "id line not written yet: 1 note(s) were still being edited (Typing.md)" in done.stdout, (
        done.stdout
    )
    assert "engrama_id" not in typing.read_text(encoding="utf-8")


def test_init_refuses_a_folder_that_holds_a_vault_and_writes_nothing_there(tmp_path: Path) -> None:
    """Review 23i: `init --vault Documents` (one folder above the vault) wrote Documents/.engrama/config.yaml and
    said to run sync next, which then refused the folder as holding a vault rather than being one."""
    documents = tmp_path / "Documents"
    (documents / "MyVault" / ".obsidian").mkdir(parents=True)
    (documents / "MyVault" / "Note.md").write_text("A note.\n", encoding="utf-8")
    done = run("init", "--vault", str(documents), "--db", str(tmp_path / "g.db"))
    assert done.returncode == 2 and "MyVault" in done.stderr, done.stderr
    assert not (documents / ".engrama").exists()
    ok = run("init", "--vault", str(documents / "MyVault"), "--db", str(tmp_path / "g.db"))
    assert ok.returncode == 0 and (documents / "MyVault" / ".engrama" / "config.yaml").exists(), ok.stderr


def test_a_dry_run_after_folders_were_renamed_previews_moves_not_archives(tmp_path: Path) -> None:
    """Review 23i: after folders were renamed, `sync --dry-run` counted every moved note as archived, or said
    the archive was held back (exit 1, advising --confirm-archive), while the real sync moved them all."""
    vault = tmp_path / "vault"
    for folder in ("Projects", "Concepts"):
        (vault / folder).mkdir(parents=True)
        for i in range(20):
            (vault / folder / f"{folder} {i}.md").write_text(f"Note {i} of {folder}.\n", encoding="utf-8")
    db = str(tmp_path / "g.db")
    assert run("sync", "--vault", str(vault), "--db", db).returncode == 0
    (vault / "Projects").rename(vault / "Work")
    (vault / "Concepts").rename(vault / "Ideas")
    preview = run("sync", "--vault", str(vault), "--db", db, "--dry-run", "--json")
    assert preview.returncode == 0, preview.stdout
    report = json.loads(preview.stdout)
    assert (report["archived"], report["moved"], report["archive_held_back"]) == (0, 40, 0)
    real = json.loads(run("sync", "--vault", str(vault), "--db", db, "--json").stdout)
    assert (real["archived"], real["moved"]) == (report["archived"], report["moved"])
