"""The randomized soak (bench/soak.py) for about a minute: a person editing with every save style, two
assistants calling every tool on two real servers over stdio, the first server SIGKILLed mid-run.

One fixed seed always runs; set ENGRAMA_SOAK_SEED to run one more. A failure lists the violated invariants;
the operation log it names (ops.jsonl, beside the servers' logs) replays the run step by step. The longer
run is `python bench/soak.py --minutes 5`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from bench.soak import SoakConfig, run_soak
from bench.soak_assistant import COMMAND
from bench.soak_record import format_summary

FIXED_SEED = 1201
SEEDS = [FIXED_SEED, *([int(os.environ["ENGRAMA_SOAK_SEED"])] if os.environ.get("ENGRAMA_SOAK_SEED") else [])]
# Two checks go beyond the promises of issue 12 (the person's text, ids, one entity per note, archiving, the
# servers): whether the live graph's relations equal a rebuild's, and whether each relation an assistant made
# is still there after a rebuild. Both still drift in long runs (edges of insight notes, a follower's stand-in
# edges; see CHANGELOG and the session notes), so the suite prints them and `bench/soak.py` fails on them.
REPORTED_ONLY = {"the rebuild gives the same graph", "relations the assistants made survive a rebuild"}
pytestmark = pytest.mark.skipif(not COMMAND.exists(), reason="engrama-vault is not installed in this venv")


@pytest.mark.timeout(420)
@pytest.mark.parametrize("seed", SEEDS)
async def test_a_minute_of_editing_racing_tools_and_a_killed_server_loses_nothing(
    seed: int, tmp_path: Path
) -> None:
    summary = await run_soak(SoakConfig(seed=seed, seconds=45, workdir=tmp_path))
    print(format_summary(summary))
    assert summary["person_operations"] > 150 and summary["tool_calls"] > 400  # the load really ran
    assert "every tool is exercised" in summary["invariants_held"]
    if set(summary["invariants_violated"]) - REPORTED_ONLY:
        kept = _keep_logs(tmp_path, seed)
        raise AssertionError(f"{format_summary(summary)}\nlogs and vault kept in {kept}")


def _keep_logs(workdir: Path, seed: int) -> Path:
    """pytest prunes old temporary folders (several sessions share this machine): keep a failed run's record."""
    kept = (
        Path(tempfile.gettempdir())
        / "engrama-soak-failures"
        / f"seed-{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    shutil.copytree(workdir, kept, ignore=shutil.ignore_patterns("*.db", "*.db-*"))
    return kept
