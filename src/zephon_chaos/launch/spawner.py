"""How a torchrun agent process comes to be: the one thing the launch lanes differ in.

A :class:`~zephon_chaos.launch.group.TorchrunGroup` computes torchrun's arguments (nodes,
rendezvous, log layout, entry point), its environment and its deadline, then hands each agent
to its spawner: :class:`CliSpawner` runs ``python -m torch.distributed.run`` (optionally under
a prefix such as ``ip netns exec``); ``launch.warm.WarmSpawner`` forks torchrun's main from
a pre-warmed server. Whatever starts it, the agent writes the same logs, so one collector
reads every lane's result.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class AgentProcess(Protocol):
    """What the group needs of a running agent (``subprocess.Popen`` has it)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...


class AgentSpawner(Protocol):
    """Starts agent ``node`` from torchrun's own arguments, in a session of its own."""

    def spawn(
        self, node: int, args: list[str], env: dict[str, str], cwd: Path, log: Path
    ) -> AgentProcess: ...

    def notes(self) -> list[str]:
        """Lines the group's result carries about how its agents were started."""
        ...


class CliSpawner:
    """``python -m torch.distributed.run ARGS``, after ``prefix(node)`` (none by default)."""

    def __init__(
        self, python: str = sys.executable, prefix: Callable[[int], list[str]] | None = None
    ) -> None:
        self.python = python
        self.prefix = prefix or (lambda node: [])

    def command(self, node: int) -> list[str]:
        return [*self.prefix(node), self.python, "-m", "torch.distributed.run"]

    def spawn(
        self, node: int, args: list[str], env: dict[str, str], cwd: Path, log: Path
    ) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            return subprocess.Popen(
                self.command(node) + args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )

    def notes(self) -> list[str]:
        return []
