"""The soak's servers and assistants: real `engrama-vault serve` processes, real stdio MCP clients.

A `Server` spawns the installed console script (beside the running interpreter, as tests/test_e2e_stdio.py
finds it) through `sh -c 'echo $$ > pidfile; exec ...'`, so the soak knows the server's own pid and can SIGKILL
it. An `Assistant` calls every tool on names that overlap with the person's notes, from its own seeded RNG.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from bench.soak_person import NAMES, Person
from bench.soak_record import SoakRecord

COMMAND = Path(sys.executable).parent / "engrama-vault"
CALL_TIMEOUT = 60.0
FOLDER_LABELS = {"Projects": "Project", "Concepts": "Concept", "Technologies": "Technology"}
LABELS = ["Project", "Concept", "Technology", "Person", "Note", "Problem", "Decision"]
RELATIONS = [  # (source label, relation, target label) the base profile accepts
    ("Project", "USES", "Technology"),
    ("Project", "APPLIES", "Concept"),
    ("Project", "HAS_PROBLEM", "Problem"),
    ("Person", "USES", "Technology"),
    ("Note", "RELATED_TO", "Concept"),
    ("Concept", "RELATED_TO", "Project"),
]


class Server:
    """One `engrama-vault serve` process and the MCP client session talking to it over stdio."""

    def __init__(self, name: str, vault: Path, db: Path, workdir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.pid_file = workdir / f"server-{name}.pid"
        self.log_file = workdir / f"server-{name}.log"
        self.params = StdioServerParameters(
            command="/bin/sh",
            args=[
                "-c",
                'echo $$ > "$SOAK_PID_FILE"; exec "$0" "$@"',
                str(COMMAND),
                *["serve", "--vault", str(vault), "--db", str(db), "--log-level", "INFO"],
            ],
            env={**get_default_environment(), **env, "SOAK_PID_FILE": str(self.pid_file)},
        )
        self.session: ClientSession | None = None
        self.pid = 0
        self.killed = False
        self._ready = asyncio.Event()
        self._close = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    async def start(self, timeout: float = 60.0) -> None:
        self._task = asyncio.create_task(self._hold(), name=f"server-{self.name}")
        deadline = time.monotonic() + timeout
        while not self._ready.is_set():
            if self._task.done() or time.monotonic() > deadline:
                raise RuntimeError(
                    f"server {self.name} did not start ({self._failure!r}); see {self.log_file}"
                )
            await asyncio.sleep(0.05)
        self.pid = int(self.pid_file.read_text(encoding="utf-8"))

    async def _hold(self) -> None:
        """Keeps the client open in one task (anyio scopes must close in the task that opened them)."""
        try:
            with open(self.log_file, "w", encoding="utf-8") as errlog:
                async with (
                    stdio_client(self.params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    self.session = session
                    self._ready.set()
                    await self._close.wait()
        except Exception as error:  # noqa: BLE001 - a killed server ends its session this way; kept for start()
            self._failure = error
        finally:
            self.session = None

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """(structured result, None) or (None, the error the client saw)."""
        session = self.session
        if session is None:
            return None, f"server {self.name} is not connected"
        try:
            result = await asyncio.wait_for(session.call_tool(tool, args), CALL_TIMEOUT)
        except TimeoutError:
            return None, f"no answer within {CALL_TIMEOUT:.0f} s"
        except Exception as error:  # noqa: BLE001 - any failure of the transport is recorded, not raised
            return None, f"{type(error).__name__}: {error}"
        if result.is_error:
            text = getattr(result.content[0], "text", "") if result.content else ""
            return None, text or "isError without a message"
        return result.structured_content or {}, None

    def alive(self) -> bool:
        """The process runs and is not a zombie."""
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def kill(self) -> None:
        self.killed = True
        os.kill(self.pid, signal.SIGKILL)

    async def close(self, timeout: float = 30.0) -> None:
        self._close.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
        if self.pid and self.alive():  # only ever our own child's process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)


def _gist(done: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a write's result says about where it went (logged with the call)."""
    if not done:
        return None
    keys = ("id", "created", "path", "note_path", "message", "revived", "action", "status", "written")
    return {k: done[k] for k in keys if k in done} or None


@dataclass
class ToolWrite:
    """A write an assistant's call was told succeeded, to be found in the vault after quiescence."""

    actor: str
    server: str
    seq: int
    t: float
    token: str
    node_id: str
    path: str  # "" when a follower queued the write for the holder
    name: str = ""  # the entity's name, as the call gave it


@dataclass(frozen=True)
class Related:
    """A relation an assistant was told it made: which entity to which, by id."""

    actor: str
    seq: int
    source_id: str
    rel_type: str
    target_id: str
    target_name: str = ""  # the target's name when the relation was made


@dataclass
class Assistant:
    """One assistant on one server (replaced by a new server when its own is killed)."""

    name: str
    person: Person
    record: SoakRecord
    server: Server | None = None
    counter: int = 0
    insights: list[str] = field(default_factory=list)
    approved: list[str] = field(default_factory=list)
    writes: list[ToolWrite] = field(default_factory=list)
    related: list[Related] = field(default_factory=list)
    unused_tools: set[str] = field(default_factory=set)

    def _name_and_label(self, rng: random.Random) -> tuple[str, str]:
        live = self.person.live()
        if live and rng.random() < 0.65:
            note = rng.choice(live)
            folder = Path(note.path).parts[0] if "/" in note.path else ""
            label = FOLDER_LABELS.get(folder, "Note") if rng.random() < 0.7 else rng.choice(LABELS)
            return note.name, label
        return rng.choice(NAMES), rng.choice(LABELS)

    def _args(self, tool: str, rng: random.Random) -> dict[str, Any] | None:
        name, label = self._name_and_label(rng)
        self.counter += 1
        token = f"Observed s{self.person.seed}-{self.name}{self.counter:05d}"
        if tool == "engrama_remember":
            args: dict[str, Any] = {"label": label, "name": name, "observation": token}
            if rng.random() < 0.4:
                args["properties"] = {"stage": f"{self.name}{self.counter}"}
            if rng.random() < 0.3:
                source, rel, target = rng.choice(RELATIONS)
                args["label"] = source
                args["relations"] = [{"type": rel, "target": rng.choice(NAMES), "target_label": target}]
            return args
        if tool == "engrama_relate":
            source, rel, target = rng.choice(RELATIONS)
            other, _ = self._name_and_label(rng)
            return {
                "source": name,
                "rel_type": rel,
                "target": other,
                "source_label": source,
                "target_label": target,
            }
        if tool == "engrama_search":
            query = rng.choice([name, f"{name} notes", "In-place edit", "Typed into", "Observed"])
            return {"query": query, "include_archived": rng.random() < 0.3, "limit": rng.choice([5, 10, 20])}
        if tool == "engrama_context":
            return {"name": name, "hops": rng.randint(1, 2)}
        if tool == "engrama_sync_note":
            live = self.person.live()
            return {"path": rng.choice(live).path} if live else None
        if tool == "engrama_sync_vault":
            return {"folder": rng.choice(["Projects", "Notes"])} if rng.random() < 0.5 else {}
        if tool == "engrama_forget":
            return {"name": name, "label": label, "mode": "archive"}
        if tool == "engrama_reflect":
            return {}
        if tool == "engrama_surface_insights":
            return {"limit": 10}
        if tool == "engrama_approve_insight":
            if not self.insights:
                return None
            return {
                "insight_id": rng.choice(self.insights),
                "action": rng.choice(["approve", "approve", "dismiss"]),
            }
        if tool == "engrama_write_insight_to_vault":
            return {"insight_id": rng.choice(self.approved)} if self.approved else None
        if tool == "engrama_ingest":
            live = self.person.live()
            return {"source": rng.choice(live).path, "source_type": "note"} if live else None
        if tool == "engrama_status":
            return {}
        if tool == "engrama_brief":
            return {"cues": name} if rng.random() < 0.5 else {"budget_tokens": rng.choice([300, 1500])}
        if tool == "engrama_read_note":
            live = self.person.live()
            if live and rng.random() < 0.6:
                return {"path": rng.choice(live).path, "max_chars": rng.choice([200, 100_000])}
            return {"name": name}
        return None

    WEIGHTS = {
        "engrama_remember": 4.0,
        "engrama_relate": 2.5,
        "engrama_search": 3.0,
        "engrama_context": 2.0,
        "engrama_sync_note": 1.0,
        "engrama_sync_vault": 0.25,
        "engrama_forget": 0.5,
        "engrama_reflect": 0.2,
        "engrama_surface_insights": 0.5,
        "engrama_approve_insight": 0.4,
        "engrama_write_insight_to_vault": 0.3,
        "engrama_ingest": 0.3,
        "engrama_status": 1.0,
        "engrama_brief": 0.3,
        "engrama_read_note": 1.0,
    }

    async def one_call(self, rng: random.Random) -> None:
        server = self.server
        if server is None or server.session is None:
            await asyncio.sleep(0.05)
            return
        tool = rng.choices(list(self.WEIGHTS), list(self.WEIGHTS.values()))[0]
        args = self._args(tool, rng)
        if args is None:
            return
        started = self.record.now()
        done, error = await server.call(tool, args)
        seq = self.record.tool_call(f"{self.name}@{server.name}", tool, args, error, _gist(done), started)
        if done is None:
            return
        if tool == "engrama_remember" and done.get("id"):
            self.writes.append(
                ToolWrite(
                    self.name,
                    server.name,
                    seq,
                    started,
                    args["observation"],
                    done["id"],
                    done.get("path") or "",
                    args["name"],
                )
            )
        elif tool == "engrama_relate" and done.get("edge", {}).get("target_id"):
            edge = done["edge"]
            self.related.append(
                Related(
                    f"{self.name}@{server.name}",
                    seq,
                    edge["source_id"],
                    args["rel_type"],
                    edge["target_id"],
                    str(edge.get("target") or ""),
                )
            )
        elif tool == "engrama_surface_insights":
            self.insights = [i["id"] for i in done.get("insights", [])] or self.insights
        elif tool == "engrama_reflect":
            self.insights += [i["id"] for i in done.get("insights", [])]
        elif tool == "engrama_approve_insight" and done.get("status") == "approved":
            self.approved.append(done["id"])

    async def run(self, rng: random.Random, stop: asyncio.Event, rate: float) -> None:
        while not stop.is_set():
            await self.one_call(rng)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.expovariate(rate))
