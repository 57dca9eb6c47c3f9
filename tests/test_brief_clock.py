"""The brief when the computer's clock jumps (review 21d): node changes are counted in commit order, not by the
wall clock, so an edit made while the clock was wrong is in the next brief, once.

Each step runs the installed `engrama-vault` in its own process; a step "while the clock is wrong" runs it with
the process's clock shifted (time.time and datetime.now, as after a jump), the one outside thing changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_e2e_stdio import COMMAND

pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")

SHIFTED = r"""
import datetime as dt, os, sys, time
skew = float(os.environ["CLOCK_SKEW"])
real = time.time
time.time = lambda: real() + skew
time.time_ns = lambda: int((real() + skew) * 1e9)
class Shifted(dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return dt.datetime.fromtimestamp(time.time(), tz)
dt.datetime = Shifted
sys.argv = ["engrama-vault", *sys.argv[1:]]
from server.entry import main
sys.exit(main())
"""


def run(vault: Path, db: Path, *args: str, skew: float = 0.0) -> str:
    env = {**os.environ, "ENGRAMA_SETTLE_SECONDS": "0", "EMBEDDING_PROVIDER": "none", "CLOCK_SKEW": str(skew)}
    command = [sys.executable, "-c", SHIFTED] if skew else [str(COMMAND)]
    done = subprocess.run(
        [*command, *args, "--vault", str(vault), "--db", str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def project(vault: Path, name: str, body: str) -> None:
    (vault / "Projects" / f"{name}.md").write_text(
        f"---\ntype: Project\nstatus: active\n---\n{body}\n", "utf-8"
    )


@pytest.mark.parametrize("skew", [-3600.0, 86400.0])
def test_changes_made_while_the_clock_was_wrong_are_in_the_next_brief(
    tmp_path: Path, db_path: Path, skew: float
) -> None:
    vault = tmp_path / "vault"
    (vault / "Projects").mkdir(parents=True)
    project(vault, "Alpha", "Alpha.")
    project(vault, "Beta", "Beta.")
    run(vault, db_path, "sync")
    run(vault, db_path, "brief", "--client", "hook")  # the mark, at the right time
    if skew > 0:  # the clock runs a day ahead for one brief, then is put right
        assert "Nothing changed" in run(vault, db_path, "brief", "--client", "hook", skew=skew)
        project(vault, "Alpha", "Alpha, edited once the clock was put right.")
        project(vault, "Gamma", "Gamma.")
        run(vault, db_path, "sync")
        text = run(vault, db_path, "brief", "--client", "hook", "--no-sync")
    else:  # the clock steps back an hour after the brief
        project(vault, "Alpha", "Alpha, edited after the clock stepped back.")
        project(vault, "Gamma", "Gamma.")
        run(vault, db_path, "sync", skew=skew)
        text = run(vault, db_path, "brief", "--client", "hook", "--no-sync", skew=skew + 20)
    changes = text.split("## Changed since the previous brief\n", 1)[-1].split("\n## ", 1)[0]
    assert "## Changed since the previous brief" in text and "Nothing changed" not in text, text
    assert "[[Alpha]]" in changes and "[[Gamma]]" in changes and "[[Beta]]" not in changes, text
    again = run(vault, db_path, "brief", "--client", "hook", "--no-sync")
    assert "Nothing changed in the vault since the previous brief." in again, again  # once, not twice
