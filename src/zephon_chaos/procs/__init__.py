"""Every process a launch starts, recorded at spawn, and killed as a whole at the end.

Three sources, so that no orphan escapes: the PIDs of the agents we spawn, the PIDs that each
Python interpreter of the group writes at start-up (``_spawnhook``), and a scan for the group's
environment tag (for non-Python children). Identity is (pid, start ticks), so a recycled PID is
never mistaken for ours.

A leaf of the stack, below the workload: ranks use it (``workload.self_faults``) as much as the
launcher does. Its two helpers run by path, standard library only, and import nothing of the
package: ``_spawnhook`` (first on every group's ``PYTHONPATH``) and ``_deathstamp`` (the death
watch's ``python -I`` process, ``launch.deathwatch``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

# The stamper's parsing of /proc and of the records (it may import only the standard
# library), and the folders the spawn hook writes its notes in: their own names, not copies.
from zephon_chaos.procs._deathstamp.stamper import recorded
from zephon_chaos.procs._deathstamp.stamper import start_ticks as start_ticks
from zephon_chaos.procs._deathstamp.stamper import stat_field as stat_field
from zephon_chaos.procs._spawnhook.sitecustomize import EXITS_SUBDIR, RAISED_SUBDIR

TAG_VAR = "ZEPHON_CHAOS_GROUP"
PID_DIR_VAR = "ZEPHON_CHAOS_PID_DIR"
SPAWNHOOK_DIR = str(Path(__file__).with_name("_spawnhook"))


def recorded_procs(folder: Path) -> set[ProcId]:
    """The processes named by ``<pid>-<start ticks>`` entries of ``folder`` (the spawn
    hook's records and notes); other entries are passed over."""
    return {ProcId(pid, ticks) for pid, ticks in recorded(folder)}


def read_notes(pid_dir: Path, subdir: str) -> dict[ProcId, str]:
    """The notes processes of a launch leave about themselves: files named
    ``<pid>-<start ticks>`` under ``pid_dir/subdir``, with their text."""
    notes: dict[ProcId, str] = {}
    for proc in recorded_procs(pid_dir / subdir):
        with contextlib.suppress(OSError):
            notes[proc] = (pid_dir / subdir / f"{proc.pid}-{proc.ticks}").read_text().strip()
    return notes


def exit_notes(pid_dir: Path) -> dict[ProcId, float]:
    """When each noted process of a launch began to exit (``CLOCK_MONOTONIC``)."""
    return moment_notes(pid_dir, EXITS_SUBDIR)


def raise_notes(pid_dir: Path) -> dict[ProcId, float]:
    """When each rank of a launch whose error left its ``main`` recorded it."""
    return moment_notes(pid_dir, RAISED_SUBDIR)


def moment_notes(pid_dir: Path, subdir: str) -> dict[ProcId, float]:
    notes: dict[ProcId, float] = {}
    for proc, text in read_notes(pid_dir, subdir).items():
        with contextlib.suppress(ValueError):
            notes[proc] = float(text)
    return notes


@dataclass(frozen=True, order=True)
class ProcId:
    """A process identity that survives PID reuse: the PID and its start time in clock ticks."""

    pid: int
    ticks: int

    def alive(self) -> bool:
        """True while this very process exists and is not a zombie."""
        ticks = start_ticks(self.pid)
        if ticks is None or ticks != self.ticks:
            return False
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def cmdline(self) -> str:
        try:
            return " ".join(psutil.Process(self.pid).cmdline())
        except psutil.Error:
            return "?"


def proc_id(pid: int) -> ProcId | None:
    ticks = start_ticks(pid)
    return None if ticks is None else ProcId(pid, ticks)


@dataclass
class ProcessRegistry:
    """The processes of one launch (or one test): recorded, scanned, killed, verified."""

    tag: str
    pid_dir: Path
    known: set[ProcId] = field(default_factory=set)
    killed_by_us: dict[int, int] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """Variables that make every process of the group record itself and carry the tag."""
        return {TAG_VAR: self.tag, PID_DIR_VAR: str(self.pid_dir)}

    def add(self, pid: int) -> None:
        pid_id = proc_id(pid)
        if pid_id is not None:
            self.known.add(pid_id)

    def refresh(self) -> set[ProcId]:
        """Merge the spawn records and a scan for the tag into ``known``; return it."""
        self.known.update(recorded_procs(self.pid_dir))
        self.known.update(scan_tag(self.tag))
        return self.known

    def survivors(self) -> list[ProcId]:
        return sorted(p for p in self.refresh() if p.alive())

    def signal(self, target: ProcId, sig: int) -> bool:
        """Send ``sig`` to one recorded process (checked against PID reuse); True if sent."""
        if not target.alive():
            return False
        try:
            os.kill(target.pid, sig)
        except ProcessLookupError:
            return False
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.killed_by_us[target.pid] = sig
        return True

    def kill_all(self, grace_s: float = 0.0, deadline_s: float = 10.0) -> list[ProcId]:
        """Kill every recorded process (SIGCONT first, so stopped ones die); return survivors.

        Loops until nothing new appears: a dying agent may still spawn or re-parent children.
        """
        if grace_s > 0:
            for p in self.survivors():
                self.signal(p, signal.SIGTERM)
            _wait_until(lambda: not self.survivors(), grace_s)
        end = time.monotonic() + deadline_s
        while True:
            alive = self.survivors()
            if not alive:
                return []
            for p in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p.pid, signal.SIGKILL)
                    self.killed_by_us.setdefault(p.pid, signal.SIGKILL)
                    os.kill(p.pid, signal.SIGCONT)
            if time.monotonic() > end:
                return self.survivors()
            _wait_until(lambda: not self.survivors(), 0.5)


def pids_with_env(var: str, value: str) -> list[int]:
    """PIDs of live processes (but this one) whose environment carries ``var=value``: the
    marker a launch leaves in everything it starts, however far it was reparented (root or
    same user)."""
    needle = f"{var}={value}".encode() + b"\0"
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                data = f.read() + b"\0"
        except OSError:
            continue
        if needle in data:
            found.append(int(name))
    return found


def kill_with_env(var: str, value: str, rounds: int = 50) -> int:
    """SIGKILL every process whose environment carries ``var=value`` until none is left (a
    dying parent may still start or re-parent children); how many there were."""
    seen: set[int] = set()
    for _ in range(rounds):
        pids = pids_with_env(var, value)
        if not pids:
            break
        seen.update(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
        # Killed processes linger as zombies until reaped; wait for the table to say so.
        _wait_until(lambda pids=pids: not set(pids) & set(pids_with_env(var, value)), 0.05)
    return len(seen)


def scan_tag(tag: str) -> set[ProcId]:
    """Processes whose environment carries ``ZEPHON_CHAOS_GROUP=tag`` (root or same user)."""
    ids = (proc_id(pid) for pid in pids_with_env(TAG_VAR, tag))
    return {pid_id for pid_id in ids if pid_id is not None}


def _wait_until(predicate: object, timeout_s: float) -> bool:
    """Poll a condition of the kernel's process table (no event exists for 'died elsewhere')."""
    assert callable(predicate)
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True
