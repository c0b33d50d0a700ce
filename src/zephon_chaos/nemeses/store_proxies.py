"""Harness side of the store-proxy placements: one proxy per rank, and one for rendezvous.

Aggregation path: before a launch, one proxy per rank listens on 127.0.0.1 (port 0 resolved
by the server) with a placeholder upstream; the ports and names travel in the workload spec,
and each rank points its own proxy at torchrun's store after process-group init
(``faults.placement``). Rendezvous path: one proxy in front of the store the harness hosts
for c10d rendezvous (``LaunchSpec.rdzv_endpoint_for``). Either way the evidence that a fault
acted is the proxy's own link counters (``GET /proxies/{name}/stats``, embedded server).
"""

from __future__ import annotations

import contextlib
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from zephon_chaos.faults.placement import PLACEHOLDER_UPSTREAM
from zephon_chaos.faults.proxy.client import (
    ProxyApiError,
    ProxyInfo,
    ProxyStats,
    ToxicInfo,
    ToxiproxyClient,
)
from zephon_chaos.launch.ports import candidate_port, is_bind_failure

STEADY_PORT_TRIES = 5
"""Candidate ports a steady proxy tries before its creation fails (each a bind race lost)."""
DOWN = "down"
"""The fault name of a disabled proxy (Toxiproxy's ``enabled: false``), beside the toxic types."""


@dataclass
class StoreProxies:
    """Per-rank proxies in front of the aggregation store, on one Toxiproxy server."""

    client: ToxiproxyClient
    world_size: int
    prefix: str = field(default_factory=lambda: f"zc-store-{uuid.uuid4().hex[:8]}")
    names: dict[int, str] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    steady_ports: bool = False
    """Listen on ports outside the ephemeral range (``launch.ports.candidate_port``), for a
    proxy that is disabled and enabled again (a healing ``down``): enabling binds its port
    anew, and while it is down a port of the ephemeral range can be handed to any outgoing
    connection, or taken by a client that reconnects to it and so connects to itself."""

    def __post_init__(self) -> None:
        try:
            for rank in range(self.world_size):
                name = f"{self.prefix}-r{rank}"
                info = self._create(name)
                self.names[rank], self.ports[rank] = name, info.port
        except BaseException:
            self.close()
            raise

    def _create(self, name: str) -> ProxyInfo:
        if not self.steady_ports:
            return self.client.create_proxy(name, PLACEHOLDER_UPSTREAM, "127.0.0.1:0")
        rng = random.Random()
        for _ in range(STEADY_PORT_TRIES - 1):  # candidate_port is a hint: another may bind it
            try:
                return self.client.create_proxy(
                    name, PLACEHOLDER_UPSTREAM, f"127.0.0.1:{candidate_port(rng)}"
                )
            except ProxyApiError as exc:
                if not is_bind_failure(str(exc)):
                    raise
        return self.client.create_proxy(
            name, PLACEHOLDER_UPSTREAM, f"127.0.0.1:{candidate_port(rng)}"
        )

    def spec_fields(self) -> dict[str, Any]:
        """The workload spec fields that place each rank's client behind its proxy."""
        return {
            "store_proxy_ports": {str(r): p for r, p in self.ports.items()},
            "store_proxy_names": {str(r): n for r, n in self.names.items()},
            "proxy_api_url": self.client.url,
        }

    def name(self, rank: int) -> str:
        return self.names[rank]

    def stats(self, rank: int) -> ProxyStats:
        return self.client.proxy_stats(self.names[rank])

    def upstream(self, rank: int) -> str:
        return self.client.get_proxy(self.names[rank]).upstream

    def add_toxic(self, rank: int, toxic: str, **kwargs: Any) -> ToxicInfo | None:
        """A toxic on ``rank``'s link (``down`` disables the proxy instead); returns its info."""
        if toxic == DOWN:
            self.client.disable(self.names[rank])
            return None
        return self.client.add_toxic(self.names[rank], toxic, **kwargs)

    def close(self) -> None:
        for name in self.names.values():
            with contextlib.suppress(ProxyApiError):
                self.client.delete_proxy(name)
        self.names.clear()
        self.ports.clear()


@dataclass
class RendezvousProxy:
    """A proxy in front of the c10d rendezvous store the launcher hosts; agents dial it.

    Pass :meth:`endpoint_for` as ``LaunchSpec.rdzv_endpoint_for``: the launcher calls it once
    per agent with the hosted store's address; the first call creates the proxy, with
    ``toxics`` (keyword arguments of ``add_toxic``) on it before any agent dials.
    """

    client: ToxiproxyClient
    toxics: tuple[dict[str, Any], ...] = ()
    name: str = field(default_factory=lambda: f"zc-rdzv-{uuid.uuid4().hex[:8]}")
    port: int | None = None
    upstream: str | None = None

    def endpoint_for(self, host: str, port: int) -> tuple[str, int]:
        upstream = f"{host}:{port}"
        if self.port is None:
            info = self.client.create_proxy(self.name, upstream, "127.0.0.1:0")
            self.port, self.upstream = info.port, upstream
            for toxic in self.toxics:
                self.client.add_toxic(self.name, **toxic)
        elif upstream != self.upstream:
            raise RuntimeError(
                f"rendezvous proxy {self.name} fronts {self.upstream}, not {upstream}: one "
                "proxy serves one launch; make a new RendezvousProxy for the next"
            )
        return "127.0.0.1", self.port

    def stats(self) -> ProxyStats:
        return self.client.proxy_stats(self.name)

    def close(self) -> None:
        if self.port is not None:
            with contextlib.suppress(ProxyApiError):
                self.client.delete_proxy(self.name)
            self.port = None
