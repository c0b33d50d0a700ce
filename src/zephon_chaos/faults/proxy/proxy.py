"""Proxies: a listener, its connections and its toxics; and the collection of proxies.

Mirrors Toxiproxy's ``Proxy``/``ProxyCollection``: a disabled proxy closes its listener and
every live connection; enabling it listens again on the address it had (the resolved port,
so a proxy created on port 0 comes back on the same port). Addresses are written as Go writes
them (``127.0.0.1:3310``, ``[::1]:3310``) and listen errors carry Go's text.

Everything runs on the embedded server's event loop; nothing here is thread-safe by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zephon_chaos.faults.proxy.errors import (
    PROXY_ALREADY_EXISTS,
    PROXY_NOT_FOUND,
    TOXIC_ALREADY_EXISTS,
    TOXIC_NOT_FOUND,
    ApiError,
    ProxyAlreadyStarted,
    internal,
)
from zephon_chaos.faults.proxy.link import DirectionStats, Link, LinkOwner, SocketEnd
from zephon_chaos.faults.proxy.toxics import Direction, Toxic, ToxicCounters

log = logging.getLogger(__name__)

UPSTREAM_CONNECT_TIMEOUT_S = 10.0
LISTEN_BACKLOG = 1024


# Addresses, parsed and reported as Go's net package does.
def split_host_port(address: str, op: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort``; errors start with ``op`` (``listen tcp``, ``dial tcp``)."""

    def fail(why: str) -> ApiError:
        return internal(f"{op}: address {address}: {why}")

    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise fail("missing ']' in address")
        host, rest = address[1:end], address[end + 1 :]
        if not rest.startswith(":"):
            raise fail("missing port in address" if not rest else "too many colons in address")
        return host, rest[1:]
    if ":" not in address:
        raise fail("missing port in address")
    host, _, port = address.rpartition(":")
    if ":" in host:
        raise fail("too many colons in address")
    return host, port


def parse_port(port: str, address: str, op: str) -> int:
    if port == "":
        return 0
    if port.isdigit():
        number = int(port)
        if number > 65535:
            raise internal(f"{op}: address {address}: invalid port")
        return number
    try:
        return socket.getservbyname(port, "tcp")
    except OSError:
        raise internal(f"{op}: lookup tcp/{port}: unknown port") from None


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


async def resolve(host: str, port: int, op: str) -> list[str]:
    """The IP addresses a host name stands for, IPv4 first (Go's preference for Listen)."""
    if host == "":
        return []
    with contextlib.suppress(ValueError):
        return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise internal(f"{op}: lookup {host}: no such host") from None
    found = [str(info[4][0]) for info in infos]
    ordered = [a for a in found if ":" not in a] + [a for a in found if ":" in a]
    return list(dict.fromkeys(ordered))


def _strerror(exc: OSError) -> str:
    """Go prints errno text in lower case (``address already in use``)."""
    text = os.strerror(exc.errno) if exc.errno else str(exc)
    return text[:1].lower() + text[1:]


async def bind_listener(listen: str, *, allow_non_loopback: bool) -> socket.socket:
    """Bind and listen like Go's ``net.Listen("tcp", listen)``, loopback only unless allowed."""
    op = "listen tcp"
    host, port_text = split_host_port(listen, op)
    port = parse_port(port_text, listen, op)
    addresses = await resolve(host, port, op)
    if not addresses:
        if not allow_non_loopback:
            raise internal(
                f"{op} {listen}: refused: this embedded Toxiproxy binds loopback addresses "
                f"only; listen on 127.0.0.1:{port} (or start it with --allow-non-loopback)"
            )
        addresses = ["0.0.0.0"]
    address = addresses[0]
    if not allow_non_loopback and not is_loopback(address):
        raise internal(
            f"{op} {format_address(address, port)}: refused: this embedded Toxiproxy binds "
            f"loopback addresses only; use 127.0.0.1 (or start it with --allow-non-loopback)"
        )
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setblocking(False)
        sock.bind((address, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        step = (
            "listen"
            if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)
            else "bind"
        )
        raise internal(f"{op} {format_address(address, port)}: {step}: {_strerror(exc)}") from None
    return sock


def same_listen(a: str, b: str) -> bool:
    """Whether two listen addresses name the same socket address (``localhost`` = 127.0.0.1)."""

    def norm(address: str) -> str:
        try:
            host, port = split_host_port(address, "listen tcp")
        except ApiError:
            return address
        host = "127.0.0.1" if host == "localhost" else host
        with contextlib.suppress(ValueError):
            host = str(ipaddress.ip_address(host))
        return format_address(host, int(port) if port.isdigit() else 0)

    return a == b or norm(a) == norm(b)


@dataclass
class ProxyStats:
    """Counters of one proxy: the evidence faults tests read (an embedded-only extension)."""

    connections_accepted: int = 0
    connections_closed: int = 0
    connections_closed_by_toxic: int = 0
    upstream_connect_failures: int = 0
    resets_sent: int = 0  # sockets closed with RST (a reset_peer firing resets two)
    upstream: DirectionStats = field(default_factory=DirectionStats)
    downstream: DirectionStats = field(default_factory=DirectionStats)
    toxics: dict[str, ToxicCounters] = field(default_factory=dict)

    def direction(self, direction: Direction) -> DirectionStats:
        return self.upstream if direction is Direction.UPSTREAM else self.downstream


class Connection(LinkOwner):
    """A client connection and its upstream connection, joined by two links."""

    def __init__(self, proxy: Proxy, client: SocketEnd) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = SocketEnd()
        self.links: dict[Direction, Link] = {}
        self.task: asyncio.Task[None] | None = None
        self.done = False
        self._toxic_closed = False
        client.on_lost = self._end_lost
        self.upstream.on_lost = self._end_lost

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        proxy = self.proxy
        try:
            host, port_text = split_host_port(proxy.upstream, "dial tcp")
            port = parse_port(port_text, proxy.upstream, "dial tcp")
            await asyncio.wait_for(
                loop.create_connection(lambda: self.upstream, host or "localhost", port),
                UPSTREAM_CONNECT_TIMEOUT_S,
            )
        except (OSError, ApiError, asyncio.TimeoutError) as exc:
            proxy.stats.upstream_connect_failures += 1
            log.info("proxy %s: cannot reach upstream %s: %s", proxy.name, proxy.upstream, exc)
            self.client.abort(reset=False)
            self._finish()
            return
        if self.done:
            self.upstream.abort(reset=False)
            return
        chains = proxy.toxics.chains
        self.links[Direction.UPSTREAM] = Link(
            self, Direction.UPSTREAM, self.client, self.upstream,
            proxy.stats.upstream, chains[Direction.UPSTREAM],
        )  # fmt: skip
        self.links[Direction.DOWNSTREAM] = Link(
            self, Direction.DOWNSTREAM, self.upstream, self.client,
            proxy.stats.downstream, chains[Direction.DOWNSTREAM],
        )  # fmt: skip
        self.client.set_paused("setup", False)

    # LinkOwner
    def toxic_closed(self) -> None:
        if not self._toxic_closed:
            self._toxic_closed = True
            self.proxy.stats.connections_closed_by_toxic += 1

    def reset(self) -> None:
        for end in (self.client, self.upstream):
            if end.abort(reset=True):
                self.proxy.stats.resets_sent += 1

    def abort(self) -> None:
        """Close both sockets now (the proxy was disabled or deleted)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
        for link in self.links.values():
            link.abort()
        self.client.abort(reset=False)
        self.upstream.abort(reset=False)
        self._finish()

    def _end_lost(self, end: SocketEnd) -> None:
        if self.client.lost and (self.upstream.lost or self.upstream.transport is None):
            self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        for link in self.links.values():
            link.abort()
        self.proxy.connection_done(self)


class ToxicCollection:
    """The toxics of one proxy, one ordered chain per direction, applied to live links too."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.chains: dict[Direction, list[Toxic]] = {d: [] for d in Direction}

    def all(self) -> list[Toxic]:
        return [t for d in Direction for t in self.chains[d]]

    def get(self, name: str) -> Toxic | None:
        return next((t for t in self.all() if t.name == name), None)

    def _links(self, direction: Direction) -> Iterable[Link]:
        for conn in list(self.proxy.connections):
            link = conn.links.get(direction)
            if link is not None:
                yield link

    def add(self, toxic: Toxic) -> Toxic:
        if self.get(toxic.name) is not None:
            raise TOXIC_ALREADY_EXISTS
        toxic.counters = self.proxy.stats.toxics.setdefault(toxic.name, ToxicCounters())
        self.chains[toxic.direction].append(toxic)
        for link in self._links(toxic.direction):
            link.add_toxic(toxic)
        return toxic

    def replace(self, toxic: Toxic) -> Toxic:
        """Swap in new attributes/toxicity for a toxic of the same name and direction."""
        chain = self.chains[toxic.direction]
        index = next(i for i, t in enumerate(chain) if t.name == toxic.name)
        toxic.counters = chain[index].counters
        chain[index] = toxic
        for link in self._links(toxic.direction):
            link.update_toxic(toxic)
        return toxic

    def remove(self, name: str) -> None:
        toxic = self.get(name)
        if toxic is None:
            raise TOXIC_NOT_FOUND
        self.chains[toxic.direction].remove(toxic)
        for link in self._links(toxic.direction):
            link.remove_toxic(name)

    def reset(self) -> None:
        for toxic in self.all():
            self.remove(toxic.name)


class Proxy:
    """One named proxy: ``listen`` → ``upstream``, with toxics and counters."""

    def __init__(
        self, name: str, listen: str, upstream: str, *, allow_non_loopback: bool = False
    ) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.allow_non_loopback = allow_non_loopback
        self.toxics = ToxicCollection(self)
        self.connections: set[Connection] = set()
        self.stats = ProxyStats()
        self._server: asyncio.AbstractServer | None = None

    def as_json(self) -> dict[str, Any]:
        """Go's ``proxyToxics`` shape: name, listen, upstream, enabled, toxics."""
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [t.as_json() for t in self.toxics.all()],
        }

    def stats_json(self) -> dict[str, Any]:
        stats = self.stats
        return {
            "name": self.name,
            "enabled": self.enabled,
            "connections_accepted": stats.connections_accepted,
            "connections_active": len(self.connections),
            "connections_closed": stats.connections_closed,
            "connections_closed_by_toxic": stats.connections_closed_by_toxic,
            "upstream_connect_failures": stats.upstream_connect_failures,
            "resets_sent": stats.resets_sent,
            "upstream": stats.upstream.as_json(),
            "downstream": stats.downstream.as_json(),
            "toxics": {name: c.as_json() for name, c in stats.toxics.items()},
        }

    async def start(self) -> None:
        if self.enabled:
            raise ProxyAlreadyStarted(self.name)
        sock = await bind_listener(self.listen, allow_non_loopback=self.allow_non_loopback)
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._new_client_end, sock=sock, backlog=LISTEN_BACKLOG
            )
        except OSError as exc:
            sock.close()
            raise internal(f"listen tcp {self.listen}: {_strerror(exc)}") from None
        host, port = sock.getsockname()[:2]
        self.listen = format_address(host, port)
        self.enabled = True

    async def stop(self) -> None:
        if not self.enabled:
            return
        self.enabled = False
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in list(self.connections):
            conn.abort()
        if server is not None:
            await server.wait_closed()

    async def update(self, listen: str, upstream: str, enabled: bool) -> None:
        """Go's ``Proxy.Update``: a new address restarts the proxy; then apply ``enabled``."""
        if listen != self.listen or upstream != self.upstream:
            await self.stop()
            self.listen, self.upstream = listen, upstream
        if enabled != self.enabled:
            if enabled:
                await self.start()
            else:
                await self.stop()

    def _new_client_end(self) -> SocketEnd:
        return SocketEnd(on_made=self._client_connected)

    def _client_connected(self, end: SocketEnd) -> None:
        end.set_paused("setup", True)
        conn = Connection(self, end)
        self.connections.add(conn)
        self.stats.connections_accepted += 1
        conn.task = asyncio.get_running_loop().create_task(conn.connect(), name="proxy-dial")

    def connection_done(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.stats.connections_closed += 1


class ProxyCollection:
    """All proxies of a server, by name."""

    def __init__(self, *, allow_non_loopback: bool = False) -> None:
        self.proxies: dict[str, Proxy] = {}
        self.allow_non_loopback = allow_non_loopback

    def new_proxy(self, name: str, listen: str, upstream: str) -> Proxy:
        return Proxy(name, listen, upstream, allow_non_loopback=self.allow_non_loopback)

    def get(self, name: str) -> Proxy:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise PROXY_NOT_FOUND
        return proxy

    async def add(self, proxy: Proxy, start: bool) -> None:
        if proxy.name in self.proxies:
            raise PROXY_ALREADY_EXISTS
        if start:
            await proxy.start()
        self.proxies[proxy.name] = proxy

    async def add_or_replace(self, proxy: Proxy, start: bool) -> Proxy:
        """Go's ``AddOrReplace``: an identical proxy is kept (with its toxics) as it is."""
        existing = self.proxies.get(proxy.name)
        if existing is not None:
            if existing.upstream == proxy.upstream and same_listen(existing.listen, proxy.listen):
                return existing
            await existing.stop()
        if start:
            await proxy.start()
        self.proxies[proxy.name] = proxy
        return proxy

    async def remove(self, name: str) -> None:
        proxy = self.get(name)
        await proxy.stop()
        del self.proxies[name]

    async def clear(self) -> None:
        for name in list(self.proxies):
            await self.remove(name)
