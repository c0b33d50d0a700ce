"""When each process of a launch died, to the millisecond, seen from outside it.

torchelastic stamps failures in whole seconds, and a rank killed by a signal (the OOM killer's
SIGKILL, say) leaves no exit note of its own, so a peer that then fails on the closed
connection may look first. The harness is no parent of the workers, but a pidfd (Linux 5.3+)
of any process becomes readable the moment that process exits. Per launch, a small process
of the standard library only (``procs/_deathstamp/stamper.py``) waits on a pidfd for every process
the launch records and stamps each death on ``CLOCK_MONOTONIC``, the clock of the exit notes.
In a process of its own it reads the clock as soon as the kernel wakes it: a thread of the
harness first waits for the harness's interpreter lock, and its stamps came 5-45 ms late on a
loaded machine, as late as a peer's reaction to the death (``benchmarks/death_stamp.py``).
A process already dead when first seen gets no stamp, never a late one.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

from zephon_chaos.procs import ProcId
from zephon_chaos.procs._deathstamp import stamper

STAMPER = Path(stamper.__file__)
STOP_S = 10.0
"""How long the stamper may take to end after its input closed, before it is killed."""


class DeathWatch:
    """Stamps the death of every process recorded in ``pid_dir`` while it runs."""

    def __init__(self, pid_dir: Path) -> None:
        self.pid_dir = Path(pid_dir)
        self._moments: dict[ProcId, float] = {}
        self._watched: set[ProcId] = set()
        self._changed = threading.Condition()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @staticmethod
    def available() -> bool:
        return hasattr(os, "pidfd_open") and hasattr(select, "epoll")

    def start(self) -> DeathWatch:
        if self._proc is None and self.available():
            # -I: no PYTHONPATH, so no spawn hook records the stamper as one of the launch's.
            self._proc = subprocess.Popen(
                [sys.executable, "-I", str(STAMPER), str(self.pid_dir)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self._reader = threading.Thread(
                target=self._read, name=f"zc-deathwatch-{self.pid_dir.parent.name}", daemon=True
            )
            self._reader.start()
        return self

    def wait_watching(self, proc: ProcId, timeout_s: float) -> bool:
        """Until ``proc`` is watched (a pidfd held), at most ``timeout_s``: False if never."""
        with self._changed:
            return self._changed.wait_for(lambda: proc in self._watched, timeout_s)

    def stop(self) -> dict[ProcId, float]:
        """End the watch (idempotent) and return the deaths it saw."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            assert proc.stdin is not None and self._reader is not None
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._reader.join()
        return dict(self._moments)

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        with self._proc.stdout as lines:
            for line in lines:
                kind, pid, ticks, *moment = line.split()
                proc = ProcId(int(pid), int(ticks))
                if kind == "d":
                    self._moments[proc] = float(moment[0])
                with self._changed:
                    self._watched.add(proc)
                    self._changed.notify_all()
