"""A process killed with SIGKILL in the middle of a large write leaves a whole, consistent database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlean

WRITER = r"""
import sys
from pathlib import Path
from server.store.database import connect_sync
conn, _ = connect_sync(Path(sys.argv[1]))
conn.execute("begin immediate")
for i in range(10_000_000):
    conn.execute(
        "insert into nodes (id, label, name, created_at, updated_at) values (?, 'Note', ?, 'now', 'now')",
        (f"n{i}", f"node {i}"),
    )
    if i == 20_000:
        print("inside", flush=True)
conn.execute("commit")
"""


def test_sigkill_mid_transaction_leaves_all_or_nothing(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "inside"  # the transaction is open and large
    time.sleep(0.2)  # let it write (and spill pages) a while longer before the kill
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    conn = sqlean.connect(str(db))
    assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert conn.execute("select count(*) from nodes").fetchone()[0] == 0  # none of the transaction
    conn.close()
