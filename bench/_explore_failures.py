"""Throwaway exploration: where full-text search fails on LoCoMo (questions, evidence turns, what ranked instead).

Run: .venv/bin/python bench/_explore_failures.py [--cat 1] [--all]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import write_vault  # noqa: E402
from server.runtime import open_runtime  # noqa: E402
from server.search.service import DEFAULT_TUNING, run_search  # noqa: E402
from server.settings import Settings  # noqa: E402
from server.store.search_sql import NodeFilter  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cat", type=int, action="append")
    parser.add_argument("--all", action="store_true", help="also questions found at rank 1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        questions = write_vault(root)
        settings = Settings(vault=root, db_path=Path(tmp) / "g.db", embedding_provider="none", watch=False)
        async with open_runtime(settings) as rt:
            await rt.require_sync().sync_vault()
            for q in questions:
                if args.cat and q.category not in args.cat:
                    continue
                r = await run_search(rt, q.text, NodeFilter(), 10, True, DEFAULT_TUNING)
                paths = [h.path for h in r.results]
                r5 = len(q.sessions & set(paths[:5])) / len(q.sessions)
                if r5 == 1.0 and not args.all:
                    continue
                print(f"\n[{q.category}] R@5={r5:.2f} {q.text}")
                print("   gold:", sorted(q.sessions))
                for t in q.turns:
                    print("   ev:", t[:160])
                for i, h in enumerate(r.results[:10]):
                    mark = "*" if h.path in q.sessions else " "
                    sig = " ".join(f"{k}={v:.2f}" for k, v in (h.signals or {}).items())
                    print(f"   {i + 1:>2}{mark} {h.path} {h.score:.3f} [{sig}]")


if __name__ == "__main__":
    asyncio.run(main())
