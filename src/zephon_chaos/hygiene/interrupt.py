"""SIGINT and SIGTERM stop everything a session started, then unwind as a KeyboardInterrupt.

pytest tears fixtures down after a KeyboardInterrupt (at session finish), but a fixture that
waits for a hung group would wait for its deadline first. So the handler kills the live
groups at once, then raises KeyboardInterrupt: teardown finds dead groups and finishes fast.
SIGTERM (a CI job cancelled, ``timeout``, a killed container) gets the same treatment instead
of killing pytest outright with every rank left running.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

Handler = Any  # what signal.getsignal returns: a callable, SIG_DFL, SIG_IGN or None


class InterruptGuard:
    """Installs the handlers; ``uninstall`` puts the previous ones back."""

    def __init__(self, stop_everything: Callable[[], None]) -> None:
        self._stop = stop_everything
        self._previous: dict[int, Handler] = {}
        self._busy = False

    def install(self) -> bool:
        """False (and nothing installed) outside the main thread, where signals cannot be set."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue  # whoever started us asked for this signal to be ignored
            self._previous[signum] = previous
            signal.signal(signum, self._handle)
        return True

    def uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._busy:
            return  # a second Ctrl-C while we stop things: let the stopping finish
        self._busy = True
        try:
            self._stop()
        finally:
            self._busy = False
        previous = self._previous.get(signum)
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)
        raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")
