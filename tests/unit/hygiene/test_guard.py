"""SIGINT/SIGTERM: stop everything first, then unwind as a KeyboardInterrupt."""

from __future__ import annotations

import os
import signal

import pytest

from zephon_chaos.hygiene.interrupt import InterruptGuard


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.usefixtures("sigint_heard")
def test_the_signal_stops_everything_then_interrupts(sig: int) -> None:
    stopped: list[bool] = []
    previous = signal.getsignal(sig)
    guard = InterruptGuard(lambda: stopped.append(True))
    assert guard.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sig)
    finally:
        guard.uninstall()
    assert stopped == [True]
    assert signal.getsignal(sig) is previous
