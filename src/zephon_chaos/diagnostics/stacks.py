"""Stacks of every live process of a group, taken at its deadline, before the tree is killed.

py-spy reads a process's memory over ptrace: it needs no cooperation and works on a stopped
process. Where ptrace is not permitted (a hardened kernel, a container without
``CAP_SYS_PTRACE``) the spawn hook's faulthandler answers SIGUSR1 instead: it writes every
thread's stack into the process's own file. A stopped process cannot run a signal handler, so
for that fallback it is sent SIGCONT as well (it is killed right after anyway) and the dump
says so. Capture is bounded as a whole: a hang is never made longer by its diagnosis.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from zephon_chaos.diagnostics.frames import main_thread, parse_stacks

if TYPE_CHECKING:  # types only: diagnostics sits below launch, which calls it at a deadline
    from zephon_chaos.launch.group import TorchrunGroup
    from zephon_chaos.procs import ProcId

PYSPY_VAR = "ZEPHON_CHAOS_PYSPY"
"""Path of the py-spy binary; ``off`` skips py-spy (to exercise the faulthandler fallback)."""
STACK_SIGNAL_VAR = "ZEPHON_CHAOS_STACK_SIGNAL"
STACKS_SUBDIR = "stacks"
TOTAL_BUDGET_S = 8.0
PER_CALL_S = 5.0
_POLL_S = 0.02


class Who(str):
    """How a capture names a process (the text reports show), carrying what it is as values:
    its ``role`` (``rank``, ``agent``, ``child`` of a rank, or another ``process``), the rank
    it is or belongs to (``rank``; an agent's node) and its ``pid``. A str, so that reports,
    JSON and every reader of stacks by name take it as the text it is; a reader that needs to
    know whose stack it reads (a known hang's proof: every worker of one rank) reads the
    values, never the text."""

    role: str
    rank: int | None
    pid: int

    def __new__(cls, role: str, rank: int | None, pid: int) -> Who:
        owner = {"rank": f"rank {rank}", "agent": f"agent {rank}", "child": f"child of rank {rank}"}
        self = super().__new__(cls, f"{owner.get(role, 'process')} (pid {pid})")
        self.role, self.rank, self.pid = role, rank, pid
        return self

    def __getnewargs__(self) -> tuple[str, int | None, int]:  # type: ignore[override]
        return (self.role, self.rank, self.pid)


@dataclass
class Target:
    """One process to dump: how the report names it, and where its faulthandler file is."""

    label: str
    proc: ProcId
    stack_file: Path | None = None


@dataclass
class _Attempt:
    target: Target
    text: str = ""
    problems: list[str] = field(default_factory=list)


def pyspy_binary() -> str | None:
    """py-spy from ``ZEPHON_CHAOS_PYSPY``, next to this interpreter, or on PATH."""
    configured = os.environ.get(PYSPY_VAR)
    if configured:
        return None if configured == "off" else configured
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def group_targets(group: TorchrunGroup) -> list[Target]:
    """Live processes of the group, labelled ``rank R (pid P)`` / ``agent N (pid P)`` (a
    :class:`Who`)."""
    survivors = group.registry.survivors()
    rank_of = {proc: rank for rank, proc in group.workers().items()}
    agent_of = {agent.pid: node for node, agent in enumerate(group.agents)}
    records = group.worker_records()
    stack_dir = group.registry.pid_dir / STACKS_SUBDIR
    targets: list[tuple[tuple[int, int, int], Target]] = []
    for proc in survivors:
        if proc in rank_of:
            rank = rank_of[proc]
            key, label = (0, rank, proc.pid), Who("rank", rank, proc.pid)
        elif proc.pid in agent_of:
            node = agent_of[proc.pid]
            key, label = (1, node, proc.pid), Who("agent", node, proc.pid)
        else:
            owner = rank_of_record(records.get(proc, {}))
            role = "child" if owner is not None else "process"
            key, label = (2, proc.pid, proc.pid), Who(role, owner, proc.pid)
        path = stack_dir / f"{proc.pid}-{proc.ticks}"
        targets.append((key, Target(label, proc, path if path.exists() else None)))
    return [t for _, t in sorted(targets, key=lambda kt: kt[0])]


def rank_of_record(record: dict[str, object]) -> int | None:
    """The rank a process belongs to, from its spawn record's ``RANK`` (text, as the
    environment gives it; None where it has none)."""
    of = str(record.get("rank"))
    return int(of) if of.isdigit() else None


def collect_group_stacks(group: TorchrunGroup, budget_s: float = TOTAL_BUDGET_S) -> dict[str, str]:
    """``{"rank 0 (pid 123)": stack text, ...}`` for every live process of ``group``."""
    return capture_stacks(group_targets(group), budget_s=budget_s)


def capture_stacks(
    targets: list[Target], budget_s: float = TOTAL_BUDGET_S, per_call_s: float = PER_CALL_S
) -> dict[str, str]:
    """Dump every target with py-spy, then faulthandler for those py-spy could not read."""
    end = time.monotonic() + budget_s
    attempts = [_Attempt(t) for t in targets]
    binary = pyspy_binary()
    if binary is None:
        for a in attempts:
            a.problems.append(
                "py-spy: not found (install py-spy, or set ZEPHON_CHAOS_PYSPY to its path)"
            )
    else:
        _run_pyspy(binary, attempts, end, per_call_s)
        _run_pyspy(binary, [a for a in attempts if _in_torch_distributed(a)], end, per_call_s, True)
    _run_faulthandler([a for a in attempts if not a.text], end)
    out: dict[str, str] = {}
    for a in attempts:
        if a.text:
            out[a.target.label] = a.text
        else:
            out[a.target.label] = "no stack captured:\n" + "\n".join(f"  {p}" for p in a.problems)
    return out


def _in_torch_distributed(attempt: _Attempt) -> bool:
    """The process's main thread waits inside torch.distributed (forming its group, or a
    store call): where it waits below Python (a connect's retries, a lock) shows only in its
    native frames."""
    thread = main_thread(parse_stacks(attempt.text), attempt.target.proc.pid)
    return bool(thread and thread.frames and "/torch/distributed/" in thread.frames[0].file)


def _run_pyspy(
    binary: str, attempts: list[_Attempt], end: float, per_call_s: float, native: bool = False
) -> None:
    """One py-spy per process, all at once, each bounded by its own and the total deadline.

    ``native``: dump again with native frames (py-spy pauses the process for that), replacing
    the dump taken; where that fails, the first stays. Its Python frames are the same, and
    native frames, which carry no line number, are skipped by every reader of frames."""
    running: list[tuple[_Attempt, subprocess.Popen[bytes]]] = []
    for a in attempts:
        pid = str(a.target.proc.pid)
        mode = "--native" if native else "--nonblocking"
        argv = [binary, "dump", mode, "--full-filenames", "--pid", pid]
        try:
            running.append(
                (a, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            )
        except OSError as exc:
            a.problems.append(f"py-spy: cannot run {binary}: {exc}")
    started = time.monotonic()
    for a, proc in running:
        timeout = max(0.05, min(end, started + per_call_s) - time.monotonic())
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            if not native:
                a.problems.append(f"py-spy: no answer within {timeout:.1f}s")
            continue
        if proc.returncode == 0 and out.strip():
            a.text = out.decode(errors="replace")
        elif not native:
            why = (err or out).decode(errors="replace").strip().splitlines()
            a.problems.append(f"py-spy: exit {proc.returncode}: {why[-1] if why else 'no output'}")
            if any("ermission" in line or "ptrace" in line for line in why):
                a.problems.append(
                    "  ptrace is not permitted here (kernel.yama.ptrace_scope, or a container "
                    "without CAP_SYS_PTRACE): see docs/diagnostics.md"
                )


def _run_faulthandler(attempts: list[_Attempt], end: float) -> None:
    """Signal every process that armed faulthandler; read what each one appends to its file."""
    signum = int(os.environ.get(STACK_SIGNAL_VAR) or signal.SIGUSR1)
    waiting: list[tuple[_Attempt, int, str]] = []
    for a in attempts:
        path = a.target.stack_file
        if path is None:
            a.problems.append(
                "faulthandler: not armed in this process (not Python, or started without the "
                "spawn hook)"
            )
            continue
        if not a.target.proc.alive():
            a.problems.append("faulthandler: the process exited before it could be asked")
            continue
        offset = path.stat().st_size
        note = ""
        stopped = _is_stopped(a.target.proc.pid)
        try:
            os.kill(a.target.proc.pid, signum)
            if stopped:
                # A stopped process runs no handler; it is killed right after this capture.
                os.kill(a.target.proc.pid, signal.SIGCONT)
                note = (
                    "(the process was stopped; faulthandler cannot run in a stopped process, so it "
                    "was continued for this dump: the stack shows where it resumed)\n"
                )
        except ProcessLookupError:
            a.problems.append("faulthandler: the process exited before it could be asked")
            continue
        waiting.append((a, offset, note))
    # A dump is complete when it ends with a frame line and stopped growing between polls.
    pending = {id(a): (a, offset, note, -1) for a, offset, note in waiting}
    while pending and time.monotonic() < end:
        for key, (a, offset, note, seen) in list(pending.items()):
            text = _read_dump(a.target.stack_file, offset)  # type: ignore[arg-type]
            if text is not None and len(text) == seen and _ends_with_frame(text):
                a.text = f"(via faulthandler)\n{note}{text}"
                del pending[key]
            else:
                pending[key] = (a, offset, note, -1 if text is None else len(text))
        if pending:
            time.sleep(_POLL_S)
    for a, _, _, _ in pending.values():
        a.problems.append("faulthandler: no complete dump written before the capture deadline")


def _read_dump(path: Path, offset: int) -> str | None:
    """What the process appended to its faulthandler file after ``offset`` (None: nothing)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    return data if data.strip() else None


def _ends_with_frame(text: str) -> bool:
    last = text.rstrip("\n").splitlines()[-1].lstrip()
    return last.startswith(("File ", "<no Python frame>", "..."))


def _is_stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False
