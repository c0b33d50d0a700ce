"""Rules that hold for every API request, as wrappers around the application.

Go's ``api.go`` composes the same rules around its router: a request id on every answer,
``http.TimeoutHandler`` (503 after 25 s), browsers refused (403), and errors written as
``{"error": ..., "status": ...}`` through ``http.Error``. Ours adds one header that marks the
embedded server, so clients can tell it from a real ``toxiproxy-server``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from typing import Any

from zephon_chaos.faults.proxy import gojson
from zephon_chaos.faults.proxy.api_errors import ApiError
from zephon_chaos.faults.proxy.transport import App, Request, Response, plain_response

log = logging.getLogger(__name__)

#: Response header marking the embedded server (a real one never sends it).
EMBEDDED_HEADER = "X-Zephon-Chaos-Embedded"
HANDLER_TIMEOUT_S = 25.0  # Go's TimeoutHandler in api.go
_TIMEOUT_PAGE = b"<html><head><title>Timeout</title></head><body><h1>Timeout</h1></body></html>"

Middleware = Callable[[App], App]


def json_response(value: Any, status: int = 200) -> Response:
    return Response(status, gojson.encode(value).encode(), "application/json")


def error_response(error: ApiError) -> Response:
    """Go's ``apiError``: JSON written with ``http.Error``, hence text/plain and a newline."""
    body = gojson.encode({"error": error.message, "status": error.status}) + "\n"
    return plain_response(error.status, body)


def stamp(response: Response) -> Response:
    """The headers every answer carries, refusals by the transport included."""
    response.headers["X-Toxiproxy-Request-Id"] = secrets.token_hex(10)
    response.headers[EMBEDDED_HEADER] = "1"
    return response


def stamped(app: App) -> App:
    async def handle(request: Request) -> Response:
        return stamp(await app(request))

    return handle


def handler_timeout(app: App) -> App:
    async def handle(request: Request) -> Response:
        try:
            return await asyncio.wait_for(app(request), HANDLER_TIMEOUT_S)
        except TimeoutError:
            return Response(503, _TIMEOUT_PAGE, "text/html; charset=utf-8")

    return handle


def stop_browsers(app: App) -> App:
    """Go's ``stopBrowsersMiddleware``: a browser could be made to drive the API (CSRF)."""

    async def handle(request: Request) -> Response:
        if request.headers.get("user-agent", "").startswith("Mozilla/"):
            return plain_response(403, "User agent not allowed\n")
        return await app(request)

    return handle


def error_envelope(app: App) -> App:
    """An :class:`ApiError` becomes Go's error JSON; anything else a logged 500."""

    async def handle(request: Request) -> Response:
        try:
            return await app(request)
        except ApiError as error:
            return error_response(error)
        except Exception as exc:
            log.exception("toxiproxy API handler %s %s failed", request.method, request.path)
            return error_response(ApiError(f"internal error: {exc}", 500))

    return handle


def wrap(app: App, *middleware: Middleware) -> App:
    """``app`` inside ``middleware``, the first one outermost."""
    for layer in reversed(middleware):
        app = layer(app)
    return app
