"""Stamps the death of every process recorded in a folder, from a process of its own.

Run by ``launch.deathwatch`` as ``python -I stamper.py FOLDER``: the standard library only, so
it starts in milliseconds and imports nothing of the harness. Why a process: a pidfd becomes
readable the moment its process exits, but a thread of the harness that wakes on it must take
the harness's interpreter lock before it can read the clock, up to a switch interval (5 ms)
or more behind the harness's own threads; here nothing else holds it. Where it may (root), it
also raises its scheduling priority: it is idle until a death.

Protocol, one line each on stdout: ``w PID TICKS`` once a process is watched, ``d PID TICKS
MONOTONIC`` when it died. It ends when its stdin closes, after the deaths already seen.
A record is a file ``<pid>-<start ticks>`` (the spawn hook's); a process dead or recycled when
first seen is not watched, so it never gets a late stamp.

``procs`` (the package above) takes its ``/proc`` parsing and its reading of the records from
here, so that this process and the harness read them alike without this one importing the harness.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time

SCAN_INTERVAL_S = 0.02
"""How often new records are looked for: a process recorded less than this before it dies
may go unstamped (then the exit notes and torchelastic decide)."""
NICE = -10


def stat_field(pid: int, index: int) -> str | None:
    """Field ``index`` of ``/proc/<pid>/stat`` counted after the command name (0: the state
    letter, 1: the parent's PID, 19: the start time in ticks), or None if ``pid`` is gone.
    Split after the last ``)``: the command name may hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[index].decode()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    ticks = stat_field(pid, 19)
    return int(ticks) if ticks is not None and ticks.isdigit() else None


def recorded(folder: str | os.PathLike[str]) -> set[tuple[int, int]]:
    """The (pid, start ticks) named by the ``<pid>-<ticks>`` entries of ``folder``; other
    entries are passed over."""
    found: set[tuple[int, int]] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            pid, _, ticks = name.partition("-")
            if pid.isdigit() and ticks.isdigit():
                found.add((int(pid), int(ticks)))
    return found


def pidfd_of_living(pid: int, ticks: int) -> int | None:
    """A pidfd of the process if it is this very one and alive, else None."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    check = select.poll()
    check.register(fd, select.POLLIN)
    if start_ticks(pid) != ticks or check.poll(0):
        os.close(fd)
        return None
    return fd


class Stamper:
    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.epoll = select.epoll()
        self.fds: dict[int, tuple[int, int]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def say(self, line: str) -> None:
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def scan(self) -> None:
        seen: set[tuple[int, int]] = set()
        while not self.stop.is_set():
            for pid, ticks in recorded(self.folder) - seen:
                seen.add((pid, ticks))
                fd = pidfd_of_living(pid, ticks)
                if fd is None:
                    continue
                with self.lock:
                    self.fds[fd] = (pid, ticks)
                self.say(f"w {pid} {ticks}")
                self.epoll.register(fd, select.EPOLLIN)
            self.stop.wait(SCAN_INTERVAL_S)

    def run(self) -> None:
        stdin = sys.stdin.fileno()
        self.epoll.register(stdin, select.EPOLLIN | select.EPOLLHUP)
        scanner = threading.Thread(target=self.scan, daemon=True)
        scanner.start()
        ending = False
        while not ending:
            events = self.epoll.poll()
            now = time.monotonic()
            for fd, _ in sorted(events, key=lambda e: e[0] == stdin):  # deaths first
                if fd == stdin:
                    ending = True
                    continue
                with self.lock:
                    pid, ticks = self.fds.pop(fd)
                self.epoll.unregister(fd)
                os.close(fd)
                self.say(f"d {pid} {ticks} {now!r}")
        self.stop.set()
        scanner.join()


def main() -> None:
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    Stamper(sys.argv[1]).run()


if __name__ == "__main__":
    main()
