"""The channel between a rank's interposer and the harness: events out, releases back.

An abstract Unix socket (Linux; no file to leak, no port): the harness listens, a rank
connects and sends one JSON line per fired trigger. A rank that holds waits for the harness's
reply (``release``) up to its hold timeout, so a lost harness never hangs a rank past that
bound. The harness learns of an event by ``accept``/``recv``: a logical event, not a poll.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from zephon_chaos.closing import Closing

RELEASE = b"release\n"
CALL_ENDED = "call_ended"
"""What a rank sends when its first ``checkpoint()`` call of a round that stops a rank has
returned or raised (``rank.main``): the logical event a stopped rank's watcher waits for
(``nemeses.round_faults``), rather than a bound."""


def _address(name: str) -> str:
    """An abstract name, or a socket path (``/...``): abstract sockets belong to one network
    namespace, a path reaches ranks on hosts in namespaces of their own (``launch.netns``)."""
    return name if name.startswith("/") else "\0" + name


def notify(name: str, event: dict[str, Any], *, wait_s: float | None = None) -> str:
    """Send ``event`` to the harness listening on ``name``; with ``wait_s``, wait for release.

    Returns ``sent`` (no wait), ``released`` or ``expired`` (no release within ``wait_s``),
    or ``unreachable`` (nobody listens: the event stays in the rank's event file only).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(5.0)
        try:
            sock.connect(_address(name))
            sock.sendall(json.dumps({**event, "wait": wait_s is not None}).encode() + b"\n")
        except OSError:
            return "unreachable"
        if wait_s is None:
            return "sent"
        sock.settimeout(max(wait_s, 0.001))
        try:
            reply = sock.recv(64)
        except TimeoutError:
            return "expired"
        except OSError:
            return "unreachable"
        return "released" if reply.startswith(RELEASE.strip()) else "unreachable"
    finally:
        sock.close()


@dataclass
class HeardEvent:
    """One interposer event as the harness heard it; ``release()`` lets a holding rank go on."""

    event: dict[str, Any]
    conn: socket.socket | None = field(default=None, repr=False)

    @property
    def held(self) -> bool:
        return bool(self.event.get("wait"))

    def release(self) -> None:
        conn, self.conn = self.conn, None
        if conn is None:
            return
        with contextlib.suppress(OSError):
            conn.sendall(RELEASE)
        conn.close()


class InterposerControl(Closing):
    """The harness's end: ``expect(rank=1, phase="shard")`` waits for that rank's event."""

    def __init__(self, name: str | None = None) -> None:
        """``name``: abstract by default; a path (``/...``) for ranks in other namespaces."""
        self.name = name or f"zephon-chaos-{uuid.uuid4().hex}"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(_address(self.name))
        self._listener.listen(64)
        self.heard: list[HeardEvent] = []
        self._pending: list[HeardEvent] = []

    def _accept_one(self, deadline: float) -> HeardEvent:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self._listener.settimeout(remaining)
        conn, _ = self._listener.accept()
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        event = json.loads(data.decode() or "{}")
        heard = HeardEvent(event, conn if event.get("wait") else None)
        if heard.conn is None:
            conn.close()
        self.heard.append(heard)
        return heard

    def expect(self, timeout_s: float, **match: Any) -> HeardEvent:
        """The first event (heard before or now) whose fields equal ``match``, or TimeoutError."""
        return self.expect_any(timeout_s, match)

    def expect_any(self, timeout_s: float, *matches: Mapping[str, Any]) -> HeardEvent:
        """The first event (heard before or now) whose fields equal one of ``matches``."""

        def fits(heard: HeardEvent) -> bool:
            return any(all(heard.event.get(k) == v for k, v in m.items()) for m in matches)

        for heard in self._pending:
            if fits(heard):
                self._pending.remove(heard)
                return heard
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                heard = self._accept_one(deadline)
            except TimeoutError:
                raise TimeoutError(
                    f"no interposer event {list(matches)} within {timeout_s} s; heard "
                    f"{[h.event for h in self.heard]}"
                ) from None
            if fits(heard):
                return heard
            self._pending.append(heard)

    @contextlib.contextmanager
    def watched(
        self,
        watch: Callable[[InterposerControl, float], None],
        deadline_s: float,
        ended: dict[str, Any],
        thread_name: str,
        on_end: Callable[[], object] | None = None,
    ) -> Iterator[None]:
        """Around a launch: ``watch(self, deadline_s)`` in a thread of its own. When the launch
        returns, ``on_end`` (for a watcher waiting on something else), then ``ended`` sent to
        the channel wakes a watcher still waiting for a rank's event; it is joined and the
        channel closed, which releases any rank still held."""
        watcher = threading.Thread(
            target=watch, args=(self, deadline_s), name=thread_name, daemon=True
        )
        watcher.start()
        try:
            yield
        finally:
            if on_end is not None:
                on_end()
            notify(self.name, ended)
            watcher.join(deadline_s)
            self.close()

    def close(self) -> None:
        """Release every holding rank and stop listening."""
        for heard in self.heard:
            heard.release()
        self._pending.clear()
        self._listener.close()
        if self.name.startswith("/"):
            with contextlib.suppress(OSError):
                os.unlink(self.name)
