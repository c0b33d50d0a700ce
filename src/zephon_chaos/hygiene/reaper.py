"""Find and remove what crashed runs left: processes, the ports they hold, folders, segments.

A session is crashed when its ledger (under ``<temp>/zephon-chaos-<uid>/sessions/``) outlives
its pytest process. Two strengths:

* ``precise`` (every session's start-up and end, and when an xdist worker dies): the processes
  whose ``ZEPHON_CHAOS_OWNER`` names a crashed session of this root, the processes its group
  registries recorded, its folders, and torch shared-memory segments whose creator is gone.
* ``thorough`` (``zephon-chaos clean``) adds group processes whose launcher died (their parent
  differs from the one their spawn record names) unless a live session owns them, and
  ``zephon*`` / ``torchelastic_*`` / ``zc-*`` temp entries and ``/dev/shm`` entries that no
  live process holds and no live session lists.

Owners are matched through the ledgers of one root, so sessions under another TMPDIR (a test
that runs pytest inside pytest, say) are left to their own root's reaper.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from zephon_chaos.hygiene.ledger import live_paths, stale_ledgers
from zephon_chaos.hygiene.owner import PRIVATE_PREFIX, parse_owner, session_alive
from zephon_chaos.hygiene.proctable import (
    ProcInfo,
    held_paths,
    is_held,
    listening_ports_of,
    our_processes,
)
from zephon_chaos.procs import PID_DIR_VAR, ProcId, recorded_procs

SHM_DIR = Path("/dev/shm")
TEMP_PREFIXES = ("zephon", "torchelastic_", "zc-")
SHM_PREFIXES = ("zephon", "torchelastic_")
_TORCH_SHM = re.compile(r"^torch_(?P<pid>\d+)_")
KILL_WAIT_S = 5.0


@dataclass
class Cleanup:
    """What was (or, in a dry run, would be) removed, one line each, with the reason."""

    dry_run: bool = False
    processes: list[str] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.ports or self.dirs or self.entries or self.problems)

    def count(self) -> int:
        return len(self.processes) + len(self.dirs) + len(self.entries)

    def describe(self) -> str:
        if not self:
            return "nothing to remove: no leftovers of crashed runs found"
        verb = "would remove" if self.dry_run else "removed"
        lines = [f"{verb}:"]
        lines += [f"  process {p}" for p in self.processes]
        lines += [f"  port {p}" for p in self.ports]
        lines += [f"  folder {d}" for d in self.dirs]
        lines += [f"  entry {e}" for e in self.entries]
        lines += [f"  could not remove: {p}" for p in self.problems]
        return "\n".join(lines)


def reap(
    root: Path | None,
    *,
    thorough: bool = False,
    dry_run: bool = False,
    temp_dir: Path | None = None,
) -> Cleanup:
    """Remove leftovers of dead owners (see the module docstring); say what, and why."""
    done = Cleanup(dry_run=dry_run)
    crashed = stale_ledgers(root) if root is not None else []
    temp = Path(temp_dir or tempfile.gettempdir())
    sessions = {r.session for _, r in crashed} | {f.name for f, _ in crashed}
    _kill(stale_processes(sessions, orphans_under=temp if thorough else None), done)
    for folder, record in crashed:
        leftovers = _recorded_alive(record.pid_dirs)
        _kill([(p, f"recorded by crashed session {record.session}") for p in leftovers], done)
        for path in [*record.dirs, *record.pid_dirs, str(folder)]:
            _remove(Path(path), f"of crashed session {record.session} "
                    f"({' '.join(record.argv[:4])})", done)
    _shm_segments(done, thorough)
    if thorough:
        _temp_entries(temp, root, done)
    return done


def stale_processes(
    crashed_sessions: set[str], orphans_under: Path | None = None
) -> list[tuple[ProcInfo, str]]:
    """Our processes owned by a crashed session, and (with ``orphans_under``) group processes
    recording under that folder whose launcher died and that no live session owns; with the
    reason. Whole groups go together."""
    procs = our_processes()
    chosen: dict[ProcId, tuple[ProcInfo, str]] = {}
    for info in procs:
        session = parse_owner(info.owner)[0] if info.owner else None
        if session is not None and session in crashed_sessions:
            chosen[info.proc] = (info, f"its pytest session ({session}) crashed")
        elif (
            orphans_under is not None
            and info.tag
            and _under(info.env.get(PID_DIR_VAR), orphans_under)
            and (session is None or not session_alive(session))
        ):
            reason = _orphaned(info)
            if reason:
                chosen[info.proc] = (info, reason)
    stale_tags = {info.tag for info, _ in chosen.values() if info.tag}
    for info in procs:
        if info.proc in chosen or info.tag not in stale_tags:
            continue
        if info.owner and session_alive(parse_owner(info.owner)[0]):
            continue
        chosen[info.proc] = (info, f"its group {info.tag} is being removed")
    return sorted(chosen.values(), key=lambda pr: pr[0].proc)


def _under(path: str | None, folder: Path) -> bool:
    return bool(path) and (path + "/").startswith(str(folder).rstrip("/") + "/")


def _orphaned(info: ProcInfo) -> str | None:
    """Why a group process without an owner is an orphan: its spawn record names another
    parent (a process's parent changes only when the parent dies)."""
    pid_dir = info.env.get(PID_DIR_VAR)
    if not pid_dir:
        return None
    record = Path(pid_dir) / f"{info.proc.pid}-{info.proc.ticks}"
    try:
        recorded = json.loads(record.read_text() or "{}").get("ppid")
    except (OSError, ValueError):
        return None
    if isinstance(recorded, int) and recorded != info.ppid:
        return f"its launcher (pid {recorded}) is gone; re-parented to pid {info.ppid}"
    return None


def _recorded_alive(pid_dirs: list[str]) -> list[ProcInfo]:
    alive: list[ProcInfo] = []
    for pid_dir in pid_dirs:
        alive += [ProcInfo(proc, 0) for proc in recorded_procs(Path(pid_dir)) if proc.alive()]
    return alive


def _kill(targets: list[tuple[ProcInfo, str]], done: Cleanup) -> None:
    if not targets:
        return
    ports = listening_ports_of(info.proc.pid for info, _ in targets)
    for info, reason in targets:
        done.processes.append(f"{info.proc.pid} ({info.cmdline()}): {reason}")
        if done.dry_run:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(info.proc.pid, signal.SIGKILL)
            os.kill(info.proc.pid, signal.SIGCONT)
    done.ports += [f"{port} (held by pid {pid})" for port, pid in sorted(ports.items())]
    if done.dry_run:
        return
    end = time.monotonic() + KILL_WAIT_S
    while any(info.proc.alive() for info, _ in targets) and time.monotonic() < end:
        time.sleep(0.02)  # the kernel gives no event for "died elsewhere"
    for info, _ in targets:
        if info.proc.alive():
            done.problems.append(f"process {info.proc.pid} survived SIGKILL (uninterruptible?)")


def _remove(path: Path, why: str, done: Cleanup, bucket: str = "dirs") -> None:
    if not os.path.lexists(path):
        return
    getattr(done, bucket).append(f"{path}: {why}")
    if done.dry_run:
        return
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError as exc:
        done.problems.append(f"{path}: {exc.strerror or exc}")


def _shm_segments(done: Cleanup, thorough: bool) -> None:
    """torch segments whose creator is gone; with ``thorough``, our prefixes too."""
    try:
        names = sorted(os.listdir(SHM_DIR))
    except OSError:
        return
    candidates: list[tuple[Path, str]] = []
    for name in names:
        m = _TORCH_SHM.match(name)
        if m and not Path(f"/proc/{m['pid']}").exists():
            candidates.append((SHM_DIR / name, f"its creator (pid {m['pid']}) is gone"))
        elif thorough and name.startswith(SHM_PREFIXES):
            candidates.append((SHM_DIR / name, "no live process holds it"))
    if not candidates:
        return
    held = held_paths()
    for path, why in candidates:
        if not is_held(path, held):
            _remove(path, why, done, bucket="entries")


def _temp_entries(temp: Path, root: Path | None, done: Cleanup) -> None:
    """Our prefixes in the temp folder that nothing live holds, lists, or points into."""
    try:
        names = sorted(os.listdir(temp))
    except OSError:
        return
    keep = {f"{PRIVATE_PREFIX}{os.getuid()}", f"zephon-{os.getuid()}"}
    candidates = [temp / n for n in names if n.startswith(TEMP_PREFIXES) and n not in keep]
    if not candidates:
        return
    listed = live_paths(root) if root is not None else set()
    held = held_paths()
    held |= {p for info in our_processes() for p in info.env.values() if p.startswith("/")}
    for path in candidates:
        if is_held(path, listed) or is_held(path, held):
            continue
        _remove(path, "no live process holds it and no live session lists it", done, "entries")
