"""One pytest process's hygiene state: its identity, ledger, live tests, interrupt handling.

A session starts when the plugin's fixtures are first used in its process (:func:`ensure`),
or with pytest where every test is judged (``chaos_hygiene = all``); a pytest session that
never uses them gets no identity, ledger, environment variable or signal handler. An xdist
controller runs no test: it starts when a worker's report says that worker started one.

Start-up (the controller, or a run without xdist) first removes what crashed sessions left
(``reaper.reap`` in its precise strength) and says so in the report header (or, started
later, in the terminal summary); the end does the same once the workers are gone, and so
does the controller when an xdist worker dies.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zephon_chaos.hygiene.interrupt import InterruptGuard
from zephon_chaos.hygiene.ledger import SessionLedger, stale_ledgers
from zephon_chaos.hygiene.owner import (
    BASE_VAR,
    OWNER_VAR,
    UnsafeDirectory,
    existing_private_root,
    owner_value,
    parse_owner,
    private_root,
    session_id,
)
from zephon_chaos.hygiene.proctable import our_processes
from zephon_chaos.hygiene.reaper import Cleanup, reap
from zephon_chaos.hygiene.snapshot import Resources, live_children
from zephon_chaos.procs import ProcId

_SESSIONS: dict[int, ChaosSession | None] = {}
"""Per pytest config: its session, or None where one could not start (no /proc)."""


@dataclass
class TestScope:
    """The owner token and private TMPDIR of one running test."""

    token: str
    tmpdir: Path | None


@dataclass
class ChaosSession:
    id: str
    root: Path | None
    ledger: SessionLedger | None
    controller: bool
    live: list[Resources] = field(default_factory=list)
    startup_cleanup: Cleanup | None = None
    guard: InterruptGuard | None = None
    exempt: set[ProcId] = field(default_factory=set)
    """Processes that session-scoped fixtures started mid-test: the session's, not a leak."""
    _saved_owner: str | None = None
    _saved_base: str | None = None
    _cleanup_shown: bool = False
    _tests: int = 0
    _scope_env: dict[str, str | None] | None = None

    # ---- tests ---------------------------------------------------------------------------
    def resources(self) -> Resources:
        """A test's :class:`Resources`, written to the ledger as it grows."""
        ledger = self.ledger
        return Resources(
            on_registry=(lambda r: ledger.add_registry(r.tag, r.pid_dir)) if ledger else None,
            on_dir=ledger.add_dir if ledger else None,
        )

    @contextlib.contextmanager
    def test_scope(self, resources: Resources) -> Iterator[TestScope]:
        """Give the test its own owner token and TMPDIR; put the previous ones back after."""
        self._tests += 1
        scope = TestScope(
            token=owner_value(self.id, f"t{self._tests}"),
            tmpdir=self.ledger.new_test_dir() if self.ledger else None,
        )
        saved_env = {k: os.environ.get(k) for k in (OWNER_VAR, "TMPDIR")}
        saved_tempdir = tempfile.tempdir
        self._scope_env = {**saved_env, "tempfile.tempdir": saved_tempdir}
        os.environ[OWNER_VAR] = scope.token
        if scope.tmpdir is not None:
            os.environ["TMPDIR"] = str(scope.tmpdir)
            tempfile.tempdir = str(scope.tmpdir)
        self.live.append(resources)
        try:
            yield scope
        finally:
            with contextlib.suppress(ValueError):
                self.live.remove(resources)
            self._scope_env = None
            if scope.tmpdir is not None:
                shutil.rmtree(scope.tmpdir, ignore_errors=True)
            tempfile.tempdir = saved_tempdir
            _restore(saved_env)

    @contextlib.contextmanager
    def outside_test(self) -> Iterator[None]:
        """Set up a session- or module-scoped fixture mid-test with the session's owner token
        and temp folder, and exempt what it starts from the test's leak verdict."""
        if self._scope_env is None:
            yield
            return
        saved = {k: os.environ.get(k) for k in (OWNER_VAR, "TMPDIR")}
        saved_tempdir = tempfile.tempdir
        outer = self._scope_env
        _restore({k: outer[k] for k in (OWNER_VAR, "TMPDIR")})
        tempfile.tempdir = outer["tempfile.tempdir"]
        before = live_children()
        try:
            yield
        finally:
            self.exempt |= live_children() - before
            tempfile.tempdir = saved_tempdir
            _restore(saved)

    def stop_everything(self) -> None:
        """On SIGINT/SIGTERM: kill the live tests' groups and anything carrying their tokens."""
        for resources in list(self.live):
            resources.kill_all()
        mine = [
            info for info in our_processes([OWNER_VAR])
            if info.owner and parse_owner(info.owner)[0] == self.id
            and parse_owner(info.owner)[1] != "session"
        ]
        for info in mine:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(info.proc.pid, signal.SIGKILL)


def _restore(values: dict[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def start(config: Any) -> ChaosSession | None:
    """Identity, ledger, interrupt handling, start-up reap (see :func:`ensure`).

    Without ``/proc`` (not Linux) there is no identity to give: hygiene falls back to the
    plain before/after check, with a warning.
    """
    controller = not hasattr(config, "workerinput")
    try:
        sid = session_id()
    except (OSError, RuntimeError) as exc:
        warnings.warn(f"zephon-chaos: session hygiene disabled ({exc})", stacklevel=1)
        _SESSIONS[id(config)] = None
        return None
    nested = sum(1 for s in _SESSIONS.values() if s is not None and s.id.split(".")[0] == sid)
    if nested:
        sid = f"{sid}.{nested}"  # pytester's in-process runs: a session inside a session
    root: Path | None
    try:
        root = private_root()
    except (UnsafeDirectory, OSError) as exc:
        warnings.warn(f"zephon-chaos: no session ledger ({exc})", stacklevel=1)
        root = None
    session = ChaosSession(
        id=sid,
        root=root,
        ledger=SessionLedger(root, sid) if root is not None else None,
        controller=controller,
    )
    session._saved_owner = os.environ.get(OWNER_VAR)
    session._saved_base = os.environ.get(BASE_VAR)
    os.environ[OWNER_VAR] = owner_value(sid)
    if root is not None:
        os.environ.setdefault(BASE_VAR, str(root.parent))
    if controller:
        session.startup_cleanup = reap(root)
    session.guard = InterruptGuard(session.stop_everything)
    session.guard.install()
    _SESSIONS[id(config)] = session
    return session


def ensure(config: Any) -> ChaosSession | None:
    """This process's session, started at its first use (one start per pytest config)."""
    key = id(config)
    if key in _SESSIONS:
        return _SESSIONS[key]
    return start(config)


def current(config: Any) -> ChaosSession | None:
    """The session if one was started, without starting one."""
    return _SESSIONS.get(id(config))


@contextlib.contextmanager
def fixture_setup(config: Any, scope: str) -> Iterator[None]:
    """Wraps every fixture's setup: higher-scoped ones run outside the current test's scope."""
    session = current(config)
    if session is None or scope == "function":
        yield
        return
    with session.outside_test():
        yield


def finish(config: Any) -> None:
    """Called from ``pytest_unconfigure``: handlers back, leftovers of dead workers reaped."""
    session = _SESSIONS.pop(id(config), None)
    if session is None:
        return
    if session.guard is not None:
        session.guard.uninstall()
    _restore({OWNER_VAR: session._saved_owner, BASE_VAR: session._saved_base})
    if session.ledger is not None:
        session.ledger.close()
    if session.controller:
        reap(session.root)


def on_worker_down(config: Any, crashed: bool = True) -> Cleanup | None:
    """An xdist worker went down (crashed, or killed): reap what its session left.

    A controller that never heard of the plugin's use still reaps after a crashed worker
    whose session left a ledger: the worker may have died before its first report came.
    """
    session = current(config)
    if session is not None:
        return reap(session.root) if session.controller else None
    if not crashed or hasattr(config, "workerinput"):
        return None
    root = existing_private_root()
    if root is None or not stale_ledgers(root):
        return None
    return reap(root)


def header(config: Any) -> list[str]:
    """The start-up cleanup, for the report header (a session started with pytest)."""
    session = current(config)
    if session is None:
        return []
    session._cleanup_shown = True
    return _cleanup_lines(session)


def summary(config: Any) -> list[str]:
    """The start-up cleanup of a session started after the header, for the summary."""
    session = current(config)
    if session is None or session._cleanup_shown:
        return []
    session._cleanup_shown = True
    return _cleanup_lines(session)


def _cleanup_lines(session: ChaosSession) -> list[str]:
    done = session.startup_cleanup
    if not done:
        return []
    return [
        f"zephon-chaos: removed leftovers of crashed runs ({done.count()} item(s)):",
        *done.describe().splitlines()[1:],
    ]
