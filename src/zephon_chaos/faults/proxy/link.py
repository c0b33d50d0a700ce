"""Links: one direction of one proxied connection, with its chain of toxic stages.

Like Toxiproxy's ``ToxicLink``: a link reads from one socket, passes the data through the
toxics of its direction and writes it to the other socket. When no toxic is on the link it
writes straight from ``data_received`` (no task, no queue), which is what keeps the overhead of
an idle proxy small; once a toxic is added, chunks go through a queue and one pump task that
runs the stages in order. Toxics added, updated or removed through the API take effect on live
links, and a held or delayed chunk is released, not dropped, when its toxic goes away.

Closing follows Toxiproxy: when a link ends (its source closed, or a toxic closed it), it
closes its destination socket; the other direction then sees that socket close and ends too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zephon_chaos.faults.proxy.toxics import (
    Chunk,
    CloseLink,
    Direction,
    Stage,
    Toxic,
    make_stage,
)

log = logging.getLogger(__name__)

# Bytes queued on a link (behind a slow or holding toxic) before its source stops being read,
# so that a held link pushes back on the sender through TCP instead of growing without bound.
HIGH_WATER = 1 << 20


@dataclass
class DirectionStats:
    """Bytes and writes of one direction of a proxy, summed over its connections."""

    bytes_received: int = 0  # read from the source socket
    bytes_sent: int = 0  # written to the destination socket
    writes: int = 0  # write calls to the destination (slicer evidence)

    def as_json(self) -> dict[str, int]:
        return {
            "bytes_received": self.bytes_received,
            "bytes_sent": self.bytes_sent,
            "writes": self.writes,
        }


class LinkOwner:
    """What a link reports to its connection; the connection implements it."""

    def toxic_closed(self) -> None:
        """A toxic ended a link of this connection."""

    def reset(self) -> None:
        """Close both sockets of the connection with RST."""


class SocketEnd(asyncio.Protocol):
    """One socket of a proxied connection: source of one link, destination of the other."""

    def __init__(self, on_made: Callable[[SocketEnd], None] | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.reading_link: Link | None = None
        self.writing_link: Link | None = None
        self.lost = False
        self.on_made = on_made
        self.on_lost: Callable[[SocketEnd], None] | None = None
        self._pauses: set[str] = set()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.on_made is not None:
            self.on_made(self)

    def data_received(self, data: bytes) -> None:
        if self.reading_link is not None:
            self.reading_link.feed(data)

    def eof_received(self) -> bool:
        if self.reading_link is not None:
            self.reading_link.feed_eof()
        return True  # keep the socket open: the other direction may still write to it

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.reading_link is not None:
            self.reading_link.feed_eof()
        if self.writing_link is not None:
            self.writing_link.on_dst_lost()
        if self.on_lost is not None:
            self.on_lost(self)

    def pause_writing(self) -> None:
        if self.writing_link is not None:
            self.writing_link.set_dst_full(True)

    def resume_writing(self) -> None:
        if self.writing_link is not None:
            self.writing_link.set_dst_full(False)

    # Used by links and connections.
    @property
    def open(self) -> bool:
        return self.transport is not None and not self.lost and not self.transport.is_closing()

    def set_paused(self, reason: str, paused: bool) -> None:
        """Reading stops while any reason holds (setup, a full peer, a deep queue)."""
        before = bool(self._pauses)
        if paused:
            self._pauses.add(reason)
        else:
            self._pauses.discard(reason)
        after = bool(self._pauses)
        if before != after and self.open:
            assert self.transport is not None
            if after:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def write(self, data: bytes) -> bool:
        if not self.open:
            return False
        assert self.transport is not None
        self.transport.write(data)
        return True

    def close_gracefully(self) -> None:
        """Close after what is buffered has been sent (a FIN, as Go's ``conn.Close``)."""
        if self.open:
            assert self.transport is not None
            self.transport.close()

    def abort(self, *, reset: bool) -> bool:
        """Close now, dropping buffered data; with ``reset``, send RST (SO_LINGER 0)."""
        if self.transport is None or self.lost:
            return False
        if reset:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()
        return True


class Link:
    """One direction of a connection: source socket → toxic stages → destination socket."""

    def __init__(
        self,
        owner: LinkOwner,
        direction: Direction,
        src: SocketEnd,
        dst: SocketEnd,
        stats: DirectionStats,
        toxics: Iterable[Toxic[Any]],
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.owner = owner
        self.direction = direction
        self.src = src
        self.dst = dst
        self.stats = stats
        self.closed = False
        self.src_done = False
        self.queue: deque[Chunk | None] = deque()  # None marks the source's end
        self.queued_bytes = 0
        self.pump: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._dst_full = False
        self._src_paused = False
        src.reading_link = self
        dst.writing_link = self
        self.stages: list[Stage[Any]] = []
        for toxic in toxics:
            self.add_toxic(toxic)

    # Toxic changes from the API.
    def add_toxic(self, toxic: Toxic[Any]) -> None:
        if self.closed:
            return
        stage = make_stage(toxic, self)
        self.stages.append(stage)
        stage.attach()
        if self.pump is None:
            self.pump = self.loop.create_task(self._run_pump(), name=f"link-{self.direction.name}")

    def update_toxic(self, toxic: Toxic[Any]) -> None:
        for stage in self.stages:
            if stage.toxic.name == toxic.name:
                stage.update(toxic)

    def remove_toxic(self, name: str) -> None:
        for stage in [s for s in self.stages if s.toxic.name == name]:
            self.stages.remove(stage)
            stage.remove()
        self._wake_pump()

    # Data from the source socket.
    def feed(self, data: bytes) -> None:
        if self.closed:
            return
        self.stats.bytes_received += len(data)
        if self.pump is None:
            self._write(data)
            return
        self.queue.append(Chunk(data, self.loop.time()))
        self.queued_bytes += len(data)
        self._wake_pump()
        if self.queued_bytes > HIGH_WATER:
            self._sync_reading()

    def feed_eof(self) -> None:
        if self.src_done:
            return
        self.src_done = True
        if self.closed:
            return
        if self.pump is None:
            self._finish()
        else:
            self.queue.append(None)
            self._wake_pump()

    def _write(self, data: bytes) -> None:
        if self.dst.write(data):
            self.stats.bytes_sent += len(data)
            self.stats.writes += 1

    # Flow control: stop reading the source while the destination or the queue is full.
    def set_dst_full(self, full: bool) -> None:
        self._dst_full = full
        self._sync_reading()

    def _sync_reading(self) -> None:
        want = self._dst_full or self.queued_bytes > HIGH_WATER
        if want != self._src_paused:
            self._src_paused = want
            self.src.set_paused("flow", want)

    # Ends.
    def _finish(self) -> None:
        """The source ended and everything before it was delivered: close the destination."""
        self._stop()
        self.dst.close_gracefully()

    def close_by_toxic(self, stage: Stage[Any] | None, *, reset: bool) -> None:
        if self.closed:
            return
        self.owner.toxic_closed()
        if reset:
            self._stop()
            self.owner.reset()
        else:
            self._finish()

    def on_dst_lost(self) -> None:
        """Nothing can be delivered any more: drop what is queued and stop."""
        self._stop()
        self.queue.clear()
        self.queued_bytes = 0

    def abort(self) -> None:
        self._stop()
        self.queue.clear()

    def _stop(self) -> None:
        if self.closed:
            return
        self.closed = True
        for stage in self.stages:
            stage.detach()
            stage.interrupt()
        pump, current = self.pump, asyncio.current_task(self.loop)
        if pump is not None and pump is not current:
            pump.cancel()
            self.pump = None

    # The pump: runs while toxics are on the link or chunks are queued behind them.
    def _wake_pump(self) -> None:
        wake, self._wake = self._wake, None
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _run_pump(self) -> None:
        me = asyncio.current_task()
        try:
            while not self.closed:
                if not self.queue:
                    if not self.stages:
                        return  # back to writing straight from data_received
                    self._wake = self.loop.create_future()
                    await self._wake
                    continue
                item = self.queue.popleft()
                if item is None:
                    for stage in list(self.stages):
                        if stage.live:
                            await stage.on_eof()
                    if not self.closed:
                        self._finish()
                    return
                self.queued_bytes -= len(item.data)
                if self._src_paused:
                    self._sync_reading()
                await self._through(list(self.stages), 0, item)
        except CloseLink as signal:
            self.close_by_toxic(None, reset=signal.reset)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("proxy link %s failed; closing its connection", self.direction.name)
            self.close_by_toxic(None, reset=False)
        finally:
            if self.pump is me:
                self.pump = None

    async def _through(self, chain: list[Stage[Any]], index: int, chunk: Chunk) -> None:
        while index < len(chain) and not chain[index].live:
            index += 1
        if index == len(chain):
            if not self.closed:
                self._write(chunk.data)
            return
        stage = chain[index]
        stage.toxic.counters.chunks += 1
        await stage.process(chunk, functools.partial(self._through, chain, index + 1))
