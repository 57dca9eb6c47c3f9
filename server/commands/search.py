"""`engrama-vault search`: search the memory from a shell, ranked exactly as the `engrama_search` tool ranks.

Before searching it catches the graph up with notes changed while no server was running (reading them only:
it never writes into a note, so a new note still without its engrama_id waits for a running server or
`engrama-vault sync` to give it one); `--no-sync` skips the catch-up, for a vault a running server keeps in step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from dataclasses import asdict
from typing import Any

from server.commands.common import CommandError, add_common_options, settings_from
from server.runtime import open_runtime
from vault_sync.reconcile import WAITING_FOR_HOLDER

log = logging.getLogger(__name__)
MAX_LIMIT = 50


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "search",
        help="search the memory: the notes best matching a question or keywords",
        description="Search the memory as the engrama_search MCP tool does (same service, same ranking). "
        "--json prints the tool's result object.",
    )
    add_common_options(parser)
    parser.add_argument("query", metavar="QUERY", help="a question, keywords or a passage")
    parser.add_argument(
        "--limit", metavar="N", type=int, default=10, help="how many results (1-50, default 10)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    parser.add_argument(
        "--no-sync", action="store_true", help="do not catch up with notes changed while no server ran"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CommandError("QUERY is blank; give a question or a few keywords")
    if not 1 <= args.limit <= MAX_LIMIT:
        raise CommandError(f"--limit must be between 1 and {MAX_LIMIT}, not {args.limit}")
    settings = settings_from(args, watch=False)
    from server.search.service import search  # the ranking code loads only for this command

    async def go() -> dict[str, Any]:
        async with open_runtime(settings, writable=False) as rt:
            if rt.sync is not None and not args.no_sync:
                report = await rt.sync.sync_vault()
                waiting = [e for e in report.errors if e.error == WAITING_FOR_HOLDER]
                if waiting:  # new notes: this command never writes their id line, so they wait for a sync
                    log.warning(
                        "%d new note(s) are not searchable yet: `engrama-vault sync` (or a running server) takes "
                        "them in",
                        len(waiting),
                    )
                if len(report.errors) > len(waiting):
                    log.warning(
                        "%d note(s) could not be read; `engrama-vault sync` names them",
                        len(report.errors) - len(waiting),
                    )
            embedder = await _query_embedder(rt)
            try:
                response = await search(rt, args.query, limit=args.limit)
            finally:
                if embedder is not None:
                    await embedder.aclose()
        found: dict[str, Any] = {
            "results": [_hit(asdict(hit)) for hit in response.results],
            "search_mode": response.search_mode,
        }
        if response.degraded_reason:
            found["degraded_reason"] = response.degraded_reason
        return found

    found = asyncio.run(go())
    if args.json:
        print(json.dumps(found, ensure_ascii=False, separators=(",", ":")))
    else:
        print(_human(found))
    return 0


async def _query_embedder(rt: Any) -> Any:
    """The configured embedder, attached for this search as the server attaches it, so the command ranks as
    the tool does (the local model loads in a fraction of a second); None without one."""
    settings = rt.settings
    if settings.embedding_provider == "none":
        return None
    from server.embeddings import configured_embedder
    from server.embeddings.worker import attach_embedder

    embedder = configured_embedder(settings)
    if embedder is not None:
        await attach_embedder(rt, embedder)
    return embedder


def _hit(hit: dict[str, Any]) -> dict[str, Any]:
    """A result as the tool gives it: the explain-only keys left out when they are empty."""
    return {key: value for key, value in hit.items() if value is not None or key not in ("step", "signals")}


def _human(found: dict[str, Any]) -> str:
    if not found["results"]:
        return "nothing found" + (f" ({found['degraded_reason']})" if "degraded_reason" in found else "")
    lines = []
    for rank, hit in enumerate(found["results"], 1):
        where = hit["path"] or "(no note)"
        lines.append(f"{rank:>2}. {hit['name']} ({hit['label']})  {where}  score {hit['score']:.3f}")
        snippet = " ".join(str(hit["snippet"]).split())
        if snippet:
            lines.append(f"    {snippet[:200]}" + ("..." if len(snippet) > 200 else ""))
    lines.append(
        f"search: {found['search_mode']}"
        + (f" ({found['degraded_reason']})" if "degraded_reason" in found else "")
    )
    return "\n".join(lines)
