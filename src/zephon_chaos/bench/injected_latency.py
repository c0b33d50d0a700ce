"""Injected one-way latency between the ranks and the store, and the bytes on the wire.

``proxy`` (default): the embedded Toxiproxy-compatible server, one proxy in front of the
store with a ``latency`` toxic on each direction (one-way L each way, so a round trip costs
2L), and its stats endpoint for the bytes that crossed it. ``client``: no proxy; the counting
store sleeps one round trip (2L) before each request (the fallback where the proxy is not
available). A latency of 0 connects directly in both modes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from zephon_chaos.bench.counting import METER

LatencyVia = Literal["proxy", "client"]
PROXY_NAME = "zc-bench-store"


@dataclass
class StorePath:
    """Where ranks dial for one latency setting, and how to read its wire bytes."""

    host: str
    port: int
    latency_ms: int
    via: str
    _client: Any = None

    def wire_bytes(self) -> int | None:
        """Bytes through the proxy so far, both directions (None without a proxy)."""
        if self._client is None:
            return None
        stats = self._client.proxy_stats(PROXY_NAME)
        return int(stats.upstream.bytes_received + stats.downstream.bytes_received)


def proxy_available() -> str | None:
    """None if the embedded proxy can be used here, else why not."""
    try:
        from zephon_chaos.faults.proxy.client import ToxiproxyClient  # noqa: F401
        from zephon_chaos.faults.proxy.embedded import EmbeddedToxiproxy  # noqa: F401
    except ImportError as exc:
        return f"the embedded proxy is not available ({exc})"
    return None


@contextlib.contextmanager
def store_path(
    host: str, port: int, latency_ms: int, via: LatencyVia
) -> Iterator[StorePath]:
    """Yield the endpoint ranks should dial for ``latency_ms``; undo everything after."""
    if latency_ms <= 0:
        yield StorePath(host, port, 0, "direct")
        return
    if via == "client":
        METER.delay_s = 2 * latency_ms / 1000.0
        try:
            yield StorePath(host, port, latency_ms, "client")
        finally:
            METER.delay_s = 0.0
        return
    from zephon_chaos.faults.proxy.client import ToxiproxyClient
    from zephon_chaos.faults.proxy.embedded import EmbeddedToxiproxy

    with EmbeddedToxiproxy() as server:
        client = ToxiproxyClient(server.url, timeout_s=10.0)
        try:
            proxy = client.create_proxy(PROXY_NAME, upstream=f"{host}:{port}")
            for stream in ("upstream", "downstream"):
                client.add_toxic(
                    PROXY_NAME,
                    "latency",
                    stream=stream,
                    name=f"latency-{stream}",
                    attributes={"latency": int(latency_ms)},
                )
            yield StorePath(proxy.host, proxy.port, latency_ms, "proxy", client)
        finally:
            with contextlib.suppress(Exception):
                client.cleanup(everything=True)
            client.close()
