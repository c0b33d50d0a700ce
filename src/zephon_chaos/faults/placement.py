"""Rank side of the store-proxy placement: point this rank's own proxy at its store.

The harness creates one proxy per rank before the launch (listening on 127.0.0.1, its
upstream a placeholder, since torchrun picks the store's port); after process-group init a
rank knows MASTER_ADDR/MASTER_PORT, sets its proxy's upstream through the Toxiproxy API and
aggregates through ``torch://127.0.0.1:<its proxy port>``. With aggregation
``store_explicit`` the store is the one the harness hosts (``spec.store_uri``,
``torch://host:port``), and that is the upstream. Only the store client's traffic passes the
proxy: gloo connects rank to rank directly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from zephon_chaos.errors import HarnessError

PLACEHOLDER_UPSTREAM = "127.0.0.1:9"
"""Upstream of a proxy whose store is not known yet (the discard port; never dialed)."""


class PlacementError(HarnessError, RuntimeError):
    """A rank could not route its store client through its proxy; says why and what to fix."""


@dataclass(frozen=True)
class Placement:
    rank: int
    proxy: str
    listen_port: int
    upstream: str
    enabled: bool = True

    @property
    def store_uri(self) -> str:
        return f"torch://127.0.0.1:{self.listen_port}"

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


def place_store_proxy(
    spec: Any, rank: int, env: Mapping[str, str] | None = None
) -> Placement | None:
    """Set this rank's proxy upstream to MASTER_ADDR:MASTER_PORT; None if it has no proxy."""
    env = os.environ if env is None else env
    port = spec.store_proxy_ports.get(str(rank))
    if port is None:
        return None
    name = spec.store_proxy_names.get(str(rank))
    if not name or not spec.proxy_api_url:
        raise PlacementError(
            f"rank {rank} has a store proxy port ({port}) but no proxy name or API URL; the "
            "spec needs store_proxy_names and proxy_api_url too (the store_proxy fixture sets all)"
        )
    host, master_port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if spec.pipeline.aggregation == "store_explicit":
        netloc = (spec.store_uri or "").partition("://")[2].rstrip("/")
        host, _, master_port = netloc.rpartition(":")
        if not host or not master_port.isdigit():
            raise PlacementError(
                f"rank {rank}: aggregation 'store_explicit' needs spec.store_uri as "
                f"torch://host:port to point its proxy at, not {spec.store_uri!r}"
            )
    elif not host or not master_port:
        raise PlacementError(
            f"rank {rank}: MASTER_ADDR/MASTER_PORT are not set, so the store's address is "
            "unknown; launch under torchrun and call init_process_group first"
        )
    from zephon_chaos.faults.proxy.client import ProxyApiError, ToxiproxyClient

    upstream = f"{host}:{master_port}"
    try:
        with ToxiproxyClient(spec.proxy_api_url, timeout_s=10.0) as client:
            info = client.update_proxy(name, upstream=upstream)
    except ProxyApiError as exc:
        raise PlacementError(
            f"rank {rank} could not point its store proxy {name!r} at {upstream}: {exc}"
        ) from exc
    if info.port != int(port):
        raise PlacementError(
            f"rank {rank}: proxy {name!r} listens on {info.listen} after the update, not on "
            f"port {port}; was it changed behind the harness's back?"
        )
    # A proxy the harness disabled before the launch stays down: the fault 'down at start'.
    return Placement(rank, name, info.port, info.upstream, info.enabled)
