"""What engrama-vault costs a conversation in context: the bytes of `tools/list` and of a standard session.

    python bench/tokens.py            # the example vault, copied to a temporary folder
    python bench/tokens.py --json     # the same figures as one JSON object

Every client pays for the tool listing in every conversation, and for every result it reads. This spawns the
installed `engrama-vault serve` with the SDK's stdio client, on a copy of `examples/vault` (synced once with
`engrama-vault sync`), through a relay (this script with `--relay`) that sits on the pipes and records every
line exactly as it crosses them. So the figures are the bytes on the wire, not a re-serialisation:

- `tools/list`: the response's bytes (the listing a client puts into the model's context);
- the standard session: status, brief (when the server has `engrama_brief`), three searches, a context and a
  remember; per call the request's and the response's bytes, and the total.

Tokens are estimated as bytes / 4 (a usual ratio for English text and JSON with BPE tokenizers; the script
reports bytes, which are exact, and the estimate only as a guide).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_VAULT = ROOT / "examples" / "vault"
COMMAND = str(Path(sys.executable).parent / "engrama-vault")
BYTES_PER_TOKEN = 4

SEARCHES = (
    "what database does Engrama use",
    "slow nightly import",
    "who works on Harbor Analytics",
)
CONTEXT = {"name": "Engrama"}
REMEMBER = {
    "label": "Decision",
    "name": "Lease by OS file lock",
    "observation": "One server per vault holds an OS file lock; the others serve reads.",
    "relations": [{"type": "RELATED_TO", "target": "Engrama"}],
}


# --- the relay: a transparent pipe between the client and the server that logs each line --------------------


def relay(log_path: Path, command: list[str]) -> int:
    """Run `command`, pass stdin/stdout through unchanged, and append every line to `log_path` as JSON."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # stderr inherited
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    with open(log_path, "a", encoding="utf-8") as log:

        def record(direction: str, line: bytes) -> None:
            with lock:
                log.write(json.dumps({"dir": direction, "line": line.decode("utf-8", "replace")}) + "\n")
                log.flush()

        def pump(source: IO[bytes], sink: IO[bytes], direction: str, close_sink: bool) -> None:
            for line in iter(source.readline, b""):
                record(direction, line)
                try:
                    sink.write(line)
                    sink.flush()
                except (BrokenPipeError, ValueError):
                    break
            if close_sink:
                sink.close()

        down = threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, "<", False), daemon=True)
        down.start()
        pump(sys.stdin.buffer, child.stdin, ">", True)  # client -> server, until the client closes stdin
        code = child.wait()
        down.join(timeout=5)
    return code


# --- the session -----------------------------------------------------------------------------------------


async def run_session(vault: Path, db: Path, log_path: Path) -> list[str]:
    """Drive the standard session through the relay; returns the tool calls made, in order."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            str(Path(__file__).resolve()),
            "--relay",
            str(log_path),
            "--",
            COMMAND,
            "serve",
            "--vault",
            str(vault),
            "--db",
            str(db),
        ],
    )
    calls: list[str] = []
    with open(log_path.with_suffix(".stderr"), "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}

            async def call(name: str, args: dict[str, Any]) -> None:
                result = await session.call_tool(name, args)
                if result.is_error:
                    raise SystemExit(f"{name} failed: {result.content}")
                calls.append(name)

            await call("engrama_status", {})
            if "engrama_brief" in names:
                await call("engrama_brief", {})
            for query in SEARCHES:
                await call("engrama_search", {"query": query})
            await call("engrama_context", CONTEXT)
            await call("engrama_remember", REMEMBER)
    return calls


def tally(log_path: Path) -> dict[str, Any]:
    """Bytes per exchange from the relay's log: requests matched to responses by JSON-RPC id."""
    requests: dict[Any, tuple[str, str | None, int]] = {}
    exchanges: list[dict[str, Any]] = []
    for raw in log_path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(raw)
        size = len(entry["line"].encode("utf-8"))
        message = json.loads(entry["line"])
        if entry["dir"] == ">" and "method" in message and "id" in message:
            tool = (message.get("params") or {}).get("name") if message["method"] == "tools/call" else None
            requests[message["id"]] = (message["method"], tool, size)
        elif entry["dir"] == "<" and "id" in message and message["id"] in requests:
            method, tool, request_bytes = requests.pop(message["id"])
            exchanges.append(
                {
                    "method": method,
                    "tool": tool,
                    "request_bytes": request_bytes,
                    "response_bytes": size,
                    "pretty_response_bytes": size + _indent_cost(message),
                }
            )
    listing = next(e for e in exchanges if e["method"] == "tools/list")
    session = [e for e in exchanges if e["method"] == "tools/call"]
    total = sum(e["request_bytes"] + e["response_bytes"] for e in session)
    pretty = sum(e["request_bytes"] + e["pretty_response_bytes"] for e in session)
    return {
        "tools_list_bytes": listing["response_bytes"],
        "session_bytes": total,
        "session_bytes_if_pretty_printed": pretty,
        "listing_plus_session_bytes": listing["response_bytes"] + total,
        "calls": session,
    }


def _indent_cost(message: dict[str, Any]) -> int:
    """How many more bytes the response would take with its JSON text block indented (the SDK's default for a
    tool returning a model), measured on this very response: a same-run baseline for the compact results."""
    extra = 0
    for block in (message.get("result") or {}).get("content", []):
        try:
            value = json.loads(block.get("text", ""))
        except ValueError:
            continue  # Markdown (the brief), not JSON
        compact = json.dumps(json.dumps(value, ensure_ascii=False, separators=(",", ":")), ensure_ascii=False)
        pretty = json.dumps(json.dumps(value, ensure_ascii=False, indent=2), ensure_ascii=False)
        extra += len(pretty.encode("utf-8")) - len(compact.encode("utf-8"))
    return extra


def report(figures: dict[str, Any]) -> str:
    def tokens(n: int) -> str:
        return f"~{n // BYTES_PER_TOKEN:,} tokens"

    lines = [
        f"tools/list response: {figures['tools_list_bytes']:>8,} bytes ({tokens(figures['tools_list_bytes'])})",
        "standard session (request + response bytes per call):",
    ]
    for call in figures["calls"]:
        lines.append(f"  {call['tool']:<24} {call['request_bytes']:>6,} + {call['response_bytes']:>7,} bytes")
    lines.append(
        f"session total:       {figures['session_bytes']:>8,} bytes ({tokens(figures['session_bytes'])})"
    )
    pretty = figures["session_bytes_if_pretty_printed"]
    lines.append(f"  (the same session with indented JSON text blocks: {pretty:,} bytes)")
    both = figures["listing_plus_session_bytes"]
    lines.append(f"listing + session:   {both:>8,} bytes ({tokens(both)})")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--relay":  # the relay mode this script spawns itself in
        split = sys.argv.index("--")
        return relay(Path(sys.argv[2]), sys.argv[split + 1 :])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--vault", type=Path, default=EXAMPLE_VAULT, help="vault to copy (default: the example)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engrama-tokens-") as tmp:
        work = Path(tmp)
        vault, db, log_path = work / "vault", work / "graph.db", work / "wire.jsonl"
        shutil.copytree(args.vault, vault)
        synced = subprocess.run(
            [COMMAND, "sync", "--vault", str(vault), "--db", str(db)],
            capture_output=True,
            text=True,
            check=False,
        )
        if synced.returncode not in (0, 1):
            raise SystemExit(f"engrama-vault sync failed: {synced.stderr[-2000:]}")
        asyncio.run(run_session(vault, db, log_path))
        figures = tally(log_path)
    print(json.dumps(figures) if args.json else report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
