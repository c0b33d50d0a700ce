"""A Toxiproxy-compatible proxy layer: an embedded server, a real one when configured, a client.

Split as Toxiproxy itself is: ``api`` (routes and thin handlers) over ``transport`` (HTTP/1.1)
with ``middleware`` (rules for every request) and ``api_errors`` (its error answers);
``proxies`` (listeners, connections, the proxy collection); ``toxic_collection`` (a proxy's
toxics, requests decoded and checked); ``link`` (one direction with its toxic chain);
``toxics`` (one module per toxic); plus ``client`` (our typed client), ``embedded`` (server
selection and lifetimes), ``options`` and ``cli``.

The names below load on first use (PEP 562): the client pulls in ``requests`` (about 180 ms),
and ``zephon-chaos`` imports ``options`` from here to build every command's parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zephon_chaos.faults.proxy.client import (
        ProxyApiError,
        ProxyInfo,
        ProxyStats,
        ToxicInfo,
        ToxiproxyClient,
    )
    from zephon_chaos.faults.proxy.embedded import (
        EmbeddedToxiproxy,
        ProxyServerError,
        ToxiproxyServer,
        choose_kind,
        start_server,
    )
    from zephon_chaos.faults.proxy.toxics import TOXIC_TYPES

_HOMES = {
    "ProxyApiError": "client",
    "ProxyInfo": "client",
    "ProxyStats": "client",
    "ToxicInfo": "client",
    "ToxiproxyClient": "client",
    "EmbeddedToxiproxy": "embedded",
    "ProxyServerError": "embedded",
    "ToxiproxyServer": "embedded",
    "choose_kind": "embedded",
    "start_server": "embedded",
    "TOXIC_TYPES": "toxics",
}

__all__ = [
    "TOXIC_TYPES",
    "EmbeddedToxiproxy",
    "ProxyApiError",
    "ProxyInfo",
    "ProxyServerError",
    "ProxyStats",
    "ToxicInfo",
    "ToxiproxyClient",
    "ToxiproxyServer",
    "choose_kind",
    "start_server",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
