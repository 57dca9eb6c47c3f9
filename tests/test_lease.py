"""The vault lease: one holder at a time, released on exit — by SIGKILL too, since the OS drops the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vault_sync.lease import VaultLease, lease_path

# A process that takes the lease, says so, and waits to be killed.
HOLDER = """
import sys, time
from pathlib import Path
from vault_sync.lease import VaultLease
lease = VaultLease(Path(sys.argv[1]))
assert lease.try_acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_the_lease_file_sits_beside_the_database(tmp_path: Path) -> None:
    assert lease_path(tmp_path / "graph.db") == tmp_path / "graph.db.lease"
    assert VaultLease.for_database(tmp_path / "graph.db").path == tmp_path / "graph.db.lease"


def test_only_one_holder_at_a_time(tmp_path: Path) -> None:
    first, second = VaultLease(tmp_path / "x.lease"), VaultLease(tmp_path / "x.lease")
    try:
        assert first.try_acquire() and first.held
        assert first.try_acquire()  # asking again while holding is fine
        assert not second.try_acquire() and not second.held
        assert second.holder_pid() == os.getpid()  # written for people to read
        first.release()
        assert first.holder_pid() is None  # a released lease names nobody
        assert second.try_acquire()
    finally:
        first.release()
        second.release()
        second.release()  # releasing twice is harmless


def test_a_sigkilled_holder_frees_the_lease(tmp_path: Path) -> None:
    path = tmp_path / "x.lease"
    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
    )
    lease = VaultLease(path)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert not lease.try_acquire()
        assert lease.holder_pid() == child.pid
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        deadline = time.monotonic() + 5
        while not lease.try_acquire():
            if time.monotonic() > deadline:
                pytest.fail("the lease stayed locked after its holder was killed")
            time.sleep(0.01)
        assert lease.holder_pid() == os.getpid()
    finally:
        lease.release()
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
