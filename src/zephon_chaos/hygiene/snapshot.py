"""Before/after snapshots of what a test could leak, and the verdict comparing them.

A leak is what the test started and did not stop:

* a process: recorded by a group at spawn, a child of this process that was not there
  before, or any process carrying this test's owner token (so an orphan re-parented to init
  still counts) — killed, with the ports it listened on;
* a listening port of this process that was not listening before, or one the test registered;
* a network namespace of a host network the test made (``launch.netns``), or a link of the
  machine's own namespace named with that network's token (none is ever made there);
* a temp entry: anything left in the test's private TMPDIR, a private directory a fixture
  registered, or a ``/dev/shm`` segment that appeared, that no live process holds, and that is
  ours (``zephon*``/``torchelastic_*``/``torch_*``) and names a PID of the test's processes
  (``torch_<pid>_*``): other ``/dev/shm`` leftovers cannot be attributed to one test and are
  ``zephon-chaos clean``'s.

Entries in the shared temp folder are not diffed: other sessions (and xdist workers) create
them concurrently, and a verdict must never blame or delete what another test owns. Tests
get their own TMPDIR instead, so what they create there is theirs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from zephon_chaos.hygiene.owner import OWNER_VAR
from zephon_chaos.hygiene.proctable import held_paths, is_held, listening_ports_of, our_processes
from zephon_chaos.launch.netns import HostNetwork, delete_namespace, named_namespaces
from zephon_chaos.procs import ProcessRegistry, ProcId, proc_id

LEAK_PREFIXES = ("zephon", "torchelastic_")
SHM_DIR = Path("/dev/shm")
ROOT_LINKS = "/sys/class/net"
_NUMBERS = re.compile(r"\d+")
KILL_WAIT_S = 5.0
MAX_LISTED = 20

T = TypeVar("T")


class _Journal(list[T]):
    """A list that tells its owner about each item added (the session ledger listens)."""

    def __init__(self, items: Iterable[T] = (), on_add: Callable[[T], None] | None = None):
        super().__init__(items)
        self.on_add = on_add

    def append(self, item: T) -> None:
        super().append(item)
        if self.on_add is not None:
            self.on_add(item)

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)


def shm_entries() -> set[str]:
    with contextlib.suppress(OSError):
        return set(os.listdir(SHM_DIR))
    return set()


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
    """What one test started through the plugin: registries, ports it opened, private dirs.

    ``on_registry`` / ``on_dir`` hear of each addition (the session ledger writes them down,
    so a crashed session's leftovers can be found).
    """

    registries: list[ProcessRegistry] = field(default_factory=list)
    ports: set[int] = field(default_factory=set)
    dirs: list[Path] = field(default_factory=list)
    networks: list[HostNetwork] = field(default_factory=list)
    on_registry: Callable[[ProcessRegistry], None] | None = None
    on_dir: Callable[[Path], None] | None = None

    def __post_init__(self) -> None:
        self.registries = _Journal(self.registries, self.on_registry)
        self.dirs = _Journal(self.dirs, self.on_dir)

    def all_recorded(self) -> set[ProcId]:
        out: set[ProcId] = set()
        for registry in self.registries:
            out |= registry.refresh()
        return out

    def kill_all(self) -> None:
        """Stop every recorded process now (on an interrupt, before teardown unwinds)."""
        for registry in list(self.registries):
            with contextlib.suppress(Exception):
                registry.kill_all(deadline_s=3.0)


@dataclass
class Snapshot:
    children: set[ProcId]
    ports: set[int]
    shm: set[str]

    @classmethod
    def take(cls) -> Snapshot:
        return cls(
            children=live_children(),
            ports=set(listening_ports_of([os.getpid()])),
            shm=shm_entries(),
        )


@dataclass
class Leaks:
    processes: list[str] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.ports or self.entries or self.networks)

    def count(self) -> int:
        return len(self.processes) + len(self.ports) + len(self.entries) + len(self.networks)

    def describe(self) -> str:
        lines = ["the test left things behind (processes now killed, temp entries now deleted):"]
        lines += [f"  process {p}" for p in self.processes]
        lines += [f"  listening port {p}" for p in self.ports]
        lines += [f"  temp entry {e}" for e in self.entries]
        lines += [f"  network {n}" for n in self.networks]
        lines.append(
            "Way out: stop what you start (use the torchrun_group/toxiproxy fixtures, or close "
            "stores and sockets, and remove temp files), or mark the test no_chaos_hygiene if "
            "the leak is intended."
        )
        return "\n".join(lines)

    def properties(self) -> list[tuple[str, Any]]:
        """Counts as JUnit properties (``benchmarks/reliability.py`` sums them)."""
        return [
            ("hygiene.leaked_processes", len(self.processes)),
            ("hygiene.leaked_ports", len(self.ports)),
            ("hygiene.leaked_entries", len(self.entries)),
            ("hygiene.leaked_networks", len(self.networks)),
        ]


def find_and_remove_leaks(
    before: Snapshot,
    resources: Resources,
    token: str | None = None,
    test_tmp: Path | None = None,
    exempt: set[ProcId] | None = None,
) -> Leaks:
    """Compare with ``before``; kill, close and delete what leaked; say what it was.

    ``exempt``: processes session-scoped fixtures started during the test (not its leaks).
    """
    leaks = Leaks()
    recorded = {p for p in resources.all_recorded() if p.alive()}
    children = live_children() - before.children - (exempt or set())
    tokened = {
        info.proc for info in our_processes([OWNER_VAR]) if token and info.owner == token
    }
    leaked = sorted(recorded | children | tokened)
    ours = {p.pid for p in resources.all_recorded()} | {p.pid for p in leaked}
    held_by_leaked = listening_ports_of(p.pid for p in leaked)
    for p in leaked:
        how = "orphan, " if p in tokened and p not in recorded | children else ""
        leaks.processes.append(f"{p.pid} ({how}{' '.join(p.cmdline().split())[:120]})")
    _kill(leaked)
    for registry in resources.registries:
        registry.kill_all()
    for port, pid in sorted(held_by_leaked.items()):
        leaks.ports.append(f"{port} (held by leaked pid {pid})")
    mine_now = set(listening_ports_of([os.getpid()]))
    for port in sorted((mine_now - before.ports) | (resources.ports & mine_now)):
        leaks.ports.append(f"{port} (held by this pytest process: close the socket or server)")
    for d in resources.dirs:
        if d.exists():
            leaks.entries.append(str(d))
            shutil.rmtree(d, ignore_errors=True)
    if test_tmp is not None:
        leaks.entries += _empty(test_tmp)
    leaks.networks += _left_networks(resources.networks)
    leaks.entries += _new_shm(before.shm, ours)
    return leaks


def _left_networks(networks: list[HostNetwork]) -> list[str]:
    """Namespaces of the test's host networks that still exist, and links of the machine's
    own namespace carrying their tokens (listed, then removed)."""
    if not networks:
        return []
    found = []
    names = named_namespaces()
    for net in networks:
        for name in net.names:
            if name in names:
                found.append(f"namespace {name}")
                with contextlib.suppress(Exception):
                    delete_namespace(name)
    with contextlib.suppress(OSError):
        for link in sorted(os.listdir(ROOT_LINKS)):
            if any(net.token in link for net in networks):
                found.append(f"link {link} in the machine's own namespace")
    return found


def _kill(procs: list[ProcId]) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, signal.SIGKILL)
            os.kill(p.pid, signal.SIGCONT)
    end = time.monotonic() + KILL_WAIT_S
    while any(p.alive() for p in procs) and time.monotonic() < end:
        time.sleep(0.02)  # no event exists for "a process that is not our child died"


def _empty(folder: Path) -> list[str]:
    """Everything left in the test's TMPDIR (listed, then removed)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = [str(folder / n) for n in names[:MAX_LISTED]]
    if len(names) > MAX_LISTED:
        found.append(f"... and {len(names) - MAX_LISTED} more in {folder}")
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return found


def _new_shm(before: set[str], pids: set[int]) -> list[str]:
    """New, unheld ``/dev/shm`` entries of ours whose name carries a PID of this test's
    processes (torch names its segments ``torch_<pid>_...``). ``/dev/shm`` is shared by every
    session on the host: a segment that names no PID of ours cannot be told from another
    test's, so it is left to ``zephon-chaos clean``."""
    new = sorted(shm_entries() - before)
    mine = pids | {os.getpid()}
    ours = []
    for name in new:
        if not name.startswith((*LEAK_PREFIXES, "torch_")):
            continue
        if {int(n) for n in _NUMBERS.findall(name)} & mine:
            ours.append(SHM_DIR / name)
    if not ours:
        return []
    held = held_paths()
    found = []
    for path in ours:
        if is_held(path, held):
            continue
        found.append(str(path))
        with contextlib.suppress(OSError):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    return found
