"""Routes: a path pattern and a handler per method; gorilla/mux's 404 and 405 otherwise."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from zephon_chaos.faults.proxy.middleware import Middleware, wrap
from zephon_chaos.faults.proxy.transport import App, Request, Response, plain_response


@dataclass(frozen=True)
class Route:
    pattern: str  # a regular expression matched against the whole path
    methods: Mapping[str, App]


class Router:
    """Dispatches on path then method; ``per_route`` wraps matched handlers only, as mux does."""

    def __init__(self, routes: Iterable[Route], per_route: Iterable[Middleware] = ()) -> None:
        layers = tuple(per_route)
        self._routes = [
            (re.compile(route.pattern), {m: wrap(h, *layers) for m, h in route.methods.items()})
            for route in routes
        ]

    async def __call__(self, request: Request) -> Response:
        for pattern, methods in self._routes:
            found = pattern.fullmatch(request.path)
            if found is None:
                continue
            handler = methods.get(request.method)
            if handler is None:
                return Response(405)
            request.params = found.groupdict()
            return await handler(request)
        return plain_response(404, "404 page not found\n")
