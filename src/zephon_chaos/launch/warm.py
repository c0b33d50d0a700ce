"""The warm lane: torchrun groups forked from a pre-warmed process, for speed.

A launch through the CLI path pays a fresh interpreter importing torch and zephon in every
process (~4 s for two ranks here). The warm lane keeps one server process that has imported
them (:mod:`warm_server`); each launch forks an agent from it that runs torchrun's own code
(argument parsing, rendezvous, TCPStore, elastic agent, logs) with workers started by fork
(:mod:`warm_agent`). The harness side is a :class:`TorchrunGroup` with a :class:`WarmSpawner`,
whose agents live in the server: the same environment, per-rank log layout, PID records, deadline
and reaping, and therefore the same :class:`GroupResult`.

Where a fork is unsafe (CUDA initialized in the server, or a workload on nccl) the launch
falls back to the CLI path and says so in the result's notes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from zephon_chaos.errors import HarnessError
from zephon_chaos.launch.group import StackCollector, TorchrunGroup
from zephon_chaos.launch.launch_env import launch_env
from zephon_chaos.launch.launch_spec import LaunchSpec
from zephon_chaos.launch.result import GroupResult, read_tail
from zephon_chaos.launch.warm_protocol import LineChannel, Message, PeerClosed
from zephon_chaos.procs import ProcessRegistry, ProcId, proc_id
from zephon_chaos.recipe import ENV_BACKEND

Launcher = Callable[[LaunchSpec], GroupResult]
START_DEADLINE_S = 180.0
REPLY_DEADLINE_S = 30.0
WARM_NOTE = "note: warm lane (agent and workers forked from a pre-warmed process)"
WORKLOAD_MODULE = "zephon_chaos.rank"


class WarmLaneError(HarnessError, RuntimeError):
    """The warm server could not start, answered wrongly, or died; the message says which."""


class WarmServerProcess:
    """The harness's handle on one warm server: start, launch agents, hear their exits, stop."""

    def __init__(self, workdir: Path, python: str = sys.executable) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(mode=0o700, exist_ok=True)
        self.registry = ProcessRegistry(f"zc-warm-{uuid.uuid4().hex[:12]}", self.workdir / "pids")
        self.registry.pid_dir.mkdir(mode=0o700, exist_ok=True)
        self.log = self.workdir / "server.log"
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        self.channel: LineChannel | None = None
        self.info: Message = {}
        self.exits: dict[str, int] = {}
        self.dead: str | None = None
        self._count = 0

    # ---- life cycle -----------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """The server's environment: the CLI path's base (launch variables removed) + our tag."""
        return launch_env(self.workdir / "tmp", self.registry)

    def start(self, timeout_s: float = START_DEADLINE_S) -> WarmServerProcess:
        if self.proc is not None:
            raise WarmLaneError("this warm server was already started")
        ours, theirs = socket.socketpair()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [self.python, "-u", "-m", "zephon_chaos.launch.warm_server", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.workdir,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        theirs.close()
        self.registry.add(self.proc.pid)
        self.channel = LineChannel(ours)
        try:
            ready = self.channel.receive(timeout_s)
        except PeerClosed:
            ready = None
        if ready is None or ready.get("event") != "ready":
            why = "did not get ready in time" if ready is None else f"said {ready}"
            self.close()
            raise WarmLaneError(
                f"the warm server {why} (limit {timeout_s:.0f} s); its log {self.log}:\n"
                f"{read_tail(self.log, 30)}\nWay out: run with --chaos-launch cli."
            )
        self.info = ready
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def cuda_initialized(self) -> bool:
        return bool(self.info.get("cuda_initialized"))

    def close(self, timeout_s: float = 15.0) -> list[ProcId]:
        """Stop the server and everything forked from it; return what survived (nothing)."""
        if self.channel is not None and self.dead is None:
            with contextlib.suppress(OSError):
                self.channel.send({"op": "shutdown"})
            end = time.monotonic() + timeout_s
            with contextlib.suppress(OSError, PeerClosed, ValueError):
                while time.monotonic() < end:
                    message = self.channel.receive(end - time.monotonic())
                    if message is None or message.get("event") == "bye":
                        break
                    self._dispatch(message)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=timeout_s)
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.dead = self.dead or "closed"
        return self.registry.kill_all()

    def __enter__(self) -> WarmServerProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- launches -------------------------------------------------------------------------
    def launch(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> WarmAgent:
        """Fork one agent running ``torch.distributed.run ARGV``; return its handle."""
        channel = self._alive()
        self._count += 1
        launch_id = f"l{self._count}"
        channel.send(
            {
                "op": "launch",
                "id": launch_id,
                "argv": argv,
                "env": env,
                # The server runs in a folder of its own: a relative path would name
                # another file there.
                "cwd": str(cwd.absolute()),
                "log": str(log.absolute()),
            }
        )
        end = time.monotonic() + REPLY_DEADLINE_S
        while True:
            message = self._next(end - time.monotonic())
            if message is None:
                raise WarmLaneError(
                    f"the warm server did not answer a launch in {REPLY_DEADLINE_S} s; "
                    f"its log: {self.log}"
                )
            if message.get("id") == launch_id and message.get("event") == "started":
                return WarmAgent(self, launch_id, int(message["pid"]))
            if message.get("id") == launch_id and message.get("event") == "error":
                raise WarmLaneError(f"the warm server could not launch: {message.get('message')}")
            self._dispatch(message)

    def pump(self, timeout_s: float) -> None:
        """Handle what the server says within ``timeout_s`` (at least everything buffered)."""
        if self.dead is not None or self.channel is None:
            return
        message = self._next(max(0.0, timeout_s))
        while message is not None:
            self._dispatch(message)
            message = self._next(0.0)

    def _next(self, timeout_s: float) -> Message | None:
        channel = self._alive()
        try:
            return channel.receive(max(0.0, timeout_s))
        except (PeerClosed, OSError, ValueError) as exc:
            self._died(f"{type(exc).__name__}: {exc}")
            return None

    def _dispatch(self, message: Message) -> None:
        if message.get("event") == "exited":
            self.exits[str(message["id"])] = int(message["returncode"])

    def _alive(self) -> LineChannel:
        if self.channel is None or self.dead is not None:
            raise WarmLaneError(
                f"the warm server is not running ({self.dead or 'not started'}); "
                f"its log: {self.log}"
            )
        return self.channel

    def _died(self, why: str) -> None:
        """The server vanished: its agents are orphans now; kill them (they are recorded)."""
        code = self.proc.poll() if self.proc else None
        self.dead = f"the warm server died ({why}; exit status {code}); log {self.log}"
        self.registry.kill_all()


class WarmAgent:
    """A Popen-like handle on an agent living in the warm server (what TorchrunGroup needs)."""

    def __init__(self, server: WarmServerProcess, launch_id: str, pid: int) -> None:
        self.server = server
        self.launch_id = launch_id
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        code = self.server.exits.get(self.launch_id)
        if code is None and self.server.dead is not None:
            return -signal.SIGKILL
        return code

    def poll(self) -> int | None:
        if self.returncode is None:
            self.server.pump(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            remaining = 3600.0 if end is None else end - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(f"warm agent {self.pid}", timeout or 0.0)
            self.server.pump(remaining)
        return int(self.returncode)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


class WarmSpawner:
    """Agents forked by a warm server, each running torchrun's main with torchrun's own
    arguments (``launch.spawner``): the warm lane of a :class:`TorchrunGroup`."""

    def __init__(self, server: WarmServerProcess) -> None:
        self.server = server

    def spawn(
        self, node: int, args: list[str], env: dict[str, str], cwd: Path, log: Path
    ) -> WarmAgent:
        log.write_bytes(b"")
        return self.server.launch(args, env, cwd, log)

    def notes(self) -> list[str]:
        dead = [f"note: {self.server.dead}"] if self.server.dead is not None else []
        return [WARM_NOTE, *dead]


class WarmGroup(TorchrunGroup):
    """The one :class:`TorchrunGroup`, its agents spawned by a :class:`WarmSpawner`."""

    def __init__(
        self,
        spec: LaunchSpec,
        workdir: Path,
        server: WarmServerProcess,
        registry: ProcessRegistry | None = None,
        on_deadline: StackCollector | None = None,
    ) -> None:
        spawner = WarmSpawner(server)
        super().__init__(spec, workdir, registry, on_deadline=on_deadline, spawner=spawner)
        self.server = server


def fork_unsafe_reason(spec: LaunchSpec, server: WarmServerProcess | None) -> str | None:
    """Why this launch must not be forked (then it takes the CLI path), or None."""
    if server is not None and server.cuda_initialized:
        return "CUDA is initialized in the warm server, and CUDA does not survive a fork"
    if workload_backend(spec) == "nccl":
        return "the workload runs on nccl (CUDA), which is not fork-safe"
    return None


def workload_backend(spec: LaunchSpec) -> str | None:
    """The ``backend`` of a ``zephon_chaos.rank`` launch (read from its spec file), or of
    a recipe's (``recipe_run`` sets it in the contract's environment)."""
    if spec.env.get(ENV_BACKEND):
        return spec.env[ENV_BACKEND]
    if not spec.module or str(spec.entry) != WORKLOAD_MODULE or not spec.args:
        return None
    try:
        return str(json.loads(Path(spec.args[0]).read_text()).get("backend", "gloo"))
    except (OSError, ValueError, AttributeError):
        return None


def warm_launcher(
    server: WarmServerProcess,
    root: Path,
    fallback: Launcher | None = None,
    on_group: Callable[[TorchrunGroup], None] | None = None,
    on_deadline: StackCollector | None = None,
) -> Launcher:
    """A ``LaunchSpec -> GroupResult`` launcher through ``server``, each group under ``root``.

    ``fallback`` runs what must not be forked (default: the CLI path under ``root``);
    ``on_group`` sees every group before it starts (to register it for teardown).
    """
    def cli(spec: LaunchSpec) -> GroupResult:
        with TorchrunGroup(spec, root / spec.name, on_deadline=on_deadline) as group:
            if on_group is not None:
                on_group(group)
            return group.run()

    def launch(spec: LaunchSpec) -> GroupResult:
        reason = fork_unsafe_reason(spec, server)
        if reason is not None:
            result = (fallback or cli)(spec)
            result.notes.append(f"note: warm lane not used ({reason}); launched by the CLI path")
            return result
        base, n = spec.name, 0
        while (root / spec.name).exists():  # names are directories under ``root``
            n += 1
            spec = replace(spec, name=f"{base}-w{n}")
        group = WarmGroup(spec, root / spec.name, server, on_deadline=on_deadline)
        if on_group is not None:
            on_group(group)
        try:
            return group.run()  # reaps the group itself
        except BaseException:
            group.kill()
            raise

    return launch


def server_survivors(server: WarmServerProcess) -> list[ProcId]:
    """Processes of the server (itself, agents, workers) still alive: none after ``close``."""
    alive = [p for p in server.registry.refresh() if p.alive()]
    if server.pid is not None:
        me = proc_id(server.pid)
        if me is not None and me.alive() and me not in alive:
            alive.append(me)
    return sorted(alive)
