"""Proxies: a listener, its connections and its toxics; and the collection of proxies.

Mirrors Toxiproxy's ``Proxy``/``ProxyCollection``: a disabled proxy closes its listener and
every live connection; enabling it listens again on the address it had (the resolved port,
so a proxy created on port 0 comes back on the same port). Addresses and their errors are
:mod:`.addresses`'; a proxy's toxics are its :class:`.ToxicCollection`.

Everything runs on the embedded server's event loop; nothing here is thread-safe by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from zephon_chaos.faults.proxy import request_json
from zephon_chaos.faults.proxy.addresses import (
    LISTEN_BACKLOG,
    bind_listener,
    format_address,
    parse_port,
    same_listen,
    split_host_port,
    strerror,
)
from zephon_chaos.faults.proxy.api_errors import (
    PROXY_ALREADY_EXISTS,
    PROXY_NOT_FOUND,
    ApiError,
    ProxyAlreadyStarted,
    internal,
)
from zephon_chaos.faults.proxy.link import DirectionStats, Link, LinkOwner, SocketEnd
from zephon_chaos.faults.proxy.toxic_collection import ToxicCollection
from zephon_chaos.faults.proxy.toxics import Direction, ToxicCounters

log = logging.getLogger(__name__)

UPSTREAM_CONNECT_TIMEOUT_S = 10.0


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
        except (TimeoutError, OSError, ApiError) as exc:
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
            raise internal(f"listen tcp {self.listen}: {strerror(exc)}") from None
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

    async def update_json(self, body: bytes) -> None:
        """``POST``/``PATCH /proxies/{name}``: the body's fields over the proxy's own."""
        current = request_json.ProxyInput(self.name, self.listen, self.upstream, self.enabled)
        given = request_json.proxy_update(body, current)
        await self.update(given.listen, given.upstream, bool(given.enabled))

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

    async def create_json(self, body: bytes) -> Proxy:
        """``POST /proxies``: a new proxy, listening unless the body says ``enabled: false``."""
        given = request_json.proxy_create(body)
        proxy = self.new_proxy(given.name, given.listen, given.upstream)
        await self.add(proxy, bool(given.enabled))
        return proxy

    async def populate_json(self, body: bytes) -> tuple[list[Proxy], ApiError | None]:
        """Go's ``PopulateJson``: the proxies applied, and the error that stopped it if any."""
        applied: list[Proxy] = []
        try:
            for given in request_json.populate(body):
                proxy = self.new_proxy(given.name, given.listen, given.upstream)
                enabled = True if given.enabled is None else given.enabled
                applied.append(await self.add_or_replace(proxy, enabled))
        except ApiError as error:
            return applied, error
        return applied, None

    async def reset(self) -> None:
        """``POST /reset``: every proxy enabled, every toxic removed."""
        for proxy in list(self.proxies.values()):
            with contextlib.suppress(ProxyAlreadyStarted):
                await proxy.start()
            proxy.toxics.reset()

    async def remove(self, name: str) -> None:
        proxy = self.get(name)
        await proxy.stop()
        del self.proxies[name]

    async def clear(self) -> None:
        for name in list(self.proxies):
            await self.remove(name)
