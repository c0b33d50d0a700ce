"""Record this interpreter's PID in the launch's registry the moment it starts.

torchrun starts workers in their own sessions, and Zephon starts subprocesses of its own, so
a process tree walk at teardown misses orphans. Every Python process of a group imports this
module at start-up (it is first on PYTHONPATH), writes ``<pid>-<start ticks>`` (with its rank
variables) into ``ZEPHON_CHAOS_PID_DIR`` and hands over to any other ``sitecustomize`` on the path.
"""

import os
import sys


def _record() -> None:
    pid_dir = os.environ.get("ZEPHON_CHAOS_PID_DIR")
    if not pid_dir:
        return
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = f.read().rsplit(b")", 1)[1].split()[19].decode()
    except OSError:
        ticks = "0"
    env = os.environ
    record = {
        "ppid": os.getppid(),
        "rank": env.get("RANK"),
        "local_rank": env.get("LOCAL_RANK"),
        "group_rank": env.get("GROUP_RANK"),
        "restart": env.get("TORCHELASTIC_RESTART_COUNT"),
        "argv": sys.argv[:8],
    }
    try:
        import json

        fd = os.open(os.path.join(pid_dir, f"{pid}-{ticks}"), os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, json.dumps(record).encode())
        os.close(fd)
    except (OSError, TypeError, ValueError):
        pass


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    mod = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import importlib

        try:
            importlib.import_module("sitecustomize")
        except ImportError:
            pass
    finally:
        sys.path[:] = saved
        if mod is not None and "sitecustomize" not in sys.modules:
            sys.modules["sitecustomize"] = mod


_record()
_chain()
