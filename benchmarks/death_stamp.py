"""How late the death watch stamps a death, on a loaded machine: the launch's watch (a process of
its own) against the harness thread it replaced, side by side on the same deaths.

    python benchmarks/death_stamp.py [--deaths 30] [--hogs 4]

A rank killed by a signal leaves no note of its own, so the launcher's report orders it
against a peer's exit note by the death watch's stamp (``launch.deathwatch``): a stamp later
than the peer's reaction to that death names the wrong rank first. Each death here is a
child that writes ``time.monotonic()`` (a system-wide clock) and SIGKILLs itself; the lag is
a watch's stamp minus that time. The machine is loaded as under a test run: ``--hogs`` busy
processes, and a busy Python thread in this process (the harness's own work). The old watch
(kept here as the baseline) was a thread of the harness: woken by a death, it first waited for
the interpreter lock, and a death during its look for new records was stamped after the look.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from zephon_chaos.launch.deathwatch import DeathWatch
from zephon_chaos.procs import ProcId, proc_id, recorded_procs
from zephon_chaos.procs._deathstamp.stamper import SCAN_INTERVAL_S, pidfd_of_living

CHILD = (
    "import os, signal, sys, time\n"
    "sys.stdin.readline()\n"
    "print(time.monotonic(), flush=True)\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)
DEADLINE_S = 600.0


class OneThreadWatch:
    """The watch as it was: a thread of the harness, looking for records and waiting on the
    pidfds in one loop."""

    def __init__(self, pid_dir: Path) -> None:
        self.pid_dir = pid_dir
        self.moments: dict[ProcId, float] = {}
        self.watched: set[ProcId] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> OneThreadWatch:
        self._thread.start()
        return self

    def stop(self) -> dict[ProcId, float]:
        self._stop.set()
        self._thread.join()
        return dict(self.moments)

    def _run(self) -> None:
        poller = select.poll()
        watching: dict[int, ProcId] = {}
        seen: set[ProcId] = set()
        while not self._stop.is_set():
            for proc in recorded_procs(self.pid_dir) - seen:
                seen.add(proc)
                fd = pidfd_of_living(proc.pid, proc.ticks)
                if fd is not None:
                    watching[fd] = proc
                    poller.register(fd, select.POLLIN)
                    self.watched.add(proc)
            for fd, _ in poller.poll(SCAN_INTERVAL_S * 1000):
                self.moments[watching[fd]] = time.monotonic()
                poller.unregister(fd)
                del watching[fd]
                os.close(fd)
        for fd in watching:
            with contextlib.suppress(OSError):
                os.close(fd)


def busy(stop: threading.Event) -> None:
    """The harness's own Python work, holding the interpreter between switches."""
    while not stop.is_set():
        sum(i * i for i in range(2000))


def one_death(pid_dir: Path, new: DeathWatch, old: OneThreadWatch) -> tuple[ProcId, float]:
    """Start a child, record it, wait until both watches hold it, let it die: its id and the
    moment it noted right before its SIGKILL."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        pid_id = proc_id(child.pid)
        assert pid_id is not None
        (pid_dir / f"{pid_id.pid}-{pid_id.ticks}").write_text("{}")
        if not new.wait_watching(pid_id, 30):
            raise SystemExit("the death watch never picked up a record")
        while pid_id not in old.watched:
            time.sleep(SCAN_INTERVAL_S)
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        noted = float(child.stdout.readline())
        child.wait(timeout=30)
        return pid_id, noted
    finally:
        child.kill()
        child.wait(timeout=30)


def summary(name: str, lags_ms: list[float]) -> str:
    q = statistics.quantiles(lags_ms, n=10)
    return (
        f"{name:<24} median {statistics.median(lags_ms):6.2f} ms   p90 {q[-1]:6.2f} ms   "
        f"max {max(lags_ms):6.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deaths", type=int, default=30, help="deaths to stamp (default 30)")
    parser.add_argument("--hogs", type=int, default=4, help="busy processes (default 4)")
    args = parser.parse_args()
    if not DeathWatch.available():
        print("no pidfd_open or epoll here: nothing to measure")
        return 0
    began = time.monotonic()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    stop = threading.Event()
    worker = threading.Thread(target=busy, args=(stop,), daemon=True)
    worker.start()
    try:
        with tempfile.TemporaryDirectory(prefix="death-stamp-") as folder:
            pid_dir = Path(folder)
            new, old = DeathWatch(pid_dir).start(), OneThreadWatch(pid_dir).start()
            deaths = []
            try:
                for _ in range(args.deaths):
                    if time.monotonic() - began > DEADLINE_S:
                        break
                    deaths.append(one_death(pid_dir, new, old))
            finally:
                new_moments, old_moments = new.stop(), old.stop()
    finally:
        stop.set()
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=30)
    pairs = [
        ((new_moments[p] - t) * 1000, (old_moments[p] - t) * 1000)
        for p, t in deaths
        if p in new_moments and p in old_moments
    ]
    if len(pairs) < 2:
        print(f"only {len(pairs)} deaths stamped by both watches: nothing to compare")
        return 1
    new_lags, old_lags = [a for a, _ in pairs], [b for _, b in pairs]
    print(f"{len(pairs)} deaths, {args.hogs} busy processes on {os.cpu_count()} cores")
    print(summary("harness thread (before)", old_lags))
    print(summary("own process (now)", new_lags))
    ratio = statistics.median(old_lags) / max(statistics.median(new_lags), 1e-6)
    p90 = statistics.quantiles(old_lags, n=10)[-1] / max(
        statistics.quantiles(new_lags, n=10)[-1], 1e-6
    )
    print(f"ratio before/now: median {ratio:.1f}x, p90 {p90:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
