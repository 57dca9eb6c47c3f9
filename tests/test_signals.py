"""SignalStop in-process, with real signals sent to this process (the end-to-end runs are in test_e2e_stdio)."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from server.signals import SignalStop


async def test_a_signal_cancels_the_task_that_installed_it_once() -> None:
    stop = SignalStop(signals=(signal.SIGUSR1,))
    reached_teardown = False
    with pytest.raises(asyncio.CancelledError):
        async with stop.installed():
            try:
                os.kill(os.getpid(), signal.SIGUSR1)
                await asyncio.sleep(10)
            finally:
                await asyncio.sleep(0.01)  # a teardown may still await: the task is cancelled once, not again
                reached_teardown = True
    assert reached_teardown and stop.received == signal.SIGUSR1
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL  # handed back on the way out


async def test_signals_that_cannot_be_routed_are_skipped_and_the_rest_still_work() -> None:
    stop = SignalStop(signals=(signal.SIGKILL, signal.SIGUSR2))  # SIGKILL cannot be caught anywhere
    with pytest.raises(asyncio.CancelledError):
        async with stop.installed():
            os.kill(os.getpid(), signal.SIGUSR2)
            await asyncio.sleep(10)
    assert stop.received == signal.SIGUSR2


async def test_without_a_signal_the_teardown_hook_returns() -> None:
    stop = SignalStop(signals=(signal.SIGUSR1,))
    async with stop.installed():
        await asyncio.sleep(0)
    stop.after_teardown()  # returns: no signal asked for the stop
    assert stop.received is None
