"""When each process of a launch died, to the millisecond, seen from outside it.

torchelastic stamps failures in whole seconds, and a rank killed by a signal (the OOM killer's
SIGKILL, say) leaves no exit note of its own, so a peer that then fails on the closed
connection may look first. The harness is no parent of the workers, but a pidfd (Linux 5.3+)
of any process becomes readable the moment that process exits: one thread per launch holds a
pidfd for every process the launch records and stamps each death on ``CLOCK_MONOTONIC``, the
clock of the exit notes. A process already dead when first seen gets no stamp, never a late one.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from pathlib import Path

from zephon_chaos.launch.procs import ProcId, recorded_procs, start_ticks

SCAN_INTERVAL_S = 0.02
"""How often new PID records are looked for: a process recorded less than this before it
dies may go unstamped (then the exit notes and torchelastic decide, as before)."""


class DeathWatch:
    """Stamps the death of every process recorded in ``pid_dir`` while it runs."""

    def __init__(self, pid_dir: Path) -> None:
        self.pid_dir = Path(pid_dir)
        self._moments: dict[ProcId, float] = {}
        self._watched: set[ProcId] = set()
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def available() -> bool:
        return hasattr(os, "pidfd_open") and hasattr(select, "poll")

    def start(self) -> DeathWatch:
        if self._thread is None and self.available():
            self._thread = threading.Thread(
                target=self._run, name=f"zc-deathwatch-{self.pid_dir.parent.name}", daemon=True
            )
            self._thread.start()
        return self

    def wait_watching(self, proc: ProcId, timeout_s: float) -> bool:
        """Until ``proc`` is watched (a pidfd held), at most ``timeout_s``: False if never."""
        with self._changed:
            return self._changed.wait_for(lambda: proc in self._watched, timeout_s)

    def stop(self) -> dict[ProcId, float]:
        """End the watch (idempotent) and return the deaths it saw."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return dict(self._moments)

    def _run(self) -> None:
        poller = select.poll()
        watching: dict[int, ProcId] = {}
        seen: set[ProcId] = set()
        try:
            while not self._stop.is_set():
                for proc in recorded_procs(self.pid_dir) - seen:
                    seen.add(proc)
                    fd = _pidfd_of_living(proc)
                    if fd is not None:
                        watching[fd] = proc
                        poller.register(fd, select.POLLIN)
                        with self._changed:
                            self._watched.add(proc)
                            self._changed.notify_all()
                for fd, _ in poller.poll(SCAN_INTERVAL_S * 1000):
                    self._moments[watching[fd]] = time.monotonic()
                    poller.unregister(fd)
                    del watching[fd]
                    os.close(fd)
        finally:
            for fd in watching:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _pidfd_of_living(proc: ProcId) -> int | None:
    """A pidfd of ``proc`` if it is this very process and still alive, else None."""
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        return None
    check = select.poll()
    check.register(fd, select.POLLIN)
    if start_ticks(proc.pid) != proc.ticks or check.poll(0):
        os.close(fd)  # a recycled PID, or dead already: its moment is unknown
        return None
    return fd
