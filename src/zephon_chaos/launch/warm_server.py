"""The warm server: a long-lived process that has imported torch and zephon, forking agents.

``python -m zephon_chaos.launch.warm_server FD`` serves one harness over the connected socket
FD (JSON lines, see :mod:`warm_protocol`):

- it answers ``{"event": "ready", ...}`` once its imports are done;
- ``{"op": "launch", "id", "argv", "env", "cwd", "log"}`` forks an agent (see
  :mod:`warm_agent`) and answers ``{"event": "started", "id", "pid"}``; when that agent ends,
  ``{"event": "exited", "id", "pid", "returncode"}`` (negative = killed by that signal);
- ``{"op": "shutdown"}``, or the harness closing the socket, kills every agent's process
  group, reaps them and exits.

It never runs a rank itself and never touches CUDA, so a fork from it is as safe as a fork
from a fresh interpreter that imported the same modules.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from typing import Any

from zephon_chaos.launch.warm_protocol import LineChannel, PeerClosed

WARM_IMPORTS = (
    "torch",
    "torch.distributed",
    "torch.distributed.run",
    "torch.distributed.elastic.agent.server.local_elastic_agent",
    "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend",
    "torch.distributed.elastic.rendezvous.static_tcp_rendezvous",
    "torch.multiprocessing",
    "zephon",
    "zephon_chaos.rank.main",
    "zephon_chaos.workload.data",
)


class Agent:
    def __init__(self, launch_id: str, pid: int, pidfd: int) -> None:
        self.launch_id = launch_id
        self.pid = pid
        self.pidfd = pidfd


class WarmServer:
    """The server loop: control messages in, agents forked, their exits reported."""

    def __init__(self, channel: LineChannel) -> None:
        self.channel = channel
        self.selector = selectors.DefaultSelector()
        self.selector.register(channel.sock, selectors.EVENT_READ, None)
        self.agents: dict[int, Agent] = {}

    def serve(self) -> int:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    if not self._control():
                        return 0
                else:
                    self._reap(key.data)

    def _control(self) -> bool:
        try:
            self.channel.fill()
        except PeerClosed:
            self.shutdown()
            return False
        while (message := self.channel.pending()) is not None:
            op = message.get("op")
            if op == "launch":
                self._launch(message)
            elif op == "shutdown":
                self.shutdown()
                with contextlib.suppress(OSError):
                    self.channel.send({"event": "bye"})
                return False
            else:
                self.channel.send({"event": "error", "message": f"unknown op {op!r}"})
        return True

    def _launch(self, request: dict[str, Any]) -> None:
        launch_id = str(request["id"])
        try:
            pid = os.fork()
        except OSError as exc:
            self.channel.send({"event": "error", "id": launch_id, "message": f"fork: {exc}"})
            return
        if pid == 0:
            self._in_child(request)
        pidfd = os.pidfd_open(pid)
        agent = Agent(launch_id, pid, pidfd)
        self.agents[pid] = agent
        self.selector.register(pidfd, selectors.EVENT_READ, agent)
        self.channel.send({"event": "started", "id": launch_id, "pid": pid})

    def _in_child(self, request: dict[str, Any]) -> None:
        """The forked agent: drop the server's descriptors, run torchrun's code, exit."""
        code = 1
        try:
            self.selector.close()
            for agent in self.agents.values():
                os.close(agent.pidfd)
            self.channel.sock.close()
            from zephon_chaos.launch.warm_agent import run_agent

            code = run_agent(request)
        except BaseException:
            with contextlib.suppress(Exception):
                traceback.print_exc()
        finally:
            os._exit(code)

    def _reap(self, agent: Agent) -> None:
        self.selector.unregister(agent.pidfd)
        os.close(agent.pidfd)
        self.agents.pop(agent.pid, None)
        _, status = os.waitpid(agent.pid, 0)
        self.channel.send(
            {
                "event": "exited",
                "id": agent.launch_id,
                "pid": agent.pid,
                "returncode": os.waitstatus_to_exitcode(status),
            }
        )

    def shutdown(self) -> None:
        """Kill every agent's process group (its workers included) and reap the agents."""
        for agent in list(self.agents.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(agent.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent.pid, signal.SIGKILL)
        for agent in list(self.agents.values()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(agent.pid, 0)
            with contextlib.suppress(OSError):
                os.close(agent.pidfd)
        self.agents.clear()


def _warm_up() -> float:
    started = time.monotonic()
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    for name in os.environ.get("ZEPHON_CHAOS_WARM_IMPORTS", "").split(","):
        if name.strip():
            importlib.import_module(name.strip())
    return time.monotonic() - started


def _cuda_initialized() -> bool:
    import torch

    return bool(torch.cuda.is_initialized())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m zephon_chaos.launch.warm_server FD", file=sys.stderr)
        return 2
    channel = LineChannel(socket.socket(fileno=int(args[0])))
    try:
        import_s = _warm_up()
    except BaseException as exc:
        traceback.print_exc()
        with contextlib.suppress(OSError):
            channel.send({"event": "failed", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    channel.send(
        {
            "event": "ready",
            "pid": os.getpid(),
            "import_s": import_s,
            "cuda_initialized": _cuda_initialized(),
            "python": sys.executable,
        }
    )
    return WarmServer(channel).serve()


if __name__ == "__main__":
    sys.exit(main())
