"""A command-line run owns what it starts, as a pytest session does.

``explore``, ``run``, ``replay`` and ``bench`` launch groups outside any pytest session. Under
this scope they get a session identity and a ledger of their own, and every process they
start inherits ``ZEPHON_CHAOS_OWNER``: if the command is SIGKILLed, the next session's or
command's start-up reap (or ``zephon-chaos clean``) finds its leftovers by owner, precisely,
instead of only by the thorough scan. Leftovers of crashed runs are reaped at the start too.
Inside a pytest test (the owner variable already set) the test's owner covers everything and
this scope does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from zephon_chaos.hygiene.ledger import SessionLedger
from zephon_chaos.hygiene.owner import (
    OWNER_VAR,
    UnsafeDirectory,
    owner_value,
    private_root,
    session_id,
)
from zephon_chaos.hygiene.reaper import reap


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cancelled CI job, ``timeout``): the run ends as Ctrl-C ends it, stopping
    what it started, writing what it has and removing its working files."""

    signum = signal.SIGTERM


_TERMINATED = threading.Event()
"""Set once a SIGTERM arrived in this command: a run that catches the interrupt to write its
report still exits as terminated (``cli``: 128 + SIGTERM)."""


def terminated() -> bool:
    return _TERMINATED.is_set()


def _terminate(signum: int, frame: FrameType | None) -> None:
    _TERMINATED.set()
    raise Terminated()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _TERMINATED.clear()
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def owned_command(name: str) -> Iterator[SessionLedger | None]:
    """Own the processes and folders started inside (see the module); a SIGTERM ends the
    command as Ctrl-C does (:class:`Terminated`)."""
    with _sigterm_as_interrupt(), _owned(name) as ledger:
        yield ledger


@contextlib.contextmanager
def _owned(name: str) -> Iterator[SessionLedger | None]:
    """Own the processes and folders started inside; yields the ledger (None: not needed or
    not possible, with a word on stderr why)."""
    if os.environ.get(OWNER_VAR):
        yield None
        return
    try:
        root = private_root()
        sid = session_id()
    except (UnsafeDirectory, OSError, RuntimeError) as exc:
        print(f"zephon-chaos {name}: no ownership records ({exc})", file=sys.stderr)
        yield None
        return
    earlier = reap(root)
    if earlier:
        print(f"zephon-chaos {name}: leftovers of a crashed run, {earlier.describe()}",
              file=sys.stderr)
    ledger = SessionLedger(root, sid)
    os.environ[OWNER_VAR] = owner_value(sid)
    try:
        yield ledger
    finally:
        os.environ.pop(OWNER_VAR, None)
        ledger.close()
