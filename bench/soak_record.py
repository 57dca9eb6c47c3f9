"""The soak's record: every operation with its actor and time, counters, and the invariants' verdicts.

Each actor (the person, each assistant) draws its choices from its own `random.Random` seeded from the run's
seed, so one seed gives each actor the same sequence of decisions; the interleaving with the servers is real
and is what the operation log (`ops.jsonl`, one JSON object a line, the seed on the first) records, so a
failure can be followed step by step and replayed by hand.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO


@dataclass
class Violation:
    invariant: str
    detail: str


@dataclass
class Call:
    """A tool call that succeeded: when it ran, who made it, what it was asked and what it answered."""

    seq: int
    started: float
    ended: float
    actor: str
    tool: str
    args: dict[str, Any]
    result: dict[str, Any]


@dataclass
class SoakRecord:
    """Operation log and counters shared by every actor of one run."""

    seed: int
    log_path: Path
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)  # the same moment on the wall clock (UTC)
    person_ops: Counter[str] = field(default_factory=Counter)
    tool_calls: Counter[str] = field(default_factory=Counter)
    tool_errors: Counter[str] = field(default_factory=Counter)
    error_messages: dict[str, Counter[str]] = field(default_factory=dict)
    findings: list[Violation] = field(default_factory=list)  # noticed while running (the person's re-reads)
    invariants: dict[str, list[str]] = field(default_factory=dict)  # name -> violations (empty: held)
    stats: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    times: dict[int, float] = field(default_factory=dict)  # log number -> seconds since the start
    _out: TextIO | None = None
    _seq: int = 0

    def open(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.event("harness", "seed", seed=self.seed)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def now(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def event(self, actor: str, op: str, **details: Any) -> int:
        """Log one step; returns its sequence number (cited by findings)."""
        self._seq += 1
        self.times[self._seq] = self.now()
        if self._out is not None:
            row = {"n": self._seq, "t": self.times[self._seq], "actor": actor, "op": op, **details}
            self._out.write(json.dumps(row, default=str) + "\n")
            self._out.flush()
        return self._seq

    def person_op(self, kind: str, **details: Any) -> int:
        self.person_ops[kind] += 1
        return self.event("person", kind, **details)

    def tool_call(
        self, actor: str, tool: str, args: dict[str, Any], error: str | None, result: Any, started: float
    ) -> int:
        self.tool_calls[tool] += 1
        if error is not None:
            self.tool_errors[tool] += 1
            self.error_messages.setdefault(tool, Counter())[_shape(error)] += 1
        seq = self.event(actor, tool, args=args, error=error, result=result, started=started)
        if error is None:
            self.calls.append(Call(seq, started, self.times[seq], actor, tool, args, result or {}))
        return seq

    def find(self, invariant: str, detail: str) -> None:
        self.findings.append(Violation(invariant, detail))
        self.event("person", "noticed", invariant=invariant, detail=detail)

    def judge(self, invariant: str, violations: list[str]) -> None:
        self.invariants.setdefault(invariant, []).extend(violations)
        self.event("harness", "invariant", invariant=invariant, held=not violations, violations=violations)

    @property
    def violated(self) -> dict[str, list[str]]:
        return {name: found for name, found in self.invariants.items() if found}

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "seconds": self.now(),
            "log": str(self.log_path),
            "person_operations": sum(self.person_ops.values()),
            "person_operations_by_kind": dict(sorted(self.person_ops.items())),
            "tool_calls": sum(self.tool_calls.values()),
            "tool_calls_by_tool": dict(sorted(self.tool_calls.items())),
            "tool_errors_by_tool": dict(sorted(self.tool_errors.items())),
            "tool_error_messages": {
                tool: dict(found.most_common(5)) for tool, found in sorted(self.error_messages.items())
            },
            "stats": self.stats,
            "noticed_while_running": [f"{v.invariant}: {v.detail}" for v in self.findings],
            "invariants_held": sorted(name for name, found in self.invariants.items() if not found),
            "invariants_violated": self.violated,
        }


def _shape(message: str) -> str:
    """An error message with its names and numbers blurred, so the same failure is counted once."""
    words = []
    for word in message.split()[:18]:
        words.append("#" if any(ch.isdigit() for ch in word) else word)
    return " ".join(words)


def format_summary(summary: dict[str, Any]) -> str:
    lines = [
        f"soak seed {summary['seed']}: {summary['seconds']:.0f} s, log {summary['log']}",
        f"person operations: {summary['person_operations']} {summary['person_operations_by_kind']}",
        f"tool calls: {summary['tool_calls']} {summary['tool_calls_by_tool']}",
        f"tool errors: {summary['tool_errors_by_tool']}",
    ]
    for tool, messages in summary["tool_error_messages"].items():
        for message, count in messages.items():
            lines.append(f"  {tool} x{count}: {message[:160]}")
    for key, value in summary["stats"].items():
        shown = f"{len(value)}, e.g. {value[:3]}" if isinstance(value, list) else value
        lines.append(f"{key}: {shown}")
    if summary["noticed_while_running"]:
        lines.append(f"noticed while running ({len(summary['noticed_while_running'])}):")
        lines += [f"  {item[:300]}" for item in summary["noticed_while_running"][:30]]
    lines.append(f"invariants held: {', '.join(summary['invariants_held']) or 'none'}")
    if summary["invariants_violated"]:
        lines.append("invariants VIOLATED:")
        for name, found in summary["invariants_violated"].items():
            lines.append(f"  {name} ({len(found)}):")
            lines += [f"    - {item[:400]}" for item in found[:15]]
            if len(found) > 15:
                lines.append(f"    ... and {len(found) - 15} more (see the log)")
    else:
        lines.append("invariants violated: none")
    return "\n".join(lines)
