"""HTTP/1.1 on asyncio for the embedded API: requests in, responses out, nothing about routes.

Deliberately small (HTTP/1.1, keep-alive, Content-Length or chunked bodies) and defensive:
garbage, oversized headers, slow or half-closed clients get Go's ``net/http`` answers (400,
431, 505, 413, 501, a close) and never take the server down. What a request means is the
application's business (:mod:`.api`); this module only calls it with each parsed request.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import re
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

from zephon_chaos.errors import InvalidInput

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = (1 << 20) + 4096  # Go's DefaultMaxHeaderBytes plus its slack
MAX_BODY_BYTES = 16 << 20
READ_TIMEOUT_S = 15.0  # Go's ReadTimeout in api.go
IDLE_TIMEOUT_S = 60.0

_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_VERSION = re.compile(r"HTTP/1\.[01]")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


class HttpError(InvalidInput):
    """A request the transport refuses before the application sees it; the connection closes."""

    def __init__(self, status: int, detail: str = "") -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    @property
    def text(self) -> str:
        """Go's answer body: ``"400 Bad Request: malformed HTTP request"``."""
        reason = HTTPStatus(self.status).phrase
        return f"{self.status} {reason}" + (f": {self.detail}" if self.detail else "")


@dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]
    body: bytes = b""
    params: dict[str, str] = field(default_factory=dict)  # filled by the router

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

    def encode(self, *, keep_alive: bool) -> bytes:
        reason = HTTPStatus(self.status).phrase
        lines = [f"HTTP/1.1 {self.status} {reason}"]
        if self.content_type:
            lines.append(f"Content-Type: {self.content_type}")
        for name, value in self.headers.items():
            lines.append(f"{name}: {value}")
        lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
        if self.status not in (204, 304) and self.status >= 200:
            lines.append(f"Content-Length: {len(self.body)}")
        if not keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def plain_response(status: int, text: str) -> Response:
    """Go's ``http.Error``: text/plain, ``nosniff``."""
    return Response(
        status, text.encode(), "text/plain; charset=utf-8", {"X-Content-Type-Options": "nosniff"}
    )


#: The application: one response per request.
App = Callable[[Request], Awaitable[Response]]
#: The answer to a request refused by the transport (the app may stamp its headers on it).
Refusal = Callable[[HttpError], Response]


def refusal_response(error: HttpError) -> Response:
    """Go's answer to a request it cannot read: the status and why, as plain text."""
    return plain_response(error.status, error.text)


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


def parse_head(head: bytes) -> Request:
    """The request line and headers, checked as Go's ``net/http`` checks them."""
    lines = [line.rstrip(b"\r").decode("latin-1") for line in head.split(b"\n")]
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise HttpError(400, "malformed HTTP request")
    method, target, version = parts
    if not _VERSION.fullmatch(version):
        raise HttpError(505 if version.startswith("HTTP/") else 400, "malformed HTTP version")
    if not _TOKEN.fullmatch(method):
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
    return Request(method, _path(target), version, headers)


def _path(target: str) -> str:
    if not target.startswith("/"):
        target = urlsplit(target).path or "/"
    return unquote(target.split("?", 1)[0].split("#", 1)[0])


async def _read_body(
    stream: _Input, writer: asyncio.StreamWriter, headers: dict[str, str]
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
        return await _read_chunked(stream)
    assert length_text is not None
    if not length_text.isdigit():
        raise HttpError(400, "bad Content-Length")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise HttpError(413)
    return await stream.exactly(length)


async def _read_chunked(stream: _Input) -> bytes:
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


async def _read_request(stream: _Input, writer: asyncio.StreamWriter) -> Request | None:
    head = await stream.head()
    if head is None:
        return None  # closed, or closed halfway through the request head
    request = parse_head(head)
    request.body = await _read_body(stream, writer, request.headers)
    return request


class HttpServer:
    """Serves ``app`` on a listening socket, one task per connection, until :meth:`close`."""

    def __init__(self, app: App, refusal: Refusal = refusal_response) -> None:
        self.app = app
        self.refusal = refusal
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._serve_connection, sock=sock)

    async def close(self) -> None:
        """Stop listening and drop every connection, finished or not."""
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
        try:
            await self._exchange(_Input(reader), writer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, OSError):
            return
        except asyncio.CancelledError:
            return  # the server is closing; ending quietly keeps asyncio from logging it
        except Exception:
            log.exception("toxiproxy API connection failed")
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.close()

    async def _exchange(self, stream: _Input, writer: asyncio.StreamWriter) -> None:
        """Requests and responses in turn until a close, a refusal or a timeout."""
        first = True
        while True:
            try:
                request = await asyncio.wait_for(
                    _read_request(stream, writer), READ_TIMEOUT_S if first else IDLE_TIMEOUT_S
                )
            except HttpError as exc:
                writer.write(self.refusal(exc).encode(keep_alive=False))
                await writer.drain()
                return
            if request is None:
                return
            first = False
            response = await self.app(request)
            keep_alive = request.keep_alive
            writer.write(response.encode(keep_alive=keep_alive))
            await writer.drain()
            if not keep_alive:
                return
