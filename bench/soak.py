"""A seeded, randomized soak of engrama-vault: a person editing, two assistants calling every tool, servers dying.

    .venv/bin/python bench/soak.py --seed 7 --minutes 5 [--kills N] [--json] [--workdir DIR]

Real parts only: a temporary vault on disk, real `engrama-vault serve` processes over stdio, real MCP clients.
For the run's length:
- the person (bench/soak_person.py) edits notes ~10 times a second with every save style (atomic, in place
  with and without a gap, vim-style, Obsidian's new note, rename, move, trash and restore, delete, append,
  a frontmatter property), every line unique so its survival can be checked;
- assistant A on server A (the lease holder) and, from a quarter of the run, assistant B on server B (a
  follower) call every tool ~30 times a second in total, on names that overlap with the person's notes;
- at 60% server A is SIGKILLed: B must take over the vault; assistant A reconnects to a new server C. With
  `--kills N`, N-1 more SIGKILLs land at random times (30-95% of the run) on either assistant's server,
  holder or follower, each followed by a new server for that assistant.
Then the load stops, the soak waits for quiescence (nothing pending in engrama_status, the vault's files
still for the settle window, with a deadline) and checks the invariants (bench/soak_checks.py), once more after
a rebuild (a fresh database, `engrama-vault sync`). Every operation is logged with the seed in
<workdir>/ops.jsonl; servers' logs are beside it. The test suite runs it for about a minute
(tests/test_soak.py); exit status 1 here when an invariant was violated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from bench import soak_checks as check  # noqa: E402
from bench.soak_assistant import COMMAND, Assistant, Server  # noqa: E402
from bench.soak_person import Person  # noqa: E402
from bench.soak_record import SoakRecord, format_summary  # noqa: E402
from vault_sync.lease import lease_path  # noqa: E402


@dataclass(frozen=True)
class SoakConfig:
    seed: int
    seconds: float
    workdir: Path
    person_rate: float = 10.0  # operations a second, over two hands
    tool_rate: float = 30.0  # tool calls a second, over both assistants
    seed_notes: int = 12
    settle: float = (
        3.5  # a little over the server's settle window: ids may be written only once a note is quiet
    )
    quiet_deadline: float = 120.0
    code: Path | None = None  # run the servers from this source tree (PYTHONPATH), e.g. an older commit
    kills: int = 1  # SIGKILLs: the first of the lease holder at 60%; more at random times, of either server

    def kill_times(self) -> list[float]:
        """When each SIGKILL lands, as fractions of the run: 0.6 for one; for more, spread at random between
        0.3 and 0.95 of the run (always 0.6 among them), the same for the same seed."""
        rng = random.Random(f"{self.seed}-kills")
        return sorted([0.6, *(rng.uniform(0.3, 0.95) for _ in range(self.kills - 1))])

    @property
    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(self.code)} if self.code else {}


async def run_soak(config: SoakConfig) -> dict[str, Any]:
    """Runs one soak and returns its summary (see SoakRecord.summary); never raises for a violated invariant."""
    workdir = config.workdir
    vault, db = workdir / "vault", workdir / "data" / "graph.db"
    vault.mkdir(parents=True, exist_ok=True)
    record = SoakRecord(config.seed, workdir / "ops.jsonl")
    record.open()
    person = Person(vault, config.seed, record)
    person.seed_vault(random.Random(f"{config.seed}-vault"), config.seed_notes)
    servers: list[Server] = []
    try:
        await _run(config, vault, db, record, person, servers)
    finally:
        for server in servers:
            await server.close()
        record.close()
    return record.summary()


async def _run(
    config: SoakConfig, vault: Path, db: Path, record: SoakRecord, person: Person, servers: list[Server]
) -> None:
    seed, length = config.seed, config.seconds
    started = time.monotonic()

    async def start(name: str) -> Server:
        server = Server(name, vault, db, config.workdir, config.env)
        servers.append(server)
        await server.start()
        record.event("harness", "server-started", server=name, pid=server.pid)
        return server

    async def until(fraction: float) -> None:
        await asyncio.sleep(max(0.0, started + fraction * length - time.monotonic()))

    first = await start("A")
    await _tools_covered(first, record)
    await _wait(lambda: _caught_up(first), 120, "the first server catches up with the vault")
    stop = asyncio.Event()
    one, two = Assistant("A", person, record, first), Assistant("B", person, record)
    hands = [person.run(random.Random(f"{seed}-hand-{i}"), stop, config.person_rate / 2) for i in (1, 2)]
    load = [asyncio.create_task(c) for c in hands]
    load += [
        asyncio.create_task(one.run(random.Random(f"{seed}-A-{i}"), stop, config.tool_rate / 4))
        for i in (1, 2)
    ]
    try:
        await until(0.25)
        two.server = await start("B")  # joins mid-run as a follower
        load += [
            asyncio.create_task(two.run(random.Random(f"{seed}-B-{i}"), stop, config.tool_rate / 4))
            for i in (1, 2)
        ]
        rng = random.Random(f"{seed}-victims")
        names = iter("CDEFGHIJKLMNOPQRSTUVWXYZ")
        failed: list[str] = []
        for n, when in enumerate(config.kill_times()):
            await until(when)
            # The first SIGKILL is the holder's (assistant A's server); later ones hit either server.
            hit, other = (one, two) if n == 0 or rng.random() < 0.5 else (two, one)
            victim = hit.server
            if victim is None:
                continue
            holder = await _watching(victim)
            hit.server = None
            victim.kill()
            record.event("harness", "sigkill", server=victim.name, pid=victim.pid, holder=holder)
            if holder and not await _wait(lambda o=other: _watching(o.server), 60, "the follower takes over"):
                failed.append(
                    f"server {other.server.name if other.server else '?'} never reported watching the vault "
                    f"within 60 s of server {victim.name}'s SIGKILL"
                )
            hit.server = await start(next(names))  # the killed client's app restarts its server
        record.judge("the follower takes over when the holder is killed", failed)
        await until(1.0)
    finally:
        stop.set()
        await asyncio.gather(*load)
    record.event("harness", "load-stopped")
    survivors = [s for s in servers if not s.killed]
    await _check(
        config, vault, db, record, person, survivors, [*one.writes, *two.writes], [*one.related, *two.related]
    )


async def _check(
    config: SoakConfig,
    vault: Path,
    db: Path,
    record: SoakRecord,
    person: Person,
    survivors: list[Server],
    writes: list[Any],
    related: list[Any],
) -> None:
    quiet = await _quiesce(survivors, vault, config)
    record.judge("quiescent before the deadline", quiet)
    record.judge(
        "servers alive", [f"server {s.name} (pid {s.pid}) is not running" for s in survivors if not s.alive()]
    )
    person.catch_up()
    notes, trash = check.vault_notes(vault), check.trash_texts(vault)
    record.stats["vault at the end"] = {
        "notes": len(notes),
        "trashed": len(trash),
        "person's notes": len(person.live()),
        "person's lines checked": sum(len(n.lines) for n in person.notes.values()),
    }
    record.judge("one engrama_id per note", check.one_id_per_note(notes))
    record.judge("no id changed on a note that still exists", check.ids_kept(person, notes))
    record.judge("every line the person wrote is in the vault", check.lines_kept(person, notes, trash))
    record.judge("no duplicate entities", check.duplicates(db, person, notes))
    record.judge("a node for every note, with its id", check.nodes_match_notes(db, notes))
    record.judge("deleted notes archived, not gone", check.deleted_archived(db, person, notes))
    record.judge("tool writes reach the vault", check.writes_reached_vault(writes, person, vault))
    record.judge("every live note findable at its path", await check.findable(survivors[0], notes))
    record.judge("integrity_check ok", check.integrity(db))
    record.judge("the full-text indexes hold exactly the stored texts", check.indexes_exact(db))
    record.judge("no temp files", check.temp_files(vault))
    for server in survivors:
        await server.close()
    lease = lease_path(db).read_text(encoding="utf-8") if lease_path(db).exists() else ""
    record.judge(
        "the lease is released when the servers stop", [f"the lease still names {lease!r}"] if lease else []
    )
    rebuilt = config.workdir / "rebuilt" / "graph.db"
    record.judge("the rebuild syncs every note", await _cli(config, "sync", vault, rebuilt))
    after = check.vault_notes(vault)
    record.judge("the rebuild changes no note", check.untouched(notes, after))
    record.judge("no duplicate entities after a rebuild", check.duplicates(rebuilt, person, after))
    record.judge("a node for every note after a rebuild", check.nodes_match_notes(rebuilt, after))
    record.judge("the rebuild gives the same graph", check.compare_rebuild(db, rebuilt, after))
    record.judge("integrity_check ok after a rebuild", check.integrity(rebuilt))
    record.judge(
        "the rebuild's full-text indexes hold exactly its stored texts", check.indexes_exact(rebuilt)
    )
    record.judge(
        "relations the assistants made survive a rebuild",
        check.relations_made_kept(related, person, db, rebuilt, after),
    )
    reflected = await _cli(config, "reflect", vault, rebuilt)  # restores decisions from their vault records
    record.judge("insight decisions survive a rebuild", reflected or check.decisions_kept(db, rebuilt))


async def _tools_covered(server: Server, record: SoakRecord) -> None:
    assert server.session is not None
    listed = {t.name for t in (await server.session.list_tools()).tools}
    missing = sorted(listed - set(Assistant.WEIGHTS))
    record.judge("every tool is exercised", [f"the soak does not call {name}" for name in missing])


async def _caught_up(server: Server) -> bool:
    status, _ = await server.call("engrama_status", {})
    return bool(status and status["vault"].get("last_reconcile_at"))


async def _watching(server: Server | None) -> bool:
    if server is None:
        return False
    status, _ = await server.call("engrama_status", {})
    return bool(status and status["vault"].get("watching"))


async def _wait(check: Any, timeout: float, what: str) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.2)
    print(f"soak: timed out waiting until {what}", file=sys.stderr)
    return False


def _busy(status: dict[str, Any], where: str = "") -> list[str]:
    """Every count of waiting work a status reports (pending, outbox, settling ...) that is not zero."""
    found = []
    for key, value in status.items():
        if isinstance(value, dict):
            found += _busy(value, f"{where}{key}.")
        elif _counts_waiting_work(key, value):
            found.append(f"{where}{key}={value}")
    return found


def _counts_waiting_work(key: str, value: Any) -> bool:
    waiting = any(word in key for word in ("pending", "outbox", "settl", "queue", "waiting"))
    return waiting and isinstance(value, int) and not isinstance(value, bool) and value > 0


def _files(vault: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(vault).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size) for p in vault.rglob("*.md")
    }


async def _quiesce(servers: list[Server], vault: Path, config: SoakConfig) -> list[str]:
    """Waits until no server reports pending work and the vault's files have been still for the settle window."""
    deadline = time.monotonic() + config.quiet_deadline
    await asyncio.sleep(config.settle)
    still_since, last, busy = time.monotonic(), _files(vault), ["not polled yet"]
    while time.monotonic() < deadline:
        busy = []
        for server in servers:
            status, error = await server.call("engrama_status", {})
            busy += [
                f"server {server.name}: {b}"
                for b in (_busy(status) if status else [f"status failed: {error}"])
            ]
        now = _files(vault)
        if now != last or busy:
            still_since, last = time.monotonic(), now
        elif time.monotonic() - still_since >= config.settle:
            return []
        await asyncio.sleep(0.5)
    return [
        f"still busy {config.quiet_deadline:.0f} s after the load stopped: {busy or 'the vault kept changing'}"
    ]


async def _cli(config: SoakConfig, command: str, vault: Path, db: Path) -> list[str]:
    """`engrama-vault sync` (or reflect) on a fresh database: a rebuild, as if the old one were deleted."""
    proc = await asyncio.create_subprocess_exec(
        *[str(COMMAND), command, "--vault", str(vault), "--db", str(db), "--json"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **config.env},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    if proc.returncode != 0:
        return [f"engrama-vault {command} exited {proc.returncode}: {err.decode()[-500:]}"]
    report = json.loads(out)
    return [f"{e['path']}: {e['error']}" for e in report.get("errors", [])]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=None, help="the run's seed (default: a new one, printed)")
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the load runs (default 5)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--workdir", type=Path, default=None, help="where the vault, database and logs go")
    parser.add_argument(
        "--code", type=Path, default=None, help="run the servers from this source tree (e.g. an older commit)"
    )
    parser.add_argument(
        "--kills",
        type=int,
        default=1,
        help="SIGKILLs of a server (default 1: the lease holder at 60%%; more land at random times on either)",
    )
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"engrama-soak-{seed}-"))
    print(f"soak: seed {seed}, {args.minutes} min, workdir {workdir}", file=sys.stderr)
    summary = asyncio.run(
        run_soak(
            SoakConfig(
                seed=seed, seconds=args.minutes * 60, workdir=workdir, code=args.code, kills=args.kills
            )
        )
    )
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 1 if summary["invariants_violated"] else 0


if __name__ == "__main__":
    sys.exit(main())
