"""The warm lane's wire format: one JSON object per line over a connected socket.

Both ends (the harness and the warm server) read with a deadline, so neither side can hang
the other: a silent peer is an error that names the peer, never a blocked test.
"""

from __future__ import annotations

import json
import selectors
import socket
import time
from typing import Any

from zephon_chaos.errors import HarnessError

Message = dict[str, Any]
MAX_LINE_BYTES = 1 << 20


class PeerClosed(HarnessError, ConnectionError):
    """The other end closed the connection (it exited or was killed)."""


class LineChannel:
    """Newline-delimited JSON over a stream socket, with a read buffer and deadlines."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self._buffer = bytearray()
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Message) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
        finally:
            self.sock.setblocking(False)

    def pending(self) -> Message | None:
        """A complete message already buffered, or None (never reads the socket)."""
        end = self._buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return json.loads(line)

    def fill(self) -> bool:
        """Read what the socket has now (it must be readable); False if nothing came."""
        try:
            data = self.sock.recv(1 << 16)
        except BlockingIOError:
            return False
        if not data:
            raise PeerClosed("the peer closed the connection")
        self._buffer += data
        if len(self._buffer) > MAX_LINE_BYTES and b"\n" not in self._buffer:
            raise ValueError(f"a message over {MAX_LINE_BYTES} bytes arrived; refusing it")
        return True

    def receive(self, timeout_s: float | None) -> Message | None:
        """The next message, waiting at most ``timeout_s`` (None = forever); None on timeout."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            message = self.pending()
            if message is not None:
                return message
            remaining = None if end is None else max(0.0, end - time.monotonic())
            if not self._selector.select(remaining):
                if end is not None and time.monotonic() >= end:
                    return None
                continue
            self.fill()

    def close(self) -> None:
        self._selector.close()
        self.sock.close()
