"""A Toxiproxy-compatible proxy layer: an embedded server, a real one when configured, a client.

Split as Toxiproxy itself is: ``api`` (routes and thin handlers) over ``transport`` (HTTP/1.1)
with ``middleware`` (rules for every request); ``proxy`` (listeners, connections, the proxy
collection); ``toxic_collection`` (a proxy's toxics, requests decoded and checked); ``link``
(one direction with its toxic chain); ``toxics`` (one module per toxic); plus ``client`` (our
typed client), ``embedded`` (server selection and lifetimes) and ``cli``.
"""

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
