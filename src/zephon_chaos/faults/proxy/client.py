"""Our client of the Toxiproxy API: typed, with timeouts, and loud on every failure.

``toxiproxy-python`` 0.1.1 keeps one global host/port, sets no request timeout and lets 500s
pass silently; this client fixes that without touching the library: each instance has its own
URL and timeout, and any non-2xx answer raises :class:`ProxyApiError` with the server's
message. It speaks the plain HTTP API with ``requests``, so it works against a real
``toxiproxy-server`` and against the embedded one alike; only :meth:`ToxiproxyClient.proxy_stats`
needs the embedded server (it reads the embedded-only ``/proxies/{name}/stats``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import requests

from zephon_chaos.closing import Closing
from zephon_chaos.errors import HarnessError
from zephon_chaos.faults.proxy.middleware import EMBEDDED_HEADER

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

STREAMS = ("upstream", "downstream")


class ProxyApiError(HarnessError, RuntimeError):
    """A non-2xx answer (or no answer) from the Toxiproxy API."""

    def __init__(self, status: int, message: str, *, method: str = "", url: str = "") -> None:
        self.status = status
        self.message = message
        self.method = method
        self.url = url
        where = f"{method} {url}: " if method else ""
        super().__init__(f"{where}HTTP {status}: {message}" if status else f"{where}{message}")


_Info = TypeVar("_Info", bound="DataclassInstance")


def _from_json(cls: type[_Info], data: Mapping[str, Any], **convert: Callable[[Any], Any]) -> _Info:
    """The dataclass ``cls`` from an API object: each field the value of its own name, through
    its ``convert`` where it has one. A field without a default is required (KeyError); one
    with a default keeps it where the server sends nothing (absent, null or empty)."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        optional = f.default is not MISSING or f.default_factory is not MISSING
        value = data.get(f.name) if optional else data[f.name]
        if optional and not value:
            continue
        values[f.name] = convert[f.name](value) if f.name in convert else value
    return cls(**values)


@dataclass(frozen=True)
class ToxicInfo:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToxicInfo:
        return _from_json(cls, data, toxicity=float, attributes=dict)


def _toxic_infos(toxics: Iterable[Mapping[str, Any]]) -> tuple[ToxicInfo, ...]:
    return tuple(ToxicInfo.from_json(t) for t in toxics)


@dataclass(frozen=True)
class ProxyInfo:
    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[ToxicInfo, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProxyInfo:
        return _from_json(cls, data, enabled=bool, toxics=_toxic_infos)

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


@dataclass(frozen=True)
class DirectionCounters:
    bytes_received: int
    bytes_sent: int
    writes: int


@dataclass(frozen=True)
class ToxicActivity:
    applied: int
    bypassed: int
    chunks: int
    closes: int
    held: tuple[tuple[float, float], ...] = ()
    """When the toxic delayed data: intervals of this machine's monotonic clock."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToxicActivity:
        held = tuple((float(a), float(b)) for a, b in data.get("held") or ())
        return cls(**{**data, "held": held})


def _counters(data: Mapping[str, int]) -> DirectionCounters:
    return DirectionCounters(**data)


def _toxic_activities(toxics: Mapping[str, Mapping[str, Any]]) -> dict[str, ToxicActivity]:
    return {k: ToxicActivity.from_json(v) for k, v in toxics.items()}


@dataclass(frozen=True)
class ProxyStats:
    """What a proxy of the embedded server did: the evidence that a fault fired."""

    name: str
    enabled: bool
    connections_accepted: int
    connections_active: int
    connections_closed: int
    connections_closed_by_toxic: int
    upstream_connect_failures: int
    resets_sent: int
    upstream: DirectionCounters
    downstream: DirectionCounters
    toxics: dict[str, ToxicActivity]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProxyStats:
        return _from_json(
            cls, data, upstream=_counters, downstream=_counters, toxics=_toxic_activities
        )

    def direction(self, stream: str) -> DirectionCounters:
        return self.upstream if stream == "upstream" else self.downstream


class ToxiproxyClient(Closing):
    """A Toxiproxy API client bound to one server URL, with a timeout on every request."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._session = requests.Session()
        self._session.trust_env = False  # an HTTP_PROXY in the environment must not reroute us
        self._session.headers["User-Agent"] = "zephon-chaos"
        self.created: set[str] = set()  # proxies made through this client, for cleanup

    # Plumbing.
    def _request(self, method: str, path: str, body: Any = None) -> requests.Response:
        url = f"{self.url}{path}"
        try:
            response = self._session.request(method, url, json=body, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise ProxyApiError(
                0,
                f"no answer within {self.timeout_s} s ({exc}); is the Toxiproxy server at "
                f"{self.url} running?",
                method=method,
                url=url,
            ) from exc
        if not 200 <= response.status_code < 300:
            raise ProxyApiError(
                response.status_code, _error_message(response), method=method, url=url
            )
        return response

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        return self._request(method, path, body).json()

    @staticmethod
    def _name(name: str) -> str:
        return quote(name, safe="")

    def close(self) -> None:
        self._session.close()

    # Server.
    def version(self) -> str:
        text = self._request("GET", "/version").text.strip()
        with contextlib.suppress(ValueError, TypeError, KeyError):
            return str(json.loads(text)["version"])
        return text  # Toxiproxy before 2.1 answered the bare version

    def is_embedded(self) -> bool:
        """Whether this is our embedded server (the one with ``proxy_stats``)."""
        return EMBEDDED_HEADER in self._request("GET", "/version").headers

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (of every proxy on the server)."""
        self._request("POST", "/reset")

    # Proxies.
    def proxies(self) -> dict[str, ProxyInfo]:
        return {k: ProxyInfo.from_json(v) for k, v in self._json("GET", "/proxies").items()}

    def create_proxy(
        self, name: str, upstream: str, listen: str = "127.0.0.1:0", *, enabled: bool = True
    ) -> ProxyInfo:
        body = {"name": name, "upstream": upstream, "listen": listen, "enabled": enabled}
        proxy = ProxyInfo.from_json(self._json("POST", "/proxies", body))
        self.created.add(name)
        return proxy

    def populate(self, proxies: list[Mapping[str, Any]]) -> list[ProxyInfo]:
        data = self._json("POST", "/populate", list(proxies))
        result = [ProxyInfo.from_json(p) for p in data.get("proxies") or ()]
        self.created.update(p.name for p in result)
        return result

    def get_proxy(self, name: str) -> ProxyInfo:
        return ProxyInfo.from_json(self._json("GET", f"/proxies/{self._name(name)}"))

    def update_proxy(
        self,
        name: str,
        *,
        listen: str | None = None,
        upstream: str | None = None,
        enabled: bool | None = None,
    ) -> ProxyInfo:
        body = {
            k: v
            for k, v in (("listen", listen), ("upstream", upstream), ("enabled", enabled))
            if v is not None
        }
        # POST, not PATCH: every 2.x server accepts it.
        return ProxyInfo.from_json(self._json("POST", f"/proxies/{self._name(name)}", body))

    def enable(self, name: str) -> ProxyInfo:
        return self.update_proxy(name, enabled=True)

    def disable(self, name: str) -> ProxyInfo:
        """Stop listening and drop every live connection of the proxy."""
        return self.update_proxy(name, enabled=False)

    @contextlib.contextmanager
    def disabled(self, name: str) -> Iterator[ProxyInfo]:
        proxy = self.disable(name)
        try:
            yield proxy
        finally:
            self.enable(name)

    def delete_proxy(self, name: str) -> None:
        self._request("DELETE", f"/proxies/{self._name(name)}")
        self.created.discard(name)

    # Toxics.
    def toxics(self, proxy: str) -> list[ToxicInfo]:
        return [
            ToxicInfo.from_json(t)
            for t in self._json("GET", f"/proxies/{self._name(proxy)}/toxics")
        ]

    def get_toxic(self, proxy: str, toxic: str) -> ToxicInfo:
        path = f"/proxies/{self._name(proxy)}/toxics/{self._name(toxic)}"
        return ToxicInfo.from_json(self._json("GET", path))

    def add_toxic(
        self,
        proxy: str,
        type: str,
        *,
        stream: str = "downstream",
        name: str | None = None,
        toxicity: float = 1.0,
        attributes: Mapping[str, int] | None = None,
    ) -> ToxicInfo:
        if stream not in STREAMS:
            raise ValueError(f"stream must be 'upstream' or 'downstream', not {stream!r}")
        body: dict[str, Any] = {
            "type": type,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": dict(attributes or {}),
        }
        if name is not None:
            body["name"] = name
        return ToxicInfo.from_json(self._json("POST", f"/proxies/{self._name(proxy)}/toxics", body))

    def update_toxic(
        self,
        proxy: str,
        toxic: str,
        *,
        attributes: Mapping[str, int] | None = None,
        toxicity: float | None = None,
    ) -> ToxicInfo:
        body: dict[str, Any] = {}
        if attributes is not None:
            body["attributes"] = dict(attributes)
        if toxicity is not None:
            body["toxicity"] = toxicity
        path = f"/proxies/{self._name(proxy)}/toxics/{self._name(toxic)}"
        return ToxicInfo.from_json(self._json("POST", path, body))

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        self._request("DELETE", f"/proxies/{self._name(proxy)}/toxics/{self._name(toxic)}")

    @contextlib.contextmanager
    def toxic(self, proxy: str, type: str, **kwargs: Any) -> Iterator[ToxicInfo]:
        """A toxic for the duration of a ``with`` block."""
        info = self.add_toxic(proxy, type, **kwargs)
        try:
            yield info
        finally:
            with contextlib.suppress(ProxyApiError):
                self.remove_toxic(proxy, info.name)

    # Evidence (embedded server only).
    def proxy_stats(self, name: str) -> ProxyStats:
        """Counters of a proxy; an extension of the embedded server, absent from the real one."""
        try:
            data = self._json("GET", f"/proxies/{self._name(name)}/stats")
        except ProxyApiError as exc:
            if exc.status == 404 and not self.is_embedded():
                raise ProxyApiError(
                    404,
                    f"proxy stats are an extension of the embedded server, and {self.url} is a "
                    f"real toxiproxy-server; unset TOXIPROXY_URL (and take toxiproxy-server "
                    f"off PATH) to use the embedded one",
                    method=exc.method,
                    url=exc.url,
                ) from exc
            raise
        return ProxyStats.from_json(data)

    # Teardown.
    def cleanup(self, *, everything: bool = False) -> None:
        """Delete the proxies this client created (all of them, and reset, if ``everything``)."""
        names = set(self.proxies()) if everything else set(self.created)
        for name in sorted(names):
            with contextlib.suppress(ProxyApiError):
                self.delete_proxy(name)
        self.created.clear()
        if everything:
            self.reset()

    @contextlib.contextmanager
    def python_client(self) -> Iterator[Any]:
        """``toxiproxy-python``'s ``Toxiproxy`` pointed at this server for a ``with`` block.

        The library keeps its host and port in class attributes; they are set through its own
        ``update_api_consumer`` and restored afterwards. Not thread-safe, as the library isn't.
        """
        from toxiproxy import Toxiproxy
        from toxiproxy.api import APIConsumer

        host_port = self.url.split("://", 1)[-1]
        host, _, port = host_port.rpartition(":")
        saved = (APIConsumer.host, APIConsumer.port)
        server = Toxiproxy()
        server.update_api_consumer(host.strip("[]"), int(port))
        try:
            yield server
        finally:
            server.update_api_consumer(*saved)


def _error_message(response: requests.Response) -> str:
    """The ``error`` of a Toxiproxy JSON error body, or the body's text."""
    with contextlib.suppress(ValueError):
        data = response.json()
        if isinstance(data, dict) and "error" in data:
            return str(data["error"])
    return response.text.strip() or response.reason or "no message"
