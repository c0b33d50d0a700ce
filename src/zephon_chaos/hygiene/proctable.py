"""One pass over ``/proc``: our processes (by the variables they carry), their ports, held paths.

Reading ``/proc/<pid>/environ`` needs the same user or root; processes we cannot read are
not ours to judge, so they are skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from zephon_chaos.hygiene.owner import OWNER_VAR
from zephon_chaos.procs import PID_DIR_VAR, TAG_VAR, ProcId, proc_id, stat_field

WATCHED_VARS = (OWNER_VAR, TAG_VAR, PID_DIR_VAR)


@dataclass
class ProcInfo:
    """A live process that carries at least one of our variables."""

    proc: ProcId
    ppid: int
    env: dict[str, str] = field(default_factory=dict)

    @property
    def owner(self) -> str | None:
        return self.env.get(OWNER_VAR)

    @property
    def tag(self) -> str | None:
        return self.env.get(TAG_VAR)

    def cmdline(self) -> str:
        return " ".join(self.proc.cmdline().split())[:160]


def our_processes(names: Iterable[str] = WATCHED_VARS) -> list[ProcInfo]:
    """Every live, non-zombie process (not this one) whose environment sets one of ``names``."""
    wanted = tuple(f"{n}=".encode() for n in names)
    me = os.getpid()
    found: list[ProcInfo] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        if not any(w in raw for w in wanted):
            continue
        env: dict[str, str] = {}
        for item in raw.split(b"\0"):
            if item.startswith(wanted):
                key, _, value = item.decode(errors="replace").partition("=")
                env[key] = value
        pid_id = proc_id(int(entry))
        ppid = _ppid(int(entry))
        if pid_id is None or ppid is None or not pid_id.alive():
            continue
        found.append(ProcInfo(pid_id, ppid, env))
    return found


def _ppid(pid: int) -> int | None:
    ppid = stat_field(pid, 1)
    return int(ppid) if ppid is not None and ppid.isdigit() else None


def listening_ports_of(pids: Iterable[int]) -> dict[int, int]:
    """``{port: pid}`` of the TCP ports in LISTEN state that ``pids`` hold."""
    ports: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for c in psutil.Process(pid).net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN and c.laddr:
                    ports.setdefault(c.laddr.port, pid)
    return ports


def held_paths() -> set[str]:
    """Paths a live process has open, mapped, or as its working directory."""
    held: set[str] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            held.add(os.readlink(f"/proc/{name}/cwd"))
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{name}/fd"):
                with contextlib.suppress(OSError):
                    held.add(os.readlink(f"/proc/{name}/fd/{fd}"))
        with contextlib.suppress(OSError), open(f"/proc/{name}/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    held.add(parts[5].strip().removesuffix(" (deleted)"))
    return held


def is_held(path: Path, held: set[str]) -> bool:
    """True if ``path`` or anything under it is in ``held``."""
    text = str(path)
    prefix = text.rstrip("/") + "/"
    return text in held or any(h.startswith(prefix) for h in held)
