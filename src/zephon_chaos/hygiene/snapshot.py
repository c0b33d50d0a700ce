"""Before/after snapshots of what a test could leak, and the verdict comparing them.

A leak is: a recorded process still alive, a child of this process still alive, a port this
process (or a recorded process) listens on that was not listening before, or a ``zephon*`` /
``torchelastic_*`` entry in the temp area or ``/dev/shm`` that appeared during the test and
that no live process holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from zephon_chaos.launch.procs import ProcessRegistry, ProcId, proc_id

LEAK_PREFIXES = ("zephon", "torchelastic_")
SHM_DIR = Path("/dev/shm")


def temp_roots() -> list[Path]:
    roots = [Path(tempfile.gettempdir())]
    if SHM_DIR.is_dir():
        roots.append(SHM_DIR)
    return roots


def our_entries(roots: Iterable[Path]) -> set[Path]:
    found: set[Path] = set()
    for root in roots:
        with contextlib.suppress(OSError):
            for entry in os.scandir(root):
                if entry.name.startswith(LEAK_PREFIXES):
                    found.add(Path(entry.path))
    return found


def held_paths() -> set[str]:
    """Paths some live process has open or mapped (shared memory segments, mostly)."""
    held: set[str] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{name}/fd"):
                with contextlib.suppress(OSError):
                    held.add(os.readlink(f"/proc/{name}/fd/{fd}"))
        with contextlib.suppress(OSError), open(f"/proc/{name}/maps") as maps:
            for line in maps:
                if "/dev/shm/" in line:
                    held.add(line.split(None, 5)[-1].strip())
    return held


def listening_ports_of(pids: Iterable[int]) -> set[int]:
    ports: set[int] = set()
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for c in psutil.Process(pid).net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN and c.laddr:
                    ports.add(c.laddr.port)
    return ports


def live_children() -> set[ProcId]:
    found: set[ProcId] = set()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.status() != psutil.STATUS_ZOMBIE:
                    pid_id = proc_id(child.pid)
                    if pid_id is not None:
                        found.add(pid_id)
    return found


@dataclass
class Resources:
    """What one test (or one run) started: registries, ports it opened, its private dirs."""

    registries: list[ProcessRegistry] = field(default_factory=list)
    ports: set[int] = field(default_factory=set)
    dirs: list[Path] = field(default_factory=list)

    def all_recorded(self) -> set[ProcId]:
        out: set[ProcId] = set()
        for registry in self.registries:
            out |= registry.refresh()
        return out


@dataclass
class Snapshot:
    children: set[ProcId]
    ports: set[int]
    entries: set[Path]

    @classmethod
    def take(cls) -> Snapshot:
        return cls(
            children=live_children(),
            ports=listening_ports_of([os.getpid()]),
            entries=our_entries(temp_roots()),
        )


@dataclass
class Leaks:
    processes: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.ports or self.entries)

    def describe(self) -> str:
        lines = ["the test left things behind (processes now killed, temp entries now deleted):"]
        lines += [f"  process {p}" for p in self.processes]
        lines += [f"  listening port {p}" for p in self.ports]
        lines += [f"  temp entry {e}" for e in self.entries]
        lines.append(
            "Way out: stop what you start (use the torchrun_group/toxiproxy fixtures, or close "
            "stores and sockets), or mark the test no_chaos_hygiene if the leak is intended."
        )
        return "\n".join(lines)


def find_and_remove_leaks(before: Snapshot, resources: Resources) -> Leaks:
    """Compare with ``before``; kill, close and delete what leaked; say what it was."""
    leaks = Leaks()
    recorded = {p for p in resources.all_recorded() if p.alive()}
    children = live_children() - before.children
    for p in sorted(recorded | children):
        leaks.processes.append(f"{p.pid} ({p.cmdline()[:120]})")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, 9)
    for registry in resources.registries:
        registry.kill_all()
    now_listening = listening_ports_of([os.getpid()]) - before.ports
    leaks.ports = sorted(now_listening | (resources.ports & listening_ports_of([os.getpid()])))
    for d in resources.dirs:
        if d.exists():
            leaks.entries.append(str(d))
            shutil.rmtree(d, ignore_errors=True)
    new_entries = our_entries(temp_roots()) - before.entries
    if new_entries:
        held = held_paths()
        for entry in sorted(new_entries):
            if str(entry) in held:
                continue
            leaks.entries.append(str(entry))
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
    return leaks
