"""A harness-hosted TCPStore in a process of its own, so it can be stopped, killed, restarted.

The in-process :class:`~zephon_chaos.launch.store_host.StoreHost` cannot be faulted without
faulting the harness. Here the server is a small ``python -c`` process; the harness holds
the port with a bound, non-listening ``SO_REUSEPORT`` socket, so each server process binds
and listens on that same port (no race: only this user's ``SO_REUSEPORT`` sockets may join)
while a killed server leaves nothing listening (clients are refused, as when a real store
dies). A spare server is kept warm (torch imported, not yet listening) so a restart takes
milliseconds, not an interpreter's start-up.

Every server exits when its stdin closes (the harness went away) or at its deadline; its
PID is recorded in ``history`` and, when given, a PID file for the leak checks.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from zephon_chaos.closing import Closing
from zephon_chaos.errors import HarnessError
from zephon_chaos.launch.ports import LOOPBACK
from zephon_chaos.procs import ProcId, proc_id, stat_field

SERVER_CODE = r"""
import os, select, socket, sys, time
from datetime import timedelta
port, deadline_s = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + deadline_s
import torch.distributed as dist
print("warm", flush=True)
r, _, _ = select.select([sys.stdin], [], [], max(0.0, end - time.monotonic()))
if not r or sys.stdin.readline().strip() != "go":
    sys.exit(0)
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
sock.bind(("127.0.0.1", port))
sock.listen(128)
store = dist.TCPStore("127.0.0.1", port, is_master=True, master_listen_fd=sock.detach(),
                      use_libuv=True, wait_for_workers=False, timeout=timedelta(seconds=60))
print("serving", flush=True)
while time.monotonic() < end:
    r, _, _ = select.select([sys.stdin], [], [], max(0.0, end - time.monotonic()))
    if r and not sys.stdin.readline():
        break
"""
READY_S = 60.0
"""How long a server may take to import torch (a loaded 2-core machine: several seconds)."""


class StoreProcessError(HarnessError, RuntimeError):
    """The store process did not reach the state asked for; the message says which."""


class StoreAction(str, Enum):
    """What happened to the hosted store, in order: the evidence of a store fault."""

    STARTED = "started"
    STOPPED = "stopped"
    CONTINUED = "continued"
    KILLED = "killed"
    RESTARTED = "restarted"


@dataclass(frozen=True)
class StoreEvent:
    action: StoreAction
    pid: int
    at: float
    """``time.monotonic()`` when the kernel showed the new state."""
    state: str = ""
    """The process's state letter in ``/proc/<pid>/stat`` then (``T``: stopped), or its exit
    status (``-9``) once killed."""

    def describe(self) -> str:
        return f"store pid {self.pid} {self.action.value} ({self.state})"


def proc_state(pid: int) -> str:
    """The state letter of ``/proc/<pid>/stat`` (``S``, ``R``, ``T``, ``Z``), or "" if gone."""
    return stat_field(pid, 0) or ""


def _await_state(pid: int, wanted: bool, letter: str, timeout_s: float) -> str:
    """Wait until the kernel shows ``pid`` in (or out of) state ``letter``; no event exists."""
    end = time.monotonic() + timeout_s
    while True:
        state = proc_state(pid)
        if (state == letter) == wanted:
            return state
        if time.monotonic() > end:
            raise StoreProcessError(
                f"store pid {pid} stayed in state {state!r} for {timeout_s} s "
                f"(waited for {'' if wanted else 'not '}{letter!r})"
            )
        time.sleep(0.005)


@dataclass
class _Server:
    proc: subprocess.Popen[str]
    ident: ProcId | None

    def read_line(self, timeout_s: float) -> str:
        assert self.proc.stdout is not None
        r, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        return self.proc.stdout.readline().strip() if r else ""


@dataclass
class StoreProcess(Closing):
    """A TCPStore server process on 127.0.0.1 at a port the harness holds; ``close`` ends it."""

    deadline_s: float = 900.0
    pid_file: Path | None = None
    history: list[StoreEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._reserve = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._reserve.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._reserve.bind((LOOPBACK, 0))
        self.host = LOOPBACK
        self.port = int(self._reserve.getsockname()[1])
        self._started = time.monotonic()
        self._current: _Server | None = None
        self._spare: _Server | None = None
        try:
            self._serve(StoreAction.STARTED)
        except BaseException:
            self.close()
            raise

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._current is None else self._current.proc.pid

    @property
    def serving(self) -> bool:
        """A server process is alive (stopped or not)."""
        return self._current is not None and self._current.proc.poll() is None

    # ---- faults ------------------------------------------------------------------------
    def stop(self) -> StoreEvent:
        """SIGSTOP the server; returns once the kernel shows it stopped (``T``)."""
        server = self._live("stop")
        os.kill(server.proc.pid, signal.SIGSTOP)
        state = _await_state(server.proc.pid, True, "T", 10.0)
        return self._note(StoreAction.STOPPED, server.proc.pid, state)

    def cont(self) -> StoreEvent:
        """SIGCONT the server; returns once the kernel shows it running again."""
        server = self._live("continue")
        os.kill(server.proc.pid, signal.SIGCONT)
        state = _await_state(server.proc.pid, False, "T", 10.0)
        return self._note(StoreAction.CONTINUED, server.proc.pid, state)

    def kill(self) -> StoreEvent:
        """SIGKILL the server: its keys are gone and nothing listens on the port."""
        server = self._live("kill")
        server.proc.kill()
        code = server.proc.wait(timeout=10.0)
        self._current = None
        self._close_pipes(server)
        return self._note(StoreAction.KILLED, server.proc.pid, str(code))

    def restart(self) -> StoreEvent:
        """A new, empty server on the same port (the old one killed first if alive)."""
        if self.serving:
            self.kill()
        return self._serve(StoreAction.RESTARTED)

    def close(self) -> None:
        """End every server process (stopped ones too) and free the port."""
        for server in (self._current, self._spare):
            if server is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                server.proc.kill()
                os.kill(server.proc.pid, signal.SIGCONT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(timeout=10.0)
            self._close_pipes(server)
        self._current = self._spare = None
        self._reserve.close()

    # ---- internals ---------------------------------------------------------------------
    def _live(self, what: str) -> _Server:
        if not self.serving:
            raise StoreProcessError(f"cannot {what} the hosted store: no server process runs")
        assert self._current is not None
        return self._current

    def _note(self, action: StoreAction, pid: int, state: str) -> StoreEvent:
        event = StoreEvent(action, pid, time.monotonic(), state)
        self.history.append(event)
        return event

    def _spawn(self) -> _Server:
        left = max(1.0, self.deadline_s - (time.monotonic() - self._started))
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVER_CODE, str(self.port), str(left)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        server = _Server(proc, proc_id(proc.pid))
        if self.pid_file is not None and server.ident is not None:
            with open(self.pid_file, "a", encoding="utf-8") as f:
                f.write(f"{server.ident.pid}-{server.ident.ticks}\n")
        return server

    def _serve(self, action: StoreAction) -> StoreEvent:
        server = self._spare or self._spawn()
        self._spare = None
        if server.read_line(READY_S) != "warm":
            self._fail(server, "import torch")
        assert server.proc.stdin is not None
        server.proc.stdin.write("go\n")
        server.proc.stdin.flush()
        if server.read_line(READY_S) != "serving":
            self._fail(server, "listen")
        self._current = server
        self._spare = self._spawn()  # warm for the next restart
        return self._note(action, server.proc.pid, proc_state(server.proc.pid))

    def _fail(self, server: _Server, step: str) -> None:
        server.proc.kill()
        server.proc.wait(timeout=10.0)
        self._close_pipes(server)
        raise StoreProcessError(
            f"the store process (pid {server.proc.pid}) did not {step} within {READY_S} s "
            f"(exit status {server.proc.returncode}); is torch importable by {sys.executable}?"
        )

    @staticmethod
    def _close_pipes(server: _Server) -> None:
        for pipe in (server.proc.stdin, server.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
