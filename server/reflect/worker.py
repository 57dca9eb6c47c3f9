"""What reflect finds, worked out in a short-lived child process, so the server's heap never holds the graph.

Reflect reads every live node and open edge, builds the graph in memory and matches the patterns over it: at
10,000 notes tens of MiB of Python objects for under a second. Freed, they left 8-17 MiB of fragmented heap in
the server (issue 15). So the server starts a worker process (`python -c BOOT`, the note readers' kind:
`vault_sync.reader_process.Worker`) that imports reflect's patterns and the store (not the MCP SDK, nor the
services), opens the database file read-only, reads nodes and edges in one transaction (one WAL snapshot, as
`insights_sql.snapshot`), runs the patterns and sends back only what reflect keeps (`Found`); its memory goes
back to the system when it exits. That costs the process's start, ~0.2 s (at 10,000 notes reflect took 0.74 s
in-process, 0.93 s so). The server still does every write, with what a finished child sent.

When the child cannot start or dies (killed, out of memory), reflect fails with a `ReflectError` that says so;
nothing has been written. It does not fall back to building the graph in the server: a graph too big for the
child would then take the server, and the person's MCP session, down with it. A database without a file of
its own (in memory) cannot be opened by a child: it is read in-process, as before.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from server.reflect import keys
from server.reflect.errors import ReflectError
from server.reflect.graph import build_graph
from server.reflect.patterns import run_patterns, select_patterns
from server.reflect.values import Finding
from server.store import GraphStore, insights_sql
from server.store.database import connect_read_only
from server.store.insights_sql import PENDING, NodeRow, Proposal
from vault_sync.reader_process import Worker, WorkerStopped, boot
from vault_sync.reader_worker import serve

BOOT = boot(__name__)
# A big vault can match a pattern thousands of times; the person reviews insights one by one in a chat, so
# each run keeps only the most confident new or refreshed ones per pattern (the rest wait for later runs).
MAX_PER_PATTERN = 25


@dataclass(frozen=True)
class Found:
    """What the patterns found: which ran and which were skipped (their needs unmet), the undecided findings
    to keep as proposals (at most MAX_PER_PATTERN per pattern), and every undecided key found."""

    ran: list[str]
    skipped: list[str]
    proposals: list[Proposal]
    keys: set[str]


async def find_insights(store: GraphStore, names: Sequence[str], now: float, known: dict[str, str]) -> Found:
    """Run the patterns called `names` over the graph at `now`; `known` is every insight's key -> status."""
    if not _has_file(store.path):
        nodes, edges = await store.read(insights_sql.snapshot)
        return await asyncio.to_thread(find, nodes, edges, names, now, known)
    return await _in_child(store.path, list(names), now, known)


def find(
    nodes: Sequence[NodeRow],
    edges: Sequence[tuple[str, str, str, str]],
    names: Sequence[str],
    now: float,
    known: dict[str, str],
) -> Found:
    """The pure part: the graph of `nodes` and `edges`, the patterns over it, and what to propose."""
    ran, skipped, findings = run_patterns(build_graph(nodes, edges), select_patterns(names), now)
    proposals, found = propose(findings, known)
    return Found(ran, skipped, proposals, found)


def propose(findings: Sequence[Finding], known: dict[str, str]) -> tuple[list[Proposal], set[str]]:
    """Undecided findings as proposals (at most MAX_PER_PATTERN per pattern), and every undecided key found."""
    best: dict[str, Proposal] = {}
    for f in findings:
        key = keys.insight_key(f.pattern, f.anchors)
        if known.get(key, PENDING) != PENDING:
            continue  # approved or dismissed: the person's decision stands
        proposal = Proposal(key, keys.insight_id(key), f.pattern, f.title, f.body, f.confidence, f.entities)
        if key not in best or proposal.confidence > best[key].confidence:
            best[key] = proposal
    ranked = sorted(best.values(), key=lambda p: (p.pattern, -p.confidence, p.title, p.key))
    kept: list[Proposal] = []
    per_pattern: dict[str, int] = {}
    for p in ranked:
        per_pattern[p.pattern] = per_pattern.get(p.pattern, 0) + 1
        if per_pattern[p.pattern] <= MAX_PER_PATTERN:
            kept.append(p)
    return kept, set(best)


def _has_file(path: Path) -> bool:
    return str(path) not in ("", ":memory:") and path.is_file()


# --- the parent's side ---------------------------------------------------------------------------------------


async def _in_child(path: Path, names: list[str], now: float, known: dict[str, str]) -> Found:
    level = logging.getLogger("server").getEffectiveLevel()
    try:
        worker = await asyncio.to_thread(Worker, BOOT, level)  # starting a process forks: off the event loop
    except OSError as exc:  # no process at all (out of memory, or of processes)
        raise ReflectError(
            f"reflect could not start its worker process ({exc}), and nothing was written; free some memory "
            "and run engrama_reflect again"
        ) from exc
    try:
        return await asyncio.to_thread(worker.call, _called_in_child, str(path.resolve()), names, now, known)
    except WorkerStopped as exc:
        stopped = exc
    except asyncio.CancelledError:
        worker.kill()  # nobody waits for the answer any more
        raise
    finally:
        await asyncio.to_thread(worker.close)
    raise ReflectError(_stopped_message(worker.returncode)) from stopped


def _stopped_message(code: int | None) -> str:
    if code is not None and code < 0:
        how = f"was killed by {_signal_name(-code)}{' (out of memory?)' if -code == signal.SIGKILL else ''}"
    else:
        how = f"stopped with exit code {code} (it could not start, or failed: the server's log on stderr says why)"
    return (
        f"reflect's worker process {how} before it finished, and nothing was written; run engrama_reflect again, "
        "and if it keeps failing, the server's log (stderr) says more; the machine may be short of memory"
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# --- the child's side ----------------------------------------------------------------------------------------


def main() -> None:
    """The worker process: serve the parent's call (one per reflect) until it closes our input."""
    serve(_start)


def _start(level: int) -> None:
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def _find_in_file(path: str, names: list[str], now: float, known: dict[str, str]) -> Found:
    """`find` over the graph in the database file at `path`, read in one transaction by a read-only connection."""
    conn = connect_read_only(Path(path))
    try:
        nodes, edges = insights_sql.snapshot(conn)
    finally:
        conn.close()
    return find(nodes, edges, names, now, known)


_called_in_child = _find_in_file  # what the parent sends (a test swaps it for one that dies)
