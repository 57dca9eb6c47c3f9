"""`engrama-vault reflect` on a real vault and database file."""

from __future__ import annotations

import json

from test_reflect_support import VaultBuilder

from server.cli import main


def test_reflect_command_prints_pending_insights_as_json(vault, db_path, capsys) -> None:
    b = VaultBuilder(vault)
    b.note("Technologies", "SQLite", "Technology")
    b.note("Projects", "Alpha", "Project", relations={"USES": ["SQLite"]})
    b.note("Projects", "Beta", "Project", relations={"USES": ["SQLite"]})
    assert main(["reflect", "--vault", str(vault), "--db", str(db_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["created"] == 1
    [pending] = out["pending"]
    assert pending["title"] == "Shared technology: 2 entities build on SQLite"
    assert pending["id"].startswith("ins-") and {e["name"] for e in pending["entities"]} == {
        "SQLite",
        "Alpha",
        "Beta",
    }
    assert "under_connected" in out["skipped_patterns"]


def test_reflect_command_prints_a_readable_list_and_refuses_unknown_patterns(vault, db_path, capsys) -> None:
    b = VaultBuilder(vault)
    b.note("Technologies", "SQLite", "Technology")
    b.note("Projects", "Alpha", "Project", relations={"USES": ["SQLite"]})
    b.note("Projects", "Beta", "Project", relations={"USES": ["SQLite"]})
    args = ["reflect", "--vault", str(vault), "--db", str(db_path)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert (
        "reflect: 1 new insight, 1 pending" in text
        and "Shared technology: 2 entities build on SQLite" in text
    )
    assert main([*args, "--pattern", "nonsense"]) == 2
    assert "use any of: cross_project_solution" in capsys.readouterr().err
