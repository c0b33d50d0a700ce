"""Toxics: their JSON model (names, attributes, defaults) and their per-link behaviour.

A :class:`Toxic` is the configuration the API shows; a :class:`Stage` is that toxic running on
one link (one direction of one connection), with its own state and its own toxicity roll, as
a ``ToxicStub`` is in Toxiproxy. Stages run inside the link's pump task, one chunk at a time;
each may delay, split, hold or drop a chunk, or close the link.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from zephon_chaos.faults.proxy.gojson import Float32


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

    def close_by_toxic(self, stage: Stage, *, reset: bool) -> None: ...


@dataclass
class ToxicCounters:
    """Evidence that a toxic fired, kept per proxy and per toxic name (embedded server only)."""

    # One toxicity draw per link (and again when the toxic is updated), as in Toxiproxy.
    applied: int = 0  # draws that made it act
    bypassed: int = 0  # draws that left it inactive
    chunks: int = 0  # chunks it handled while active
    closes: int = 0  # links it closed (timeout, limit_data) or reset (reset_peer)

    def as_json(self) -> dict[str, int]:
        return {
            "applied": self.applied,
            "bypassed": self.bypassed,
            "chunks": self.chunks,
            "closes": self.closes,
        }


@dataclass
class Toxic:
    """One toxic as the API shows it; ``attributes`` are ordered as Go's struct fields."""

    name: str
    type: str
    stream: str
    direction: Direction
    toxicity: float
    attributes: dict[str, int]
    counters: ToxicCounters = field(default_factory=ToxicCounters)

    def as_json(self) -> dict[str, Any]:
        """The ``ToxicWrapper`` JSON shape: attributes first, then name, type, stream, toxicity."""
        return {
            "attributes": dict(self.attributes),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": Float32(self.toxicity),
        }

    def attr(self, name: str) -> int:
        return self.attributes[name]


class Stage:
    """A toxic running on one link. The base class passes data through (Toxiproxy's noop)."""

    def __init__(self, toxic: Toxic, host: StageHost) -> None:
        self.toxic = toxic
        self.host = host
        self.removed = False
        self._waiter: asyncio.Future[bool] | None = None
        self.active = self._roll()

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

    def update(self, toxic: Toxic) -> None:
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
        try:
            return await waiter
        finally:
            handle.cancel()
            if self._waiter is waiter:
                self._waiter = None

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


class LatencyStage(Stage):
    """``latency`` ± ``jitter`` ms after the chunk was read; chunks keep their order."""

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        latency, jitter = self.toxic.attr("latency"), self.toxic.attr("jitter")
        delay_ms = latency
        if jitter > 0:
            delay_ms += random.randrange(jitter * 2) - jitter
        wait = delay_ms / 1000.0 - (self.host.loop.time() - chunk.ts)
        if wait > 0 and not await self.sleep(wait):
            chunk.ts += wait
        await emit(chunk)


class BandwidthStage(Stage):
    """At most ``rate`` KB/s (1 KB = 1000 bytes); big chunks go out in 100 ms slices."""

    def __init__(self, toxic: Toxic, host: StageHost) -> None:
        super().__init__(toxic, host)
        self._owed = 0.0  # seconds of sending time not yet slept, carried between chunks

    def update(self, toxic: Toxic) -> None:
        self._owed = 0.0
        super().update(toxic)

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        rate = self.toxic.attr("rate")
        if rate <= 0:
            # Toxiproxy spins on a zero rate; an unlimited pass-through is the useful reading.
            self._owed = 0.0
            await emit(chunk)
            return
        data = chunk.data
        self._owed += len(data) / (rate * 1000.0)
        slice_size = rate * 100
        while len(data) > slice_size:
            if await self.sleep(0.1):
                await emit(Chunk(data, chunk.ts))
                return
            await emit(Chunk(data[:slice_size], chunk.ts))
            data = data[slice_size:]
            self._owed -= 0.1
        started = self.host.loop.time()
        if await self.sleep(self._owed):
            self._owed = 0.0
        else:
            self._owed -= self.host.loop.time() - started
        await emit(Chunk(data, chunk.ts))


class SlowCloseStage(Stage):
    """Delay the close of the stream by ``delay`` ms."""

    async def on_eof(self) -> None:
        await self.sleep(self.toxic.attr("delay") / 1000.0)


class TimeoutStage(Stage):
    """Hold all data; with ``timeout`` > 0 close the link that long after the toxic started.

    With ``timeout`` 0 the connection is never closed by the toxic; held data flows again once
    the toxic is removed, as in Toxiproxy.
    """

    def __init__(self, toxic: Toxic, host: StageHost) -> None:
        super().__init__(toxic, host)
        self._timer: asyncio.TimerHandle | None = None

    def attach(self) -> None:
        timeout = self.toxic.attr("timeout")
        if self.live and timeout > 0:
            self._timer = self.host.loop.call_later(timeout / 1000.0, self._expire)

    def detach(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.live:
            self.toxic.counters.closes += 1
            self.host.close_by_toxic(self, reset=False)

    async def _hold_while_live(self) -> None:
        while self.live:
            await self.hold()

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        await self._hold_while_live()
        await emit(chunk)

    async def on_eof(self) -> None:
        await self._hold_while_live()


class ResetPeerStage(Stage):
    """On the first data (or close) seen, wait ``timeout`` ms, then reset both sockets (RST)."""

    async def _reset(self) -> None:
        while self.live:  # an update restarts the wait with the new timeout
            if not await self.sleep(self.toxic.attr("timeout") / 1000.0):
                self.toxic.counters.closes += 1
                raise CloseLink(reset=True)

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        await self._reset()
        if not self.live:
            await emit(chunk)

    async def on_eof(self) -> None:
        await self._reset()


class SlicerStage(Stage):
    """Split chunks into ``average_size`` ± ``size_variation`` byte slices, ``delay`` µs apart."""

    def _cuts(self, size: int) -> list[int]:
        average = max(1, self.toxic.attr("average_size"))
        variation = max(0, self.toxic.attr("size_variation"))
        cuts: list[int] = []
        pending = [(0, size)]
        while pending:
            start, end = pending.pop()
            if (end - start) - average <= variation or end - start <= 1:
                cuts.append(end)
                continue
            shift = random.randrange(variation * 2) - variation if variation else 0
            mid = min(end - 1, max(start + 1, start + (end - start) // 2 + shift))
            pending.append((mid, end))
            pending.append((start, mid))
        return cuts

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        delay = self.toxic.attr("delay") / 1_000_000.0
        start = 0
        for end in self._cuts(len(chunk.data)):
            await emit(Chunk(chunk.data[start:end], chunk.ts))
            start = end
            if start < len(chunk.data) and await self.sleep(delay):
                await emit(Chunk(chunk.data[start:], chunk.ts))
                return


class LimitDataStage(Stage):
    """Pass ``bytes`` bytes in total on this link, then close it."""

    def __init__(self, toxic: Toxic, host: StageHost) -> None:
        super().__init__(toxic, host)
        self.transmitted = 0  # kept across updates, like Toxiproxy's per-link state

    async def process(self, chunk: Chunk, emit: Emit) -> None:
        remaining = max(0, self.toxic.attr("bytes") - self.transmitted)
        data = chunk.data[:remaining] if remaining < len(chunk.data) else chunk.data
        if data:
            await emit(Chunk(data, chunk.ts))
            self.transmitted += len(data)
        if self.toxic.attr("bytes") - self.transmitted <= 0:
            self.toxic.counters.closes += 1
            raise CloseLink(reset=False)


@dataclass(frozen=True)
class ToxicKind:
    """A toxic type: its API name, its Go struct (for error text), attributes and stage."""

    type_name: str
    go_struct: str
    fields: tuple[tuple[str, str], ...]  # (json name, Go type), in Go's field order
    stage: type[Stage]

    registry: ClassVar[dict[str, ToxicKind]] = {}

    @property
    def field_types(self) -> dict[str, str]:
        return dict(self.fields)

    def defaults(self) -> dict[str, int]:
        return {name: 0 for name, _ in self.fields}


def _register(kind: ToxicKind) -> None:
    ToxicKind.registry[kind.type_name] = kind


for _kind in (
    ToxicKind("noop", "NoopToxic", (), Stage),
    ToxicKind("latency", "LatencyToxic", (("latency", "int64"), ("jitter", "int64")), LatencyStage),
    ToxicKind("bandwidth", "BandwidthToxic", (("rate", "int64"),), BandwidthStage),
    ToxicKind("slow_close", "SlowCloseToxic", (("delay", "int64"),), SlowCloseStage),
    ToxicKind("timeout", "TimeoutToxic", (("timeout", "int64"),), TimeoutStage),
    ToxicKind("reset_peer", "ResetToxic", (("timeout", "int64"),), ResetPeerStage),
    ToxicKind(
        "slicer",
        "SlicerToxic",
        (("average_size", "int"), ("size_variation", "int"), ("delay", "int")),
        SlicerStage,
    ),
    ToxicKind("limit_data", "LimitDataToxic", (("bytes", "int64"),), LimitDataStage),
):
    _register(_kind)

TOXIC_TYPES: tuple[str, ...] = tuple(ToxicKind.registry)


def make_stage(toxic: Toxic, host: StageHost) -> Stage:
    return ToxicKind.registry[toxic.type].stage(toxic, host)
