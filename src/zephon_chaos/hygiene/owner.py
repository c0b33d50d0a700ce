"""Who owns a process or a directory: the pytest session (and test) that started it.

Every process a session starts inherits ``ZEPHON_CHAOS_OWNER=<session>/<test>`` where
``<session>`` is ``<pid>-<start ticks>`` of the pytest process. The kernel keeps a process's
initial environment readable in ``/proc/<pid>/environ`` for its whole life, even after its
parent died and it was re-parented to init, so an orphan still names its owner, and whether
that owner is alive is one ``/proc/<pid>/stat`` read away (PID reuse is caught by the ticks).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from zephon_chaos.errors import HarnessError
from zephon_chaos.procs import ProcId, proc_id

OWNER_VAR = "ZEPHON_CHAOS_OWNER"
BASE_VAR = "ZEPHON_CHAOS_TMP_BASE"
"""The temp folder the outermost session found; sessions nested in its tests keep using it."""
SESSION_SCOPE = "session"
PRIVATE_PREFIX = "zephon-chaos-"


class UnsafeDirectory(HarnessError, RuntimeError):
    """A well-known private directory exists but is not ours alone (owner, mode, or a link)."""


def session_id(pid: int | None = None) -> str:
    """``<pid>-<start ticks>`` of a process (this one by default)."""
    me = proc_id(pid if pid is not None else os.getpid())
    if me is None:
        raise RuntimeError(f"process {pid} does not exist; it cannot own a session")
    return f"{me.pid}-{me.ticks}"


def owner_value(session: str, scope: str = SESSION_SCOPE) -> str:
    return f"{session}/{scope}"


def parse_owner(value: str) -> tuple[str, str]:
    """``(session, scope)`` of an owner value; scope is ``session`` or a test's token."""
    session, _, scope = value.partition("/")
    return session, scope or SESSION_SCOPE


def session_process(session: str) -> ProcId | None:
    """The pytest process of ``<pid>-<ticks>[.<n>]`` (``.n``: a session nested in-process)."""
    pid, _, ticks = session.partition("-")
    ticks = ticks.split(".")[0]
    if not (pid.isdigit() and ticks.isdigit()):
        return None
    return ProcId(int(pid), int(ticks))


def session_alive(session: str) -> bool:
    """True while the pytest process that owns ``session`` runs (PID reuse is not mistaken)."""
    proc = session_process(session)
    return proc is not None and proc.alive()


def temp_base() -> Path:
    """The real temp folder: ``ZEPHON_CHAOS_TMP_BASE`` inside a test's private TMPDIR."""
    return Path(os.environ.get(BASE_VAR) or tempfile.gettempdir())


def private_root(base: Path | None = None) -> Path:
    """``<temp base>/zephon-chaos-<uid>``: created 0700, refused if another user could touch it."""
    root = Path(base or temp_base()) / f"{PRIVATE_PREFIX}{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{root} is not a plain directory; remove it and rerun")
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(
            f"{root} belongs to uid {info.st_uid}, not to you ({os.getuid()}): another user "
            "may be interfering; remove it, or set TMPDIR to a private directory"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(root, 0o700)
    return root


def existing_private_root(base: Path | None = None) -> Path | None:
    """The private root if a session ever made it (and it is safe), without making it."""
    root = Path(base or temp_base()) / f"{PRIVATE_PREFIX}{os.getuid()}"
    if not root.is_dir():
        return None
    try:
        return private_root(base)
    except (UnsafeDirectory, OSError):
        return None
