"""The Toxiproxy HTTP API: its route table and thin handlers, as ``api.go`` has them.

Status codes, JSON shapes and error texts are those of ``toxiproxy-server`` (v2): creating a
proxy answers 201, creating a toxic 200, deletions 204; errors are Go's JSON envelope
(:mod:`.middleware`). Decoding and checks live with the collections (:mod:`.proxies`,
:mod:`.toxic_collection`); HTTP itself in :mod:`.transport`.

One extension, on the embedded server only: ``GET /proxies/{name}/stats`` returns the proxy's
counters (connections accepted and closed, closes by toxics, resets sent, bytes and writes per
direction, per-toxic activity). A real ``toxiproxy-server`` answers it with 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from zephon_chaos.faults.proxy import gojson
from zephon_chaos.faults.proxy.addresses import bind_listener, format_address
from zephon_chaos.faults.proxy.middleware import (
    error_envelope,
    handler_timeout,
    json_response,
    stamp,
    stamped,
    stop_browsers,
    wrap,
)
from zephon_chaos.faults.proxy.proxies import ProxyCollection
from zephon_chaos.faults.proxy.router import Route, Router
from zephon_chaos.faults.proxy.transport import (
    App,
    HttpError,
    HttpServer,
    Request,
    Response,
    refusal_response,
)

#: The Toxiproxy release whose API this server reproduces.
TOXIPROXY_VERSION = "2.12.0"

_PROXY = r"/proxies/(?P<proxy>[^/]+)"
_TOXIC = _PROXY + r"/toxics/(?P<toxic>[^/]+)"


class Handlers:
    """One handler per route of ``api.go``, each a call into the collections."""

    def __init__(self, collection: ProxyCollection) -> None:
        self.collection = collection

    async def reset(self, request: Request) -> Response:
        await self.collection.reset()
        return Response(204)

    async def proxy_index(self, request: Request) -> Response:
        proxies = self.collection.proxies
        return json_response({name: proxies[name].as_json() for name in sorted(proxies)})

    async def proxy_create(self, request: Request) -> Response:
        proxy = await self.collection.create_json(request.body)
        return json_response(proxy.as_json(), 201)

    async def populate(self, request: Request) -> Response:
        applied, error = await self.collection.populate_json(request.body)
        proxies = [p.as_json() for p in applied] or None
        if error is None:
            return json_response({"proxies": proxies}, 201)
        body = {"error": error.message, "status": error.status, "proxies": proxies}
        return Response(error.status, gojson.encode(body).encode(), "application/json")

    async def proxy_show(self, request: Request) -> Response:
        return json_response(self.collection.get(request.params["proxy"]).as_json())

    async def proxy_update(self, request: Request) -> Response:
        proxy = self.collection.get(request.params["proxy"])
        await proxy.update_json(request.body)
        return json_response(proxy.as_json())

    async def proxy_delete(self, request: Request) -> Response:
        await self.collection.remove(request.params["proxy"])
        return Response(204)

    async def proxy_stats(self, request: Request) -> Response:
        return json_response(self.collection.get(request.params["proxy"]).stats_json())

    async def toxic_index(self, request: Request) -> Response:
        toxics = self.collection.get(request.params["proxy"]).toxics
        return json_response([t.as_json() for t in toxics.all()])

    async def toxic_create(self, request: Request) -> Response:
        toxics = self.collection.get(request.params["proxy"]).toxics
        return json_response(toxics.add_json(request.body).as_json())

    async def toxic_show(self, request: Request) -> Response:
        toxics = self.collection.get(request.params["proxy"]).toxics
        return json_response(toxics.get_or_fail(request.params["toxic"]).as_json())

    async def toxic_update(self, request: Request) -> Response:
        toxics = self.collection.get(request.params["proxy"]).toxics
        return json_response(toxics.update_json(request.params["toxic"], request.body).as_json())

    async def toxic_delete(self, request: Request) -> Response:
        self.collection.get(request.params["proxy"]).toxics.remove(request.params["toxic"])
        return Response(204)

    async def version(self, request: Request) -> Response:
        body = f'{{"version": "{TOXIPROXY_VERSION}"}}\n'.encode()
        return Response(200, body, "application/json;charset=utf-8")


def routes(h: Handlers) -> list[Route]:
    """``api.go``'s table, in its order (the first matching path wins)."""
    return [
        Route(r"/reset", {"POST": h.reset}),
        Route(r"/proxies", {"GET": h.proxy_index, "POST": h.proxy_create}),
        Route(r"/populate", {"POST": h.populate}),
        Route(
            _PROXY,
            {
                "GET": h.proxy_show,
                "POST": h.proxy_update,
                "PATCH": h.proxy_update,
                "DELETE": h.proxy_delete,
            },
        ),
        Route(_PROXY + r"/toxics", {"GET": h.toxic_index, "POST": h.toxic_create}),
        Route(
            _TOXIC,
            {
                "GET": h.toxic_show,
                "POST": h.toxic_update,
                "PATCH": h.toxic_update,
                "DELETE": h.toxic_delete,
            },
        ),
        Route(_PROXY + r"/stats", {"GET": h.proxy_stats}),
        Route(r"/version", {"GET": h.version}),
    ]


def application(collection: ProxyCollection) -> App:
    """The routes with the rules for every request around them, outermost first."""
    router = Router(routes(Handlers(collection)), per_route=(stop_browsers, error_envelope))
    return wrap(router, stamped, handler_timeout)


def _refusal(error: HttpError) -> Response:
    """A request the transport refused still carries the headers of every answer."""
    return stamp(refusal_response(error))


class ApiServer:
    """The API over a :class:`ProxyCollection`, served on one listening socket."""

    def __init__(self, collection: ProxyCollection) -> None:
        self.collection = collection
        self.http = HttpServer(application(collection), refusal=_refusal)
        self.address: tuple[str, int] | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        sock = await bind_listener(
            format_address(host, port), allow_non_loopback=self.collection.allow_non_loopback
        )
        await self.http.start(sock)
        bound = sock.getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        return self.address

    async def close(self) -> None:
        """Stop listening, drop API connections, then stop every proxy and its connections."""
        await self.http.close()
        await self.collection.clear()


async def serve(
    host: str,
    port: int,
    *,
    allow_non_loopback: bool = False,
    on_ready: Callable[[str, int], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run an API server and its proxies until ``stop`` is set; then close everything."""
    stop = stop or asyncio.Event()
    api = ApiServer(ProxyCollection(allow_non_loopback=allow_non_loopback))
    bound_host, bound_port = await api.start(host, port)
    try:
        if on_ready is not None:
            on_ready(bound_host, bound_port)
        await stop.wait()
    finally:
        await api.close()
