"""Signals a rank sends itself (or its agent) for a scheduled fault: one table for all callers.

Before it fires, the rank leaves a note in its launch's PID directory, so that the report
can tell a SIGKILL the rank sent itself from one the kernel's OOM killer sent.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zephon_chaos.procs import ProcId

NOTES_SUBDIR = "self-signals"


def signal_self(action: str) -> bool:
    """Apply ``action`` if it is a signal or an exit; False for actions the caller handles."""
    if action not in ("sigkill", "sigterm", "sigstop", "exit", "kill_agent"):
        return False
    _leave_note(action)
    if action == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    elif action == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "exit":
        os._exit(17)
    else:
        os.kill(os.getppid(), signal.SIGKILL)
    return True


def _leave_note(action: str) -> None:
    from zephon_chaos.procs import PID_DIR_VAR, start_ticks
    from zephon_chaos.workload.spawn_hook import spawn_hook_call

    if action in ("sigkill", "sigterm", "exit"):
        spawn_hook_call("_note_exit")  # the rank ends before any atexit could run

    pid_dir = os.environ.get(PID_DIR_VAR)
    if not pid_dir:
        return
    pid = os.getpid()
    with contextlib.suppress(OSError):
        notes = Path(pid_dir, NOTES_SUBDIR)
        notes.mkdir(exist_ok=True)
        (notes / f"{pid}-{start_ticks(pid) or 0}").write_text(action)


def self_signals(pid_dir: Path) -> dict[ProcId, str]:
    """The action of every rank of a launch that fired on itself."""
    from zephon_chaos.procs import read_notes

    return read_notes(Path(pid_dir), NOTES_SUBDIR)
