"""Record this interpreter's PID in the launch's registry the moment it starts.

torchrun starts workers in their own sessions, and Zephon starts subprocesses of its own, so
a process tree walk at teardown misses orphans. Every Python process of a group imports this
module at start-up (it is first on PYTHONPATH), writes ``<pid>-<start ticks>`` (with its rank
variables) into ``ZEPHON_CHAOS_PID_DIR`` and hands over to any other ``sitecustomize`` on the path.

At exit it notes the moment (``CLOCK_MONOTONIC``, one clock for every process of the machine)
in ``<pid dir>/exits/<pid>-<ticks>``: when two ranks fail within one poll of their agent, the
notes say which failed first, where torchelastic's whole-second timestamps tie.

It also arms ``faulthandler`` on SIGUSR1 into ``<pid dir>/stacks/<pid>-<ticks>``: the fallback
for stack capture where ptrace (py-spy) is not permitted. Children forked from Python (not
exec'd) record themselves and re-arm into their own file, so every process has its own dump.
"""

import os
import sys

STACKS_SUBDIR = "stacks"
EXITS_SUBDIR = "exits"
RAISED_SUBDIR = "raised"
STACK_SIGNAL_VAR = "ZEPHON_CHAOS_STACK_SIGNAL"
ZEPHON_CHAOS_SPAWN_HOOK = True
"""The mark ``workload.spawn_hook`` knows this hook by (``HOOK_MARK``)."""


def _ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "0"


def rank_record(argv: list[str]) -> dict[str, object]:
    """What a process's ``<pid>-<start ticks>`` file says of it: its parent, rank variables
    and command line. The warm lane's forked workers write the same (``warm_agent``)."""
    env = os.environ
    return {
        "ppid": os.getppid(),
        "rank": env.get("RANK"),
        "local_rank": env.get("LOCAL_RANK"),
        "group_rank": env.get("GROUP_RANK"),
        "restart": env.get("TORCHELASTIC_RESTART_COUNT"),
        "argv": list(argv)[:8],
    }


def _record() -> None:
    pid_dir = os.environ.get("ZEPHON_CHAOS_PID_DIR")
    if not pid_dir:
        return
    pid = os.getpid()
    ticks = _ticks(pid)
    record = rank_record(getattr(sys, "argv", []))
    try:
        import json

        path = os.path.join(pid_dir, f"{pid}-{ticks}")  # an exec rewrites it: truncate
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        os.write(fd, json.dumps(record).encode())
        os.close(fd)
    except (OSError, TypeError, ValueError):
        pass
    _arm_faulthandler(pid_dir, pid, ticks)


def _arm_faulthandler(pid_dir: str, pid: int, ticks: str) -> None:
    """Dump every thread's stack into this process's own file when the stack signal arrives."""
    try:
        import faulthandler
        import signal

        signum = int(os.environ.get(STACK_SIGNAL_VAR) or signal.SIGUSR1)
        stack_dir = os.path.join(pid_dir, STACKS_SUBDIR)
        os.makedirs(stack_dir, mode=0o700, exist_ok=True)
        fd = os.open(
            os.path.join(stack_dir, f"{pid}-{ticks}"),
            os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC,
            0o600,
        )
        out = os.fdopen(fd, "w")
        faulthandler.register(signum, file=out, all_threads=True, chain=False)
        global _STACK_FILE
        old, _STACK_FILE = _STACK_FILE, out
        if old is not None:
            old.close()
    except (OSError, ValueError, RuntimeError, AttributeError):
        pass


_STACK_FILE = None


def _note_exit() -> None:
    """Note when this process began to exit: at exit, in ``os._exit`` (which skips atexit),
    and where the warm lane and self-inflicted signals call it. The first note stands."""
    _note(EXITS_SUBDIR)


def _note_raised() -> None:
    """Note when this process's error left its ``main`` (the workload's ``@record`` calls
    it), before atexit tears down its children or process group. The first note stands."""
    _note(RAISED_SUBDIR)


def _note(subdir: str) -> None:
    pid_dir = os.environ.get("ZEPHON_CHAOS_PID_DIR")
    if not pid_dir:
        return
    try:
        import time

        pid = os.getpid()
        folder = os.path.join(pid_dir, subdir)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, f"{pid}-{_ticks(pid)}")
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, repr(time.monotonic()).encode())
        os.close(fd)
    except (OSError, ValueError):
        pass


_REAL_EXIT = os._exit


def _exit_noted(status: int) -> None:
    _note_exit()
    _REAL_EXIT(status)


def _after_fork() -> None:
    _record()


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    mod = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import contextlib
        import importlib

        with contextlib.suppress(ImportError):
            importlib.import_module("sitecustomize")
    finally:
        sys.path[:] = saved
        if mod is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = mod


# Loaded by the interpreter at start-up, the hook records this process and chains on;
# imported under its package name (``warm_agent`` reads ``rank_record``), it does nothing.
if __name__ == "sitecustomize":
    _record()
    if os.environ.get("ZEPHON_CHAOS_PID_DIR"):
        import atexit

        atexit.register(_note_exit)
        os._exit = _exit_noted
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)
    _chain()
