"""The Toxiproxy HTTP API on asyncio, answering as ``toxiproxy-server`` (v2) does.

Routes, status codes, JSON shapes and error texts follow the Go server's ``api.go``: errors are
``{"error": ..., "status": ...}`` written through Go's ``http.Error`` (so ``text/plain`` with a
trailing newline), creating a proxy answers 201, creating a toxic 200, deletions 204.

One extension, on the embedded server only: ``GET /proxies/{name}/stats`` returns the proxy's
counters (connections accepted and closed, closes by toxics, resets sent, bytes and writes per
direction, per-toxic activity). A real ``toxiproxy-server`` answers it with 404.

The HTTP layer is deliberately small (HTTP/1.1, keep-alive, Content-Length or chunked bodies)
and defensive: garbage, oversized headers, slow or half-closed clients get Go's answers (400,
431, a close) and never take the server down.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import re
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

from zephon_chaos.faults.proxy import gojson
from zephon_chaos.faults.proxy.errors import (
    BAD_REQUEST_BODY,
    INVALID_STREAM,
    INVALID_TOXIC_TYPE,
    MISSING_FIELD,
    TOXIC_ALREADY_EXISTS,
    TOXIC_NOT_FOUND,
    ApiError,
    ProxyAlreadyStarted,
)
from zephon_chaos.faults.proxy.proxy import Proxy, ProxyCollection, bind_listener
from zephon_chaos.faults.proxy.toxics import Direction, Toxic, ToxicKind

log = logging.getLogger(__name__)

#: The Toxiproxy release whose API this server reproduces.
TOXIPROXY_VERSION = "2.12.0"
#: Response header marking the embedded server (a real one never sends it).
EMBEDDED_HEADER = "X-Zephon-Chaos-Embedded"

MAX_HEADER_BYTES = (1 << 20) + 4096  # Go's DefaultMaxHeaderBytes plus its slack
MAX_BODY_BYTES = 16 << 20
READ_TIMEOUT_S = 15.0  # Go's ReadTimeout in api.go
IDLE_TIMEOUT_S = 60.0
HANDLER_TIMEOUT_S = 25.0  # Go's TimeoutHandler in api.go

_PROXY_FIELDS = {"name": "string", "listen": "string", "upstream": "string", "enabled": "bool"}
_POPULATE_ITEM = 'struct { toxiproxy.Proxy; Enabled *bool "json:\\"enabled\\"" }'
_TOXIC_FIELDS = {
    "attributes": "toxics.NoopToxic",
    "name": "string",
    "type": "string",
    "stream": "string",
    "toxicity": "float32",
}
_TOXIC_UPDATE = (
    'struct { Attributes interface {} "json:\\"attributes\\""; '
    'Toxicity float32 "json:\\"toxicity\\"" }'
)


class HttpError(Exception):
    """A request the HTTP layer refuses before routing; the connection is closed after it."""

    def __init__(self, status: int, detail: str = "") -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]
    body: bytes = b""

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self, *, keep_alive: bool, request_id: str) -> bytes:
        reason = HTTPStatus(self.status).phrase
        lines = [f"HTTP/1.1 {self.status} {reason}"]
        if self.content_type:
            lines.append(f"Content-Type: {self.content_type}")
        for name, value in self.headers.items():
            lines.append(f"{name}: {value}")
        lines.append(f"X-Toxiproxy-Request-Id: {request_id}")
        lines.append(f"{EMBEDDED_HEADER}: 1")
        lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
        if self.status not in (204, 304) and self.status >= 200:
            lines.append(f"Content-Length: {len(self.body)}")
        if not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def json_response(value: Any, status: int = 200) -> Response:
    return Response(status, gojson.encode(value).encode(), "application/json")


def error_response(error: ApiError) -> Response:
    """Go's ``apiError``: JSON written with ``http.Error``, hence text/plain and a newline."""
    body = gojson.encode({"error": error.message, "status": error.status}) + "\n"
    return Response(
        error.status,
        body.encode(),
        "text/plain; charset=utf-8",
        {"X-Content-Type-Options": "nosniff"},
    )


def _plain(status: int, text: str) -> Response:
    return Response(
        status, text.encode(), "text/plain; charset=utf-8", {"X-Content-Type-Options": "nosniff"}
    )


def _decode_body(body: bytes) -> Any:
    try:
        return gojson.decode(body)
    except gojson.GoJSONError as exc:
        raise BAD_REQUEST_BODY.joined(str(exc)) from None


Handler = Callable[["ApiServer", Request, dict[str, str]], Awaitable[Response]]

_BLANK_LINE = re.compile(rb"\r?\n\r?\n")


class _Input:
    """Buffered reading of one connection: a whole request head is found in one scan.

    Reading line by line costs an await per header line, which a flood of tiny header lines
    turns into seconds on a loaded machine; here the head is cut out of large reads.
    """

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buffer = bytearray()

    async def _fill(self) -> bool:
        data = await self.reader.read(1 << 16)
        self.buffer += data
        return bool(data)

    async def head(self) -> bytes | None:
        """The request line and headers (without the blank line), or None at a close."""
        scanned = 0
        while True:
            while self.buffer[:1] in (b"\r", b"\n"):  # stray line ends between requests
                del self.buffer[:1]
                scanned = 0
            found = _BLANK_LINE.search(self.buffer, max(0, scanned - 3))
            if found is not None:
                head = bytes(self.buffer[: found.start()])
                del self.buffer[: found.end()]
                return head
            if len(self.buffer) > MAX_HEADER_BYTES:
                raise HttpError(431)
            scanned = len(self.buffer)
            if not await self._fill():
                return None

    async def line(self) -> bytes:
        while (end := self.buffer.find(b"\n")) < 0:
            if len(self.buffer) > MAX_HEADER_BYTES:
                raise HttpError(431)
            if not await self._fill():
                raise asyncio.IncompleteReadError(bytes(self.buffer), None)
        line = bytes(self.buffer[: end + 1])
        del self.buffer[: end + 1]
        return line

    async def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not await self._fill():
                raise asyncio.IncompleteReadError(bytes(self.buffer), size)
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


class ApiServer:
    """Routes and handlers of the Toxiproxy API over a :class:`ProxyCollection`."""

    def __init__(self, collection: ProxyCollection) -> None:
        self.collection = collection
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.address: tuple[str, int] | None = None

    # Lifecycle.
    async def start(self, host: str, port: int) -> tuple[str, int]:
        sock = await bind_listener(
            f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
            allow_non_loopback=self.collection.allow_non_loopback,
        )
        self._server = await asyncio.start_server(self._serve_connection, sock=sock)
        bound = sock.getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        return self.address

    async def close(self) -> None:
        """Stop listening, drop API connections, then stop every proxy and its connections."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        await self.collection.clear()

    # HTTP.
    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        first = True
        stream = _Input(reader)
        try:
            while True:
                request_id = secrets.token_hex(10)
                try:
                    request = await asyncio.wait_for(
                        self._read_request(stream, writer),
                        READ_TIMEOUT_S if first else IDLE_TIMEOUT_S,
                    )
                except HttpError as exc:
                    reason = HTTPStatus(exc.status).phrase
                    text = f"{exc.status} {reason}" + (f": {exc.detail}" if exc.detail else "")
                    writer.write(
                        _plain(exc.status, text).encode(keep_alive=False, request_id=request_id)
                    )
                    await writer.drain()
                    return
                if request is None:
                    return
                first = False
                response = await self._respond(request)
                keep_alive = request.keep_alive
                writer.write(response.encode(keep_alive=keep_alive, request_id=request_id))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, OSError):
            return
        except asyncio.CancelledError:
            return  # the server is closing; ending quietly keeps asyncio from logging it
        except Exception:
            log.exception("toxiproxy API connection failed")
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.close()

    async def _read_request(self, stream: _Input, writer: asyncio.StreamWriter) -> Request | None:
        head = await stream.head()
        if head is None:
            return None  # closed, or closed halfway through the request head
        lines = [line.rstrip(b"\r").decode("latin-1") for line in head.split(b"\n")]
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise HttpError(400, "malformed HTTP request")
        method, target, version = parts
        if not re.fullmatch(r"HTTP/1\.[01]", version):
            raise HttpError(505 if version.startswith("HTTP/") else 400, "malformed HTTP version")
        if not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", method):
            raise HttpError(400, "invalid method")
        headers: dict[str, str] = {}
        for text in lines[1:]:
            if not text:
                continue
            name, colon, value = text.partition(":")
            if not colon or not name or name != name.strip() or " " in name:
                raise HttpError(400, "malformed MIME header line")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        request = Request(method, self._path(target), version, headers)
        request.body = await self._read_body(stream, writer, headers)
        return request

    @staticmethod
    def _path(target: str) -> str:
        if not target.startswith("/"):
            target = urlsplit(target).path or "/"
        return unquote(target.split("?", 1)[0].split("#", 1)[0])

    async def _read_body(
        self, stream: _Input, writer: asyncio.StreamWriter, headers: dict[str, str]
    ) -> bytes:
        encoding = headers.get("transfer-encoding", "").lower()
        length_text = headers.get("content-length")
        if not encoding and length_text is None:
            return b""
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if encoding:
            if encoding != "chunked":
                raise HttpError(501, "unsupported transfer encoding")
            return await self._read_chunked(stream)
        assert length_text is not None
        if not length_text.isdigit():
            raise HttpError(400, "bad Content-Length")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise HttpError(413)
        return await stream.exactly(length)

    async def _read_chunked(self, stream: _Input) -> bytes:
        body = bytearray()
        while True:
            size_line = (await stream.line()).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise HttpError(400, "bad chunked encoding") from None
            if size < 0 or len(body) + size > MAX_BODY_BYTES:
                raise HttpError(413)
            if size == 0:
                while (await stream.line()).strip():
                    pass  # trailers
                return bytes(body)
            body += await stream.exactly(size)
            await stream.exactly(2)

    async def _respond(self, request: Request) -> Response:
        route = _match(request.path)
        if route is None:
            return _plain(404, "404 page not found\n")
        methods, params = route
        handler = methods.get(request.method)
        if handler is None:
            return Response(405)
        if request.headers.get("user-agent", "").startswith("Mozilla/"):
            return _plain(403, "User agent not allowed\n")
        try:
            return await asyncio.wait_for(handler(self, request, params), HANDLER_TIMEOUT_S)
        except ApiError as error:
            return error_response(error)
        except asyncio.TimeoutError:
            return Response(
                503,
                b"<html><head><title>Timeout</title></head><body><h1>Timeout</h1></body></html>",
                "text/html; charset=utf-8",
            )
        except Exception as exc:
            log.exception("toxiproxy API handler %s %s failed", request.method, request.path)
            return error_response(ApiError(f"internal error: {exc}", 500))

    # Handlers, one per route of api.go.
    async def reset(self, request: Request, params: dict[str, str]) -> Response:
        for proxy in list(self.collection.proxies.values()):
            with contextlib.suppress(ProxyAlreadyStarted):
                await proxy.start()
            proxy.toxics.reset()
        return Response(204)

    async def proxy_index(self, request: Request, params: dict[str, str]) -> Response:
        proxies = self.collection.proxies
        return json_response({name: proxies[name].as_json() for name in sorted(proxies)})

    async def proxy_create(self, request: Request, params: dict[str, str]) -> Response:
        value = _decode_body(request.body)
        fields: dict[str, Any] = {"name": "", "listen": "", "upstream": "", "enabled": True}
        _decode_fields(value, _PROXY_FIELDS, "toxiproxy.Proxy", "Proxy", fields)
        if not fields["name"]:
            raise MISSING_FIELD.joined("name")
        if not fields["upstream"]:
            raise MISSING_FIELD.joined("upstream")
        proxy = self.collection.new_proxy(fields["name"], fields["listen"], fields["upstream"])
        await self.collection.add(proxy, fields["enabled"])
        return json_response(proxy.as_json(), 201)

    async def populate(self, request: Request, params: dict[str, str]) -> Response:
        applied: list[Proxy] = []
        try:
            value = _decode_body(request.body)
            items = _decode_populate(value)
            for index, item in enumerate(items, start=1):
                if not item["name"]:
                    raise MISSING_FIELD.joined(f"name at proxy {index}")
                if not item["upstream"]:
                    raise MISSING_FIELD.joined(f"upstream at proxy {index}")
            for item in items:
                proxy = self.collection.new_proxy(item["name"], item["listen"], item["upstream"])
                enabled = True if item["enabled"] is None else item["enabled"]
                applied.append(await self.collection.add_or_replace(proxy, enabled))
        except ApiError as error:
            body = {
                "error": error.message,
                "status": error.status,
                "proxies": [p.as_json() for p in applied] or None,
            }
            return Response(error.status, gojson.encode(body).encode(), "application/json")
        return json_response({"proxies": [p.as_json() for p in applied] or None}, 201)

    async def proxy_show(self, request: Request, params: dict[str, str]) -> Response:
        return json_response(self.collection.get(params["proxy"]).as_json())

    async def proxy_update(self, request: Request, params: dict[str, str]) -> Response:
        proxy = self.collection.get(params["proxy"])
        fields: dict[str, Any] = {
            "name": "",
            "listen": proxy.listen,
            "upstream": proxy.upstream,
            "enabled": proxy.enabled,
        }
        _decode_fields(
            _decode_body(request.body), _PROXY_FIELDS, "toxiproxy.Proxy", "Proxy", fields
        )
        await proxy.update(fields["listen"], fields["upstream"], fields["enabled"])
        return json_response(proxy.as_json())

    async def proxy_delete(self, request: Request, params: dict[str, str]) -> Response:
        await self.collection.remove(params["proxy"])
        return Response(204)

    async def proxy_stats(self, request: Request, params: dict[str, str]) -> Response:
        return json_response(self.collection.get(params["proxy"]).stats_json())

    async def toxic_index(self, request: Request, params: dict[str, str]) -> Response:
        proxy = self.collection.get(params["proxy"])
        return json_response([t.as_json() for t in proxy.toxics.all()])

    async def toxic_create(self, request: Request, params: dict[str, str]) -> Response:
        proxy = self.collection.get(params["proxy"])
        value = _decode_body(request.body)
        wrapper: dict[str, Any] = {
            "name": "",
            "type": "",
            "stream": "downstream",
            "toxicity": 1.0,
        }
        _decode_fields(value, _TOXIC_FIELDS, "toxics.ToxicWrapper", "ToxicWrapper", wrapper)
        direction = Direction.parse(wrapper["stream"])
        if direction is None:
            raise INVALID_STREAM
        name = wrapper["name"] or f"{wrapper['type']}_{wrapper['stream']}"
        kind = ToxicKind.registry.get(wrapper["type"])
        if kind is None:
            raise INVALID_TOXIC_TYPE
        if proxy.toxics.get(name) is not None:
            raise TOXIC_ALREADY_EXISTS
        attributes = _decode_attributes(
            gojson.find_key(value, "attributes") if isinstance(value, dict) else None,
            kind,
            kind.defaults(),
        )
        toxic = Toxic(
            name=name,
            type=kind.type_name,
            stream=wrapper["stream"],
            direction=direction,
            toxicity=gojson.to_float32(wrapper["toxicity"]),
            attributes=attributes,
        )
        return json_response(proxy.toxics.add(toxic).as_json())

    async def toxic_show(self, request: Request, params: dict[str, str]) -> Response:
        toxic = self.collection.get(params["proxy"]).toxics.get(params["toxic"])
        if toxic is None:
            raise TOXIC_NOT_FOUND
        return json_response(toxic.as_json())

    async def toxic_update(self, request: Request, params: dict[str, str]) -> Response:
        proxy = self.collection.get(params["proxy"])
        toxic = proxy.toxics.get(params["toxic"])
        if toxic is None:
            raise TOXIC_NOT_FOUND
        kind = ToxicKind.registry[toxic.type]
        value = _decode_body(request.body)
        fields: dict[str, Any] = {"toxicity": toxic.toxicity}
        update_fields = {"attributes": f"toxics.{kind.go_struct}", "toxicity": "float32"}
        _decode_fields(value, update_fields, _TOXIC_UPDATE, "", fields)
        attributes = _decode_attributes(
            gojson.find_key(value, "attributes") if isinstance(value, dict) else None,
            kind,
            dict(toxic.attributes),
        )
        updated = Toxic(
            name=toxic.name,
            type=toxic.type,
            stream=toxic.stream,
            direction=toxic.direction,
            toxicity=fields["toxicity"],
            attributes=attributes,
        )
        return json_response(proxy.toxics.replace(updated).as_json())

    async def toxic_delete(self, request: Request, params: dict[str, str]) -> Response:
        self.collection.get(params["proxy"]).toxics.remove(params["toxic"])
        return Response(204)

    async def version(self, request: Request, params: dict[str, str]) -> Response:
        body = f'{{"version": "{TOXIPROXY_VERSION}"}}\n'.encode()
        return Response(200, body, "application/json;charset=utf-8")


def _decode_fields(
    value: Any, fields: dict[str, str], go_type: str, struct: str, into: dict[str, Any]
) -> None:
    try:
        gojson.decode_struct(value, fields, go_type=go_type, struct=struct, into=into)
    except gojson.GoJSONError as exc:
        raise BAD_REQUEST_BODY.joined(str(exc)) from None


def _decode_attributes(value: Any, kind: ToxicKind, into: dict[str, int]) -> dict[str, int]:
    try:
        gojson.decode_struct(
            value,
            kind.field_types,
            go_type=f"toxics.{kind.go_struct}",
            struct=kind.go_struct,
            path="attributes",
            into=into,
        )
    except gojson.GoJSONError as exc:
        raise BAD_REQUEST_BODY.joined(str(exc)) from None
    return into


def _decode_populate(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BAD_REQUEST_BODY.joined(str(gojson.type_error(
            gojson._kind(value), f"[]{_POPULATE_ITEM}", None, None
        )))  # fmt: skip
    items = []
    for entry in value:
        fields: dict[str, Any] = {"name": "", "listen": "", "upstream": "", "enabled": None}
        _decode_fields(entry, _PROXY_FIELDS, _POPULATE_ITEM, "", fields)
        items.append(fields)
    return items


_ROUTES: list[tuple[re.Pattern[str], dict[str, Handler]]] = [
    (re.compile(r"/reset"), {"POST": ApiServer.reset}),
    (re.compile(r"/proxies"), {"GET": ApiServer.proxy_index, "POST": ApiServer.proxy_create}),
    (re.compile(r"/populate"), {"POST": ApiServer.populate}),
    (
        re.compile(r"/proxies/(?P<proxy>[^/]+)"),
        {
            "GET": ApiServer.proxy_show,
            "POST": ApiServer.proxy_update,
            "PATCH": ApiServer.proxy_update,
            "DELETE": ApiServer.proxy_delete,
        },
    ),
    (
        re.compile(r"/proxies/(?P<proxy>[^/]+)/toxics"),
        {"GET": ApiServer.toxic_index, "POST": ApiServer.toxic_create},
    ),
    (
        re.compile(r"/proxies/(?P<proxy>[^/]+)/toxics/(?P<toxic>[^/]+)"),
        {
            "GET": ApiServer.toxic_show,
            "POST": ApiServer.toxic_update,
            "PATCH": ApiServer.toxic_update,
            "DELETE": ApiServer.toxic_delete,
        },
    ),
    (re.compile(r"/proxies/(?P<proxy>[^/]+)/stats"), {"GET": ApiServer.proxy_stats}),
    (re.compile(r"/version"), {"GET": ApiServer.version}),
]


def _match(path: str) -> tuple[dict[str, Handler], dict[str, str]] | None:
    for pattern, methods in _ROUTES:
        found = pattern.fullmatch(path)
        if found is not None:
            return methods, found.groupdict()
    return None


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
