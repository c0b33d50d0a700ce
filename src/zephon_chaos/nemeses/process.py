"""Process faults applied from the harness, and the kernel's word that they took effect.

A SIGSTOP has landed when the process's state in ``/proc/<pid>/stat`` is ``T`` (stopped):
that is the logical event the harness waits for before it lets time pass or sends SIGCONT.
No notification exists for a state change of a process that is not our child (``waitid``
sees only children; ranks are grandchildren), so the kernel's table is read until it says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from zephon_chaos.errors import HarnessError
from zephon_chaos.procs import ProcId

POLL_S = 0.01


class ProcessFaultError(HarnessError, RuntimeError):
    """A process fault that could not be applied or observed; says which process and why."""


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (R, S, D, T, t, Z, ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def wait_for_state(target: ProcId, states: str, timeout_s: float) -> str:
    """Wait until ``target`` is in one of ``states``; return it, or raise on timeout or exit."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = proc_state(target.pid) if target.alive() else None
        if state is None:
            raise ProcessFaultError(f"process {target.pid} exited before reaching state {states}")
        if state in states:
            return state
        if time.monotonic() > deadline:
            raise ProcessFaultError(
                f"process {target.pid} is in state {state!r}, not {states!r}, after {timeout_s} s"
            )
        time.sleep(POLL_S)  # reading the kernel's process table; there is no event to wait on


@dataclass(frozen=True)
class StopEvidence:
    """Where a stop was seen: the process, its state, and when (CLOCK_MONOTONIC, host-wide)."""

    pid: int
    state: str
    stopped_at: float
    continued_at: float | None = None


def wait_stopped(target: ProcId, timeout_s: float) -> StopEvidence:
    state = wait_for_state(target, "Tt", timeout_s)
    return StopEvidence(target.pid, state, time.monotonic())

