"""A torchrun group with one agent per host of a :class:`~zephon_chaos.launch.netns.HostNetwork`.

Each agent runs as ``ip netns exec <host> python -m torch.distributed.run ...`` (``ip`` execs
the interpreter, so the agent's PID is the one the launcher recorded) with ``--local-addr`` its
host's address. On the c10d path host 0 hosts the rendezvous store (``is_host=true``, the
store listens on every interface of its namespace) and, as node rank 0, the workers' store:
``MASTER_ADDR`` is host 0's address, never loopback. On the static path host 0's agent binds
``--master-port``; the port is private to the namespace, so no draw and no race. Gloo binds
the host's ``eth0``. Everything else (PID records, deadlines, whole-tree kill, statuses) is
the launcher's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from zephon_chaos.launch.group import StackCollector, TorchrunGroup
from zephon_chaos.launch.launch_spec import LaunchSpec
from zephon_chaos.launch.netns import IFNAME, HostNetwork
from zephon_chaos.launch.result import GroupResult
from zephon_chaos.launch.spawner import CliSpawner
from zephon_chaos.procs import ProcessRegistry

RDZV_PORT = 29400
MASTER_PORT = 29500
"""Ports inside host 0's namespace: nothing else listens there, so fixed ports cannot clash."""


class NetnsGroup(TorchrunGroup):
    """One agent per namespaced host; ``network`` must have ``spec.hosts`` hosts."""

    places_hosts = True

    def __init__(
        self,
        spec: LaunchSpec,
        workdir: Path,
        network: HostNetwork,
        registry: ProcessRegistry | None = None,
        on_deadline: StackCollector | None = None,
        python: str = sys.executable,
    ) -> None:
        if spec.hosts != network.size or spec.nnodes != network.size:
            raise ValueError(
                f"spec {spec.name!r} asks for hosts={spec.hosts}, nnodes={spec.nnodes} on a "
                f"network of {network.size} hosts; they must be equal"
            )
        self.network = network
        spawner = CliSpawner(python, prefix=lambda node: network.host(node).exec_prefix())
        super().__init__(
            spec, workdir, registry, on_deadline=on_deadline, python=python, spawner=spawner
        )

    def env(self) -> dict[str, str]:
        env = super().env()
        if "GLOO_SOCKET_IFNAME" not in self.spec.env:
            env["GLOO_SOCKET_IFNAME"] = IFNAME
        return env

    def _rendezvous_args(self, node: int) -> list[str]:
        spec, host = self.spec, self.network.host(node)
        store_host = self.network.host(0).address
        argv = ["--nnodes", str(spec.nnodes), "--local-addr", host.address]
        if spec.path == "static":
            argv += ["--node-rank", str(node), "--master-addr", store_host]
            return [*argv, "--master-port", str(MASTER_PORT)]
        conf = f"is_host={'true' if node == 0 else 'false'},join_timeout=60"
        argv += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{store_host}:{RDZV_PORT}"]
        return [*argv, "--rdzv-id", self.registry.tag, "--rdzv-conf", conf]

    def host_of_rank(self, rank: int) -> int:
        """The host a global rank runs on (node ranks follow host order on both paths)."""
        return rank // self.spec.nproc

    def ranks_on(self, host: int) -> list[int]:
        return list(range(host * self.spec.nproc, (host + 1) * self.spec.nproc))


def run_on_hosts(
    spec: LaunchSpec, workdir: Path, on_deadline: StackCollector | None = None
) -> GroupResult:
    """Run ``spec`` on a host network of its own, made for it and removed after it."""
    with (
        HostNetwork(spec.hosts) as network,
        NetnsGroup(spec, workdir, network, on_deadline=on_deadline) as group,
    ):
        return group.run()
