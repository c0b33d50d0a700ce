"""What every toxic shares: the API's toxic model and the stage that runs it on a link.

A :class:`Toxic` is the configuration the API shows; a :class:`Stage` is that toxic running on
one link (one direction of one connection), with its own state and its own toxicity roll, as
a ``ToxicStub`` is in Toxiproxy. Stages run inside the link's pump task, one chunk at a time;
each may delay, split, hold or drop a chunk, or close the link. The base stage passes data
through (Toxiproxy's noop); each toxic's module overrides what it changes.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, Protocol, TypeVar

from zephon_chaos.faults.proxy.gojson import Float32
from zephon_chaos.faults.proxy.toxics.attributes import Attributes

A = TypeVar("A", bound=Attributes)


class Direction(enum.IntEnum):
    """Toxiproxy's stream directions, in its order: upstream toxics are listed first."""

    UPSTREAM = 0
    DOWNSTREAM = 1

    @classmethod
    def parse(cls, stream: str) -> Direction | None:
        """Go's ``stream.ParseDirection``: case-insensitive, nothing else accepted."""
        return {"upstream": cls.UPSTREAM, "downstream": cls.DOWNSTREAM}.get(stream.lower())


class Chunk:
    """Bytes read from one socket, stamped with the loop time they were read at."""

    __slots__ = ("data", "ts")

    def __init__(self, data: bytes, ts: float) -> None:
        self.data = data
        self.ts = ts


Emit = Callable[[Chunk], Awaitable[None]]


class CloseLink(Exception):
    """Raised by a stage to end its link; ``reset`` closes both sockets with RST."""

    def __init__(self, *, reset: bool) -> None:
        super().__init__("reset" if reset else "close")
        self.reset = reset


class StageHost(Protocol):
    """What a stage needs from the link it runs on."""

    loop: asyncio.AbstractEventLoop

    def close_by_toxic(self, stage: Stage[Any], *, reset: bool) -> None: ...


@dataclass
class ToxicCounters:
    """Evidence that a toxic fired, kept per proxy and per toxic name (embedded server only)."""

    # One toxicity draw per link (and again when the toxic is updated), as in Toxiproxy.
    applied: int = 0  # draws that made it act
    bypassed: int = 0  # draws that left it inactive
    chunks: int = 0  # chunks it handled while active
    closes: int = 0  # links it closed (timeout, limit_data) or reset (reset_peer)
    # When it delayed data (latency, bandwidth...): merged [start, end] intervals of this
    # machine's monotonic clock, which the ranks' records share, so that a judge can tell how
    # much of an attempt the network took. A stall (``hold``) is not counted: it is the fault.
    held: list[list[float]] = field(default_factory=list)

    def delayed(self, start: float, end: float) -> None:
        """Count ``[start, end]`` as time this toxic held data back. Delays end in the order
        they end, and those of two connections may overlap: one that touches the last kept
        interval widens it either way; past the cap, the last one stretches over it (more
        excused, never less)."""
        if end <= start:
            return
        last = self.held[-1] if self.held else None
        touches = last is not None and start <= last[1] + HELD_GAP_S and end >= last[0] - HELD_GAP_S
        if last is not None and (touches or len(self.held) >= MAX_HELD_INTERVALS):
            last[0], last[1] = min(last[0], start), max(last[1], end)
        else:
            self.held.append([start, end])

    def as_json(self) -> dict[str, Any]:
        counts = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "held"}
        return {**counts, "held": [[round(a, 6), round(b, 6)] for a, b in self.held]}


HELD_GAP_S = 0.001
"""Delays closer than this are one interval (chunks of one message)."""
MAX_HELD_INTERVALS = 50_000


@dataclass
class Toxic(Generic[A]):
    """One toxic as the API shows it, with its typed attributes."""

    name: str
    type: str
    stream: str
    direction: Direction
    toxicity: float
    attributes: A
    counters: ToxicCounters = field(default_factory=ToxicCounters)

    def as_json(self) -> dict[str, Any]:
        """The ``ToxicWrapper`` JSON shape: attributes first, then name, type, stream, toxicity."""
        return {
            "attributes": self.attributes.as_json(),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": Float32(self.toxicity),
        }


class Stage(Generic[A]):
    """A toxic running on one link. The base class passes data through (Toxiproxy's noop)."""

    def __init__(self, toxic: Toxic[A], host: StageHost) -> None:
        self.toxic = toxic
        self.host = host
        self.removed = False
        self._waiter: asyncio.Future[bool] | None = None
        self.active = self._roll()

    @property
    def attributes(self) -> A:
        """The toxic's attributes now (an update replaces them)."""
        return self.toxic.attributes

    def _roll(self) -> bool:
        """Toxicity is a probability per link, drawn when the toxic starts on the link."""
        active = random.random() < self.toxic.toxicity
        if active:
            self.toxic.counters.applied += 1
        else:
            self.toxic.counters.bypassed += 1
        return active

    # Lifecycle, called by the link.
    def attach(self) -> None:
        """Start whatever runs independently of data (timers)."""

    def detach(self) -> None:
        """Stop timers; any held chunk is released by :meth:`interrupt`."""

    def update(self, toxic: Toxic[A]) -> None:
        """New attributes or toxicity: Toxiproxy restarts the stub, so the roll is redrawn."""
        self.detach()
        self.toxic = toxic
        self.active = self._roll()
        self.interrupt()
        self.attach()

    def remove(self) -> None:
        self.removed = True
        self.detach()
        self.interrupt()

    @property
    def live(self) -> bool:
        return self.active and not self.removed

    # Waiting that an API change can cut short, as Toxiproxy's Interrupt channel does.
    def interrupt(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            _resolve(waiter, True)

    async def sleep(self, seconds: float) -> bool:
        """Sleep unless interrupted first; return True when interrupted."""
        if seconds <= 0:
            return False
        loop = self.host.loop
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiter = waiter
        handle = loop.call_later(seconds, _resolve, waiter, False)
        began = loop.time()
        try:
            return await waiter
        finally:
            handle.cancel()
            if self._waiter is waiter:
                self._waiter = None
            self.toxic.counters.delayed(began, loop.time())

    async def hold(self) -> None:
        """Wait until interrupted (an update or the toxic's removal)."""
        waiter: asyncio.Future[bool] = self.host.loop.create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            if self._waiter is waiter:
                self._waiter = None

    # Data, called by the link's pump.
    async def process(self, chunk: Chunk, emit: Emit) -> None:
        await emit(chunk)

    async def on_eof(self) -> None:
        """The source closed; a stage may delay the close (slow_close) or act on it."""


def _resolve(waiter: asyncio.Future[bool], interrupted: bool) -> None:
    if not waiter.done():
        waiter.set_result(interrupted)
