"""`engrama-vault decay` on real vaults and real SQLite files: confidence fades from the last update, never
compounds, and comes back when the note is edited."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from server.runtime import Runtime, open_runtime
from server.search.service import search
from server.settings import Settings
from server.store.decay_sql import DecayReport, decay
from vault_sync.lease import VaultLease

SCRIPT = str(Path(sys.executable).parent / "engrama-vault")
# Midday, so a few hours either way stay on the same UTC day.
NOW = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
MODEL_RATE, TECHNIQUE_RATE, DEFAULT_RATE = 0.015, 0.003, 0.005  # ai.yaml, developer.yaml, base.yaml


def write(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def stamp(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
async def rt(vault: Path, db_path: Path) -> AsyncIterator[Runtime]:
    settings = Settings(vault=vault, db_path=db_path, profile="developer", modules=("ai",), watch=False)
    async with open_runtime(settings) as runtime:
        yield runtime


async def sync(rt: Runtime) -> None:
    report = await rt.require_sync().sync_vault()
    assert not report.errors


async def run_decay(rt: Runtime, now: datetime = NOW, *, dry_run: bool = False) -> DecayReport:
    unit = rt.store.read if dry_run else rt.store.write
    return await unit(decay, rt.profile.decay_rate_for, now, dry_run)


async def age_node(rt: Runtime, name: str, days: float) -> None:
    def backdate(conn: Any) -> None:
        assert (
            conn.execute("update nodes set updated_at = ? where name = ?", (stamp(days), name)).rowcount == 1
        )

    await rt.store.write(backdate)


async def node(rt: Runtime, name: str) -> dict[str, Any]:
    def fetch(conn: Any) -> dict[str, Any]:
        row = conn.execute(
            "select confidence, base_confidence, decayed_at, status from nodes where name = ?", (name,)
        ).fetchone()
        return dict(row)

    return await rt.store.read(fetch)


async def edges(rt: Runtime) -> list[dict[str, Any]]:
    def fetch(conn: Any) -> list[dict[str, Any]]:
        rows = conn.execute(
            "select s.name as source, e.type, t.name as target, e.confidence, e.base_confidence, e.valid_to "
            "from edges e join nodes s on s.id = e.source join nodes t on t.id = e.target order by e.id"
        )
        return [dict(r) for r in rows]

    return await rt.store.read(fetch)


async def graph_rows(rt: Runtime) -> list[tuple]:
    def fetch(conn: Any) -> list[tuple]:
        nodes = conn.execute("select * from nodes order by id").fetchall()
        links = conn.execute("select * from edges order by id").fetchall()
        return [tuple(r) for r in [*nodes, *links]]

    return await rt.store.read(fetch)


async def test_a_node_fades_at_its_labels_rate_from_its_last_update(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nA large language model.\n")
    write(vault, "Scratch.md", "A loose thought.\n")
    await sync(rt)
    await rt.store.merge_entity("Gadget", "Pocket radio", {})  # a label no profile defines
    for name in ("GPT", "Scratch", "Pocket radio"):
        await age_node(rt, name, 40)
    report = await run_decay(rt)
    assert (report.nodes, report.nodes_changed) == (3, 3)
    assert (await node(rt, "GPT"))["confidence"] == pytest.approx(math.exp(-MODEL_RATE * 40))
    assert (await node(rt, "Scratch"))["confidence"] == pytest.approx(math.exp(-DEFAULT_RATE * 40))
    radio = await node(rt, "Pocket radio")
    assert radio["confidence"] == pytest.approx(math.exp(-DEFAULT_RATE * 40))
    assert radio["base_confidence"] == 1.0 and radio["decayed_at"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [(n.name, n.label) for n in report.lowest][0] == ("GPT", "Model")  # the least confident first
    assert {n.name for n in report.lowest[1:]} == {"Pocket radio", "Scratch"}


async def test_whole_days_count_so_a_fresh_node_keeps_its_confidence(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nA large language model.\n")
    await sync(rt)
    await age_node(rt, "GPT", 0.25)  # six hours ago, earlier the same UTC day
    report = await run_decay(rt)
    assert report.nodes_changed == 0
    assert await node(rt, "GPT") == {
        "confidence": 1.0,
        "base_confidence": None,
        "decayed_at": None,
        "status": "active",
    }


async def test_running_twice_on_the_same_day_changes_nothing(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nUses [[Chain of thought]].\n")
    write(vault, "Techniques/Chain of thought.md", "---\ntype: Technique\n---\nThink step by step.\n")
    await sync(rt)
    await age_node(rt, "GPT", 12)
    await age_node(rt, "Chain of thought", 3)
    first = await run_decay(rt)
    after_first = await graph_rows(rt)
    second = await run_decay(rt, NOW + timedelta(hours=3))
    assert first.nodes_changed == 2 and (second.nodes_changed, second.edges_changed) == (0, 0)
    assert await graph_rows(rt) == after_first
    assert second.lowest == first.lowest


async def test_a_later_run_decays_from_the_base_and_does_not_compound(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nA large language model.\n")
    await sync(rt)
    await age_node(rt, "GPT", 40)
    await run_decay(rt)
    for later in range(1, 11):  # a daily cron job for ten days
        await run_decay(rt, NOW + timedelta(days=later))
    gpt = await node(rt, "GPT")
    assert gpt["confidence"] == pytest.approx(math.exp(-MODEL_RATE * 50), rel=1e-12)
    assert gpt["base_confidence"] == 1.0


async def test_editing_the_note_restores_its_confidence(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nA large language model.\n")
    await sync(rt)
    await age_node(rt, "GPT", 100)
    await run_decay(rt)
    assert (await node(rt, "GPT"))["confidence"] < 0.25
    text = (vault / "Models/GPT.md").read_text(encoding="utf-8")
    (vault / "Models/GPT.md").write_text(text + "Still the one we use.\n", encoding="utf-8")
    await sync(rt)
    restored = await node(rt, "GPT")
    assert (restored["confidence"], restored["base_confidence"], restored["decayed_at"]) == (1.0, None, None)
    await run_decay(rt)  # updated today: nothing to fade
    assert (await node(rt, "GPT"))["confidence"] == 1.0


async def test_a_superseded_note_starts_at_half_its_declared_confidence(rt: Runtime, vault: Path) -> None:
    write(
        vault,
        "Models/Old model.md",
        "---\ntype: Model\nconfidence: 0.8\nvalid_to: 2025-01-01\n---\nReplaced by a newer one.\n",
    )
    await sync(rt)
    assert (await node(rt, "Old model"))["confidence"] == pytest.approx(0.4)
    await age_node(rt, "Old model", 10)
    await run_decay(rt)
    old = await node(rt, "Old model")
    assert old["confidence"] == pytest.approx(0.4 * math.exp(-MODEL_RATE * 10))
    assert old["base_confidence"] == pytest.approx(0.4)


async def test_archived_nodes_and_their_closed_relations_are_left_alone(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nUses [[Chain of thought]].\n")
    write(vault, "Techniques/Chain of thought.md", "---\ntype: Technique\n---\nThink step by step.\n")
    write(vault, "Models/Retired.md", "---\ntype: Model\nstatus: archived\n---\nNo longer served.\n")
    await sync(rt)
    (vault / "Models/GPT.md").unlink()
    await sync(rt)
    for name in ("GPT", "Retired", "Chain of thought"):
        await age_node(rt, name, 30)
    report = await run_decay(rt)
    assert (report.nodes, report.edges) == (1, 0)  # only Chain of thought; GPT's edge closed with it
    for name in ("GPT", "Retired"):
        assert await node(rt, name) == {
            "confidence": 1.0,
            "base_confidence": None,
            "decayed_at": None,
            "status": "archived",
        }
    [link] = await edges(rt)
    assert link["valid_to"] is not None and (link["confidence"], link["base_confidence"]) == (1.0, None)


async def test_open_relations_fade_at_their_sources_rate_from_their_last_update(
    rt: Runtime, vault: Path
) -> None:
    """An edge's last update is the later of when it appeared and when its note last changed."""
    write(
        vault,
        "Techniques/Bisecting.md",
        "---\ntype: Technique\nrelations:\n  USES: ['[[Git]]']\n---\nHalve the range. See [[Nowhere yet]].\n",
    )
    write(vault, "Libraries/Git.md", "---\ntype: Library\n---\nVersion control.\n")
    await sync(rt)

    def backdate_edges(conn: Any) -> None:
        conn.execute("update edges set valid_from = ?", (stamp(20),))
        conn.execute("update nodes set updated_at = ?", (stamp(30),))  # the notes are older still

    await rt.store.write(backdate_edges)
    report = await run_decay(rt)
    assert (report.edges, report.edges_changed) == (1, 1)  # the link to a stub is not a live relation yet
    uses, stub_link = sorted(await edges(rt), key=lambda e: e["type"], reverse=True)
    assert (uses["type"], uses["target"]) == ("USES", "Git")
    assert (
        uses["confidence"] == pytest.approx(math.exp(-TECHNIQUE_RATE * 20)) and uses["base_confidence"] == 1.0
    )
    assert stub_link["target"] == "Nowhere yet" and stub_link["confidence"] == 1.0

    def note_restated_the_link(conn: Any) -> None:  # the note changed 5 days ago, the link still in it
        conn.execute("update nodes set updated_at = ? where name = 'Bisecting'", (stamp(5),))

    await rt.store.write(note_restated_the_link)
    await run_decay(rt)
    uses = next(e for e in await edges(rt) if e["type"] == "USES")
    assert uses["confidence"] == pytest.approx(math.exp(-TECHNIQUE_RATE * 5))


async def test_a_dry_run_reports_and_writes_nothing(rt: Runtime, vault: Path) -> None:
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nUses [[Chain of thought]].\n")
    write(vault, "Techniques/Chain of thought.md", "---\ntype: Technique\n---\nThink step by step.\n")
    await sync(rt)
    await age_node(rt, "GPT", 30)

    def backdate_edges(conn: Any) -> None:
        conn.execute("update edges set valid_from = ?", (stamp(30),))

    await rt.store.write(backdate_edges)
    before = await graph_rows(rt)
    report = await run_decay(rt, dry_run=True)
    assert report.dry_run and (report.nodes_changed, report.edges_changed) == (1, 1)
    assert report.lowest[0].confidence == pytest.approx(math.exp(-MODEL_RATE * 30))
    assert await graph_rows(rt) == before


async def test_search_ranks_the_more_confident_of_two_equal_matches_first_after_decay(
    rt: Runtime, vault: Path
) -> None:
    body = "Quantization benchmark throughput on a single consumer card.\n"
    # Equal text scores tie-break by id, so the fast-fading Model leads until decay separates them.
    write(
        vault,
        "Models/Falcon.md",
        f"---\nengrama_id: 00000000-0000-4000-8000-000000000001\ntype: Model\n---\n{body}",
    )
    write(
        vault,
        "Metrics/Condor.md",
        f"---\nengrama_id: ffffffff-ffff-4fff-bfff-ffffffffffff\ntype: Metric\n---\n{body}",
    )
    await sync(rt)
    for name in ("Falcon", "Condor"):
        await age_node(rt, name, 30)  # same age: before decay only the tie-break orders them
    query = "quantization benchmark throughput"
    assert [hit.name for hit in (await search(rt, query)).results] == ["Falcon", "Condor"]
    await run_decay(rt)
    hits = (await search(rt, query)).results
    assert [hit.name for hit in hits] == ["Condor", "Falcon"]
    assert hits[0].confidence == pytest.approx(math.exp(-0.002 * 30))  # Metric's rate in ai.yaml
    assert hits[1].confidence == pytest.approx(math.exp(-MODEL_RATE * 30))


# --- the command, as a person (or cron) runs it -------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120
    )


def backdate_file(db: Path, days: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)  # plain columns: any SQLite will do
    try:
        when = (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        conn.execute("update nodes set updated_at = ?", (when,))
        conn.execute("update edges set valid_from = ?", (when,))
    finally:
        conn.close()


def test_decay_command_uses_the_vaults_profile_and_prints_json(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    write(vault, "Models/GPT.md", "---\ntype: Model\n---\nUses [[Chain of thought]].\n")
    write(vault, "Concepts/Chain of thought.md", "---\ntype: Concept\n---\nThink step by step.\n")
    assert cli("init", "--vault", str(vault), "--db", str(db), "--modules", "ai").returncode == 0
    assert cli("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    backdate_file(db, 10)
    notes = {p: p.read_bytes() for p in vault.rglob("*.md")}
    lease = VaultLease.for_database(db)
    assert lease.try_acquire()  # a running server holds the vault: decay needs neither the lease nor a sync
    try:
        done = cli("decay", "--vault", str(vault), "--db", str(db), "--json")
        again = cli("decay", "--vault", str(vault), "--db", str(db), "--json")
    finally:
        lease.release()
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["nodes"], report["edges"], report["nodes_changed"], report["edges_changed"]) == (
        2,
        1,
        2,
        1,
    )
    assert report["dry_run"] is False
    assert report["lowest"][0]["name"] == "GPT"
    assert report["lowest"][0]["confidence"] == pytest.approx(math.exp(-MODEL_RATE * 10))
    assert json.loads(again.stdout)["nodes_changed"] == 0
    assert {p: p.read_bytes() for p in vault.rglob("*.md")} == notes


def test_decay_command_dry_run_says_what_it_would_do(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    write(vault, "Scratch.md", "A loose thought.\n")
    assert cli("sync", "--vault", str(vault), "--db", str(db)).returncode == 0
    backdate_file(db, 10)
    done = cli("decay", "--vault", str(vault), "--db", str(db), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "would decay 1 of 1 nodes and 0 of 0 relations; lowest: Scratch (Note) 0.95"
    )
    assert "nothing written" in done.stdout
    assert (
        json.loads(cli("decay", "--vault", str(vault), "--db", str(db), "--json").stdout)["nodes_changed"]
        == 1
    )


def test_decay_without_a_database_or_a_vault_says_what_to_do(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "g.db"
    vault.mkdir()
    done = cli("decay", "--vault", str(vault), "--db", str(db))
    assert done.returncode == 2 and "engrama-vault sync" in done.stderr and not db.exists()
    done = cli("decay", "--db", str(db), env={"ENGRAMA_VAULT": ""})
    assert done.returncode == 2 and "--vault" in done.stderr
